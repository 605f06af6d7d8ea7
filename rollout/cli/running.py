"""How a verb runs: :func:`command` makes a verb (its option group, its own options) a typer command, and :func:`run`
turns what the verb returns or raises into the exit code: the only place an error becomes an exit code, a message
on stderr and, with ``--json``, the error document. Nothing here imports a verb (the live verbs' commands import
it, and an import contract keeps them from the Pulumi SDK)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import tempfile
import traceback
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from refusals.exits import Exit
from rollout.cli.options import REPORT, LiveTarget
from rollout.console import say
from vocabulary.errors import ErrorKind

if TYPE_CHECKING:
    from fleetspec.load import SpecError
    from refusals.errors import Refusal


# ---------------------------------------------------------------- from what a verb returns or raises to the exit code


def run(call: Callable[[], Exit], debug: bool = False, as_json: bool = False, speaker: str | None = None) -> NoReturn:
    """Run a verb's call and exit with its code. A refusal (invalid input: a stack file, a kubeconfig or context,
    another cluster than the stack's; a cluster or backend call that failed) exits with its code and one message on
    stderr, and never a partial report; usage errors are typer's (exit 2, with the usage). Anything else is a
    defect of gpu-rollout, not of the input: exit 70, one line saying so and where its traceback was written
    (printed too with ``--debug``). ``speaker`` begins the backend's messages (``fleet: ...``)."""
    from rollout import documents

    try:
        code = call()
    except typer.BadParameter as error:  # a usage error the verb found: typer shows it with the usage
        if as_json:
            from fleetspec.load import SpecProblem

            hint = error.param_hint if isinstance(error.param_hint, str) else ""
            message = error.format_message()
            documents.write(documents.error_document(Exit.INVALID, ErrorKind.INVALID_INPUT, message,
                                                     [SpecProblem(hint, error.message)] if hint else []))
        raise
    except (typer.TyperException, typer.Exit, typer.Abort):  # usage errors and exits: typer's to show
        raise
    except Exception as error:  # noqa: BLE001 - the one place an error becomes an exit code instead of a traceback
        refusal = refusal_of(error)
        if refusal is None:
            message = internal_error(error, debug)
            if as_json:
                documents.write(documents.error_document(Exit.INTERNAL, ErrorKind.INTERNAL, message))
            raise typer.Exit(Exit.INTERNAL) from None
        documents.refused(refusal.code, refusal.kind, refusal.text(speaker), refusal.problems,
                          as_json=as_json and refusal.documented)
        raise typer.Exit(refusal.code) from None
    raise typer.Exit(Exit(code))


def refusal_of(error: Exception) -> Refusal | None:
    """The refusal an error is, or stands for (the errors of the packages that know no CLI); None for a defect."""
    from checks.errors import ClusterError, ConfigError, WrongClusterError
    from fleetspec.load import SpecError
    from refusals import errors

    if isinstance(error, errors.Refusal):
        return error
    if isinstance(error, SpecError):
        return errors.InvalidInput(spec_error_text(error), error.problems)
    if isinstance(error, WrongClusterError):
        return errors.WrongCluster(str(error))
    if isinstance(error, ConfigError):
        return errors.UnusableKubeconfig(str(error))
    if isinstance(error, ClusterError):
        return errors.ClusterFailed(str(error))
    return None


def spec_error_text(error: SpecError) -> str:
    """The error's heading, then one line per problem (key path: what is wrong), whatever line breaks a
    message carries (a YAML parser's quotes the offending line)."""
    head = str(error).split("\n", 1)[0]
    return "\n".join([head] + [f"  {problem.one_line()}" for problem in error.problems])


def internal_error(error: Exception, debug: bool) -> str:
    """Say in one line that gpu-rollout failed (not the input), and where the traceback went; return that line."""
    text = "".join(traceback.format_exception(error))
    where = "nowhere (the file could not be written)"
    try:
        handle, name = tempfile.mkstemp(prefix="gpu-rollout-", suffix=".traceback")
        with open(handle, "w", encoding="utf-8") as file:
            file.write(f"command line: {' '.join(sys.argv)}\n\n{text}")
        where = name
    except OSError:
        pass
    what = " ".join(f"{type(error).__name__}: {error}".split())
    message = (f"internal error: gpu-rollout failed, not because of its input ({what[:300]}); traceback written to "
               f"{where}" + ("" if debug else " (--debug prints it)") + "; please report it")
    say(message)
    if debug:
        sys.stderr.write(text)
    return message


# ---------------------------------------------------------------- one way to make a verb a command


def _group_parameters(group: type) -> list[inspect.Parameter]:
    """The group's fields as the keyword parameters typer reads its options from."""
    hints = typing.get_type_hints(group, include_extras=True)
    return [inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[field.name],
                              default=inspect.Parameter.empty if field.default is dataclasses.MISSING
                              else field.default)
            for field in dataclasses.fields(group)]


def command(group: type, *, speaker: str | None = None) -> Callable[[Callable[..., Exit]], Callable[..., None]]:
    """A verb's command: the options of ``group`` (a dataclass of :mod:`rollout.cli.options`), then the verb's own
    (its parameters after the first, which takes the group), then the group's ``--json`` and ``--debug``. The
    command builds the group's value and runs ``verb(target, **own)`` through :func:`run`, which turns what it
    returns or raises into the exit code."""
    noun = getattr(group, "NOUN", "verb")
    shared = _group_parameters(group)

    def decorate(verb: Callable[..., Exit]) -> Callable[..., None]:
        parameters = list(inspect.signature(verb, eval_str=True).parameters.values())
        if not parameters or parameters[0].annotation is not group:
            raise TypeError(f"{noun} {verb.__name__}: its first parameter takes the {group.__name__}")
        own = parameters[1:]
        clash = {p.name for p in own} & {p.name for p in shared}
        if clash:
            raise TypeError(f"{noun} {verb.__name__}: {sorted(clash)} are options every {noun} already has")

        def call(**options: Any) -> None:
            target = group(**{p.name: options.pop(p.name) for p in shared})
            run(lambda: verb(target, **options), target.debug, getattr(target, "as_json", False), speaker)

        call.__name__ = call.__qualname__ = verb.__name__  # typer names the command after the function
        call.__doc__ = verb.__doc__
        call.__module__ = verb.__module__
        # A parameter without a default (a positional argument, such as release-node's NODE) comes first.
        required = [p for p in own if p.default is inspect.Parameter.empty]
        optional = [p for p in own if p.default is not inspect.Parameter.empty]
        call.__signature__ = inspect.Signature([  # type: ignore[attr-defined]  # typer reads the options from it
            *(p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in required),
            *(p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in shared if p.name not in REPORT),
            *(p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in optional),
            *(p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in shared if p.name in REPORT),
        ])
        return call

    return decorate


live_verb = command(LiveTarget)


