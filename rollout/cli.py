"""`gpu-rollout`: the command line. Each verb parses its flags, resolves the stack (and, for the live verbs,
the cluster) through :mod:`rollout.context`, and makes one call into a package; :func:`run` turns what
that call returns or raises into an exit code (:class:`rollout.exits.Exit`) and a one-line message. The live
verbs declare only their own options: :func:`live_verb` adds the ones they share (:func:`live_target`) and hands
the verb one :class:`LiveTarget`.

Exit codes (:class:`rollout.exits.Exit`): 0 all good; 1 a check or mandatory policy failed; 2 the input is
invalid (the message names the key path, file or flag, and what is wrong); 70 a defect of gpu-rollout, not of
its input (one line, and the file its traceback was written to). Bad input never ends in a traceback.

Verbs import what they use when they run: ``--help`` and the live verbs never load the Pulumi SDK, which
only ``plan``, ``diff`` (both render the program offline) and ``rollback`` (the Automation API) need.
"""

from __future__ import annotations

import inspect
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from rollout.console import say
from rollout.exits import Exit

if TYPE_CHECKING:
    from rollout.context import Live
    from fleetspec.load import SpecError, SpecProblem

ABOUT = ("Move the GPU nodes of a Kubernetes inference fleet to a new NVIDIA driver: plan it offline, check the "
         "cluster, roll out canary then prod, watch, pause, verify and attest, roll back. Every verb below; "
         "`gpu-rollout VERB --help` for its options.")

app = typer.Typer(
    name="gpu-rollout",
    help=ABOUT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DISTRIBUTION = "gpu-driver-upgrade"  # the name pyproject.toml installs gpu-rollout under


def version_text() -> str:
    """``gpu-rollout <version>`` and the project folder it runs from (two worktrees may share one venv)."""
    from importlib.metadata import PackageNotFoundError, version

    from rollout.project import SOURCE_DIR

    try:
        number = version(DISTRIBUTION)
    except PackageNotFoundError:
        number = "unknown (not installed: run from the source)"
    return f"gpu-rollout {number} (from {SOURCE_DIR})"


def _print_version(given: bool) -> None:
    if given:
        sys.stdout.write(version_text() + "\n")
        raise typer.Exit(Exit.OK)


@app.callback(help=ABOUT)
def _root(
    _version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True,
                           help="Print gpu-rollout's version and the checkout it runs from, and exit.")
    ] = False,
) -> None:
    """The command group: each verb is a command below."""


# ---------------------------------------------------------------- options every verb shares

StackOption = Annotated[
    str | None, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Stack name: reads Pulumi.<NAME>.yaml.")
]
StackFileOption = Annotated[
    Path | None, typer.Option("--stack-file", envvar="GPU_ROLLOUT_STACK_FILE", help="Path of a stack file.")
]
ProjectDirOption = Annotated[
    Path | None,
    typer.Option("--project-dir", envvar="GPU_ROLLOUT_PROJECT_DIR",
                 help="The Pulumi project: Pulumi.yaml, __main__.py and Pulumi.<stack>.yaml (default: the current "
                 "folder if it holds Pulumi.yaml, else the checkout gpu-rollout runs from)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DebugOption = Annotated[
    bool, typer.Option("--debug", envvar="GPU_ROLLOUT_DEBUG",
                       help="On an internal error, print the traceback on stderr (it is always written to a file).")
]

# Live verbs only. No envvar on these two: an ambient KUBECONFIG or context must never beat what the stack
# declares (cluster.existing.kubeconfig/context). KUBECONFIG is still read, below the stack's file, by
# checks.kube.connect (rollout.context has the whole precedence).
KubeconfigOption = Annotated[
    str | None,
    typer.Option("--kubeconfig", help="kubeconfig file (else the stack's cluster.existing.kubeconfig, else "
                 "$KUBECONFIG, else ~/.kube/config)."),
]
ContextOption = Annotated[
    str | None,
    typer.Option("--context", help="kubeconfig context (else the stack's cluster.existing.context, else the "
                 "kubeconfig's current context)."),
]


def run(call: Callable[[], Exit], debug: bool = False, as_json: bool = False) -> NoReturn:
    """Run a verb's call and exit with its code. Invalid input (a stack file, a kubeconfig or context, another
    cluster than the stack's) exits 2 and a cluster call that failed exits 1, each with one message on stderr
    and never a partial report; usage errors are typer's (exit 2, with the usage). Anything else is a defect
    of gpu-rollout, not of the input: exit 70, one line saying so and where its traceback was written (printed
    too with ``--debug``)."""
    from checks.errors import ClusterError, ConfigError, WrongClusterError
    from fleetspec.load import SpecError

    try:
        code = call()
    except typer.BadParameter as error:  # a usage error the verb found: typer shows it with the usage
        if as_json:
            from rollout import documents
            from fleetspec.load import SpecProblem

            hint = error.param_hint if isinstance(error.param_hint, str) else ""
            message = error.format_message()
            documents.write(documents.error_document(Exit.INVALID, "invalid-input", message,
                                                     [SpecProblem(hint, error.message)] if hint else []))
        raise
    except (typer.TyperException, typer.Exit, typer.Abort):  # usage errors and exits: typer's to show
        raise
    except SpecError as error:
        refuse(Exit.INVALID, "invalid-input", spec_error_text(error), error.problems, as_json=as_json)
    except WrongClusterError as error:
        refuse(Exit.INVALID, "wrong-cluster", f"wrong cluster: {error}", as_json=as_json)
    except ConfigError as error:
        refuse(Exit.INVALID, "kubeconfig", f"--kubeconfig/--context: {error}", as_json=as_json)
    except ClusterError as error:
        refuse(Exit.FAILED, "cluster", f"cluster error: {error}", as_json=as_json)
    except Exception as error:  # noqa: BLE001 - the one place a defect becomes exit 70 instead of a traceback
        message = internal_error(error, debug)
        if as_json:
            from rollout import documents

            documents.write(documents.error_document(Exit.INTERNAL, "internal", message))
        raise typer.Exit(Exit.INTERNAL) from None
    raise typer.Exit(Exit(code))


def refused(code: Exit, kind: str, message: str, problems: Sequence[SpecProblem] = (), *, as_json: bool) -> Exit:
    """Say why a verb stops on stderr; with --json, print the error document on stdout too. Returns ``code``."""
    from rollout import documents

    return documents.refused(code, kind, message, problems, as_json=as_json)


def refuse(code: Exit, kind: str, message: str, problems: Sequence[SpecProblem] = (), *, as_json: bool) -> NoReturn:
    raise typer.Exit(refused(code, kind, message, problems, as_json=as_json)) from None


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


# ---------------------------------------------------------------- plan (offline)

PreviousOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--previous-outputs",
        help="The stack's last deployment, as `pulumi stack output --json` prints it (default: the stack file at "
        "the merge base with the default branch, as diff assumes; none there: a first deployment); what is a "
        "promotion and what the cloud cannot change in place are judged against it.",
    ),
]


CanaryOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--canary-outputs",
        help="A prod stack's canary (promotion.canaryStack), as `pulumi stack output --json --stack <canary>` "
        "prints it (default: the canary's stack file beside this one or in the project, rendered offline); the "
        "prod gate checks that the canary runs the attested driver.",
    ),
]

FromBackendOption = Annotated[
    bool,
    typer.Option("--from-backend", help="Read the last deployment and the canary's outputs from the Pulumi backend "
                 "(`pulumi stack output --json`, through the pulumi CLI on PATH) instead of assuming them offline."),
]

AtOption = Annotated[
    str | None,
    typer.Option(
        "--at",
        help="Judge as of this moment, ISO 8601 with a zone (2026-12-09T10:00:00Z): the dwell between waves, a "
        "generation's age and the maintenance window (default: now).",
    ),
]


def moment(value: str | None) -> datetime | None:
    """``--at``: an aware ISO 8601 moment, or None for the clock; anything else is a usage error (exit 2)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 moment such as 2026-12-09T10:00:00Z",
                                 param_hint="--at") from None
    if parsed.tzinfo is None:
        raise typer.BadParameter(f"{value!r} names no time zone: add Z or an offset such as +01:00",
                                 param_hint="--at")
    return parsed


def _backend_refusal(call: Callable[[], Exit], as_json: bool) -> Callable[[], Exit]:
    """A verb's call whose backend reading failed exits with the backend's code and one line."""
    def guarded() -> Exit:
        from rollout.backend import BackendError

        try:
            return call()
        except BackendError as error:
            return refused(error.code, "backend", str(error), as_json=as_json)

    return guarded


@app.command(short_help="Offline preview of a stack: what `pulumi up` sends, and the verdicts.")
def plan(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = None,
    as_json: JsonOption = False,
    previous_outputs: PreviousOutputsOption = None,
    canary_outputs: CanaryOutputsOption = None,
    at: AtOption = None,
    from_backend: FromBackendOption = False,
    show_data: Annotated[
        bool, typer.Option("--show-data", help="Also print large ConfigMap data (the validation program) whole, after "
                           "the report (the table shows its size and sha256; --json always holds it whole).")
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Offline preview of a stack: what `pulumi up` would send, with no cloud and no Pulumi CLI, and the policy
    pack's verdicts. The first lines say the stack file read, the project folder, and what the verdicts rest on:
    the last deployment and the canary's outputs (given, --from-backend, or the offline assumption)."""

    def call() -> Exit:
        from rollout import context
        from rollout import plan as verb

        target = context.resolve_stack(stack, stack_file_path, project_dir)
        previous = verb.read_previous_outputs(previous_outputs) if previous_outputs is not None else None
        canary = verb.read_previous_outputs(canary_outputs, "--canary-outputs") if canary_outputs is not None else None
        return verb.execute(target.name, target.path, as_json=as_json, project_dir=target.project_dir,
                            previous_outputs=previous, canary_outputs=canary, previous_file=previous_outputs,
                            canary_path=canary_outputs, from_backend=from_backend, show_data=show_data,
                            shown_path=target.shown_path, project_found=target.project_found, now=when)

    when = moment(at)

    run(_backend_refusal(call, as_json), debug, as_json)


# ---------------------------------------------------------------- diff (offline, between git revisions)


@app.command(short_help="Changes per stack between two git revisions: driver, pools, policy.")
def diff(
    base: Annotated[
        str | None, typer.Option("--base", help="Git revision of the old side (default: the merge base of HEAD with "
                                 "the default branch: origin/HEAD, else main, else master).")
    ] = None,
    head: Annotated[
        str | None, typer.Option("--head", help="Git revision of the new side (default: the work tree).")
    ] = None,
    stacks: Annotated[
        list[str] | None, typer.Option("--stack", help="Only this stack (repeatable; default: every stack whose "
                                       "config differs).")
    ] = None,
    project_dir: ProjectDirOption = None,
    as_markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown of one PR comment.")] = False,
    as_json: JsonOption = False,
    previous_outputs: Annotated[
        Path | None, typer.Option("--previous-outputs", help="With one --stack: its last deployment, as `pulumi "
                                  "stack output --json` prints it (default: the stack file at --base, rendered).")
    ] = None,
    canary_outputs: Annotated[
        Path | None, typer.Option("--canary-outputs", help="With one --stack: its canary's outputs, as `pulumi stack "
                                  "output --json --stack <canary>` prints them (default: the canary's stack file on "
                                  "the same side, rendered).")
    ] = None,
    from_backend: FromBackendOption = False,
    debug: DebugOption = False,
) -> None:
    """Driver, operator, pool, image and policy changes per stack between two git revisions (offline). Head is
    judged against base as its last deployment and its canary's stack file, as `plan` assumes, unless given or
    --from-backend; each stack says what it was judged against."""

    def call() -> Exit:
        from rollout import basis
        from rollout import diff as verb
        from rollout import plan as plan_verb
        from rollout.project import default_project_dir

        if as_markdown and as_json:
            raise typer.BadParameter("give --markdown or --json, not both", param_hint="--markdown")
        files = [flag for flag, given in (("--previous-outputs", previous_outputs), ("--canary-outputs", canary_outputs))
                 if given is not None]
        if files and len(stacks or []) != 1:
            raise typer.BadParameter("they are one stack's outputs: give exactly one --stack with them",
                                     param_hint="/".join(files))
        previous = canary = None
        if previous_outputs is not None:
            previous = (plan_verb.read_previous_outputs(previous_outputs),
                        basis.given_outputs(previous_outputs, "last deployment", "--previous-outputs"))
        if canary_outputs is not None:
            canary = (plan_verb.read_previous_outputs(canary_outputs, "--canary-outputs"),
                      basis.given_outputs(canary_outputs, "canary", "--canary-outputs"))
        project = project_dir if project_dir is not None else default_project_dir()
        return verb.execute(project, base, head, stacks, as_markdown=as_markdown, as_json=as_json,
                            given=verb.Given(previous, canary, from_backend))

    run(_backend_refusal(call, as_json), debug, as_json)


# ---------------------------------------------------------------- what the workflows deploy


@app.command("deploy-plan", short_help="Which stacks a merge deploys, in which order, with which policy pack.")
def deploy_plan(
    stacks: Annotated[
        list[str] | None, typer.Option("--stack", help="Only this stack (repeatable; default: every stack file).")
    ] = None,
    head: Annotated[
        str | None, typer.Option("--head", help="The commit to deploy (default: HEAD), on the default branch.")
    ] = None,
    project_dir: ProjectDirOption = None,
    as_json: JsonOption = False,
    at: AtOption = None,
    debug: DebugOption = False,
) -> None:
    """Which stacks differ from what they last deployed (pulumi stack history) and deploy, canary stages first,
    with the commit whose policy pack each `up` enforces; why each other stack is left alone (a stack outside its
    maintenance window among them)."""

    def call() -> Exit:
        from rollout import deploy as verb
        from rollout.project import default_project_dir

        project = project_dir if project_dir is not None else default_project_dir()
        return verb.execute(project, stacks, head, as_json, when)

    when = moment(at)
    run(call, debug, as_json)


@app.command("stacks", short_help="The project's stacks as their files declare them: stage, cloud, credentials.")
def stacks_verb(
    stage: Annotated[
        str | None, typer.Option("--stage", help="Only the stacks of this stage (canary or prod).")
    ] = None,
    stacks: Annotated[list[str] | None, typer.Option("--stack", help="Only this stack (repeatable).")] = None,
    project_dir: ProjectDirOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """The project's stacks as their stack files declare them: stage, cloud, credentials, promotion (offline)."""

    def call() -> Exit:
        from rollout import deploy as verb
        from rollout.project import default_project_dir
        from fleetspec.base import Stage

        if stage is not None and stage not in Stage._value2member_map_:
            raise typer.BadParameter(f"{stage!r} is not a stage (canary or prod)", param_hint="--stage")
        project = project_dir if project_dir is not None else default_project_dir()
        return verb.list_stacks(project, stacks, Stage(stage) if stage else None, as_json)

    run(call, debug, as_json)


# ---------------------------------------------------------------- the fleet: one promotion train across the stacks

fleet_app = typer.Typer(name="fleet", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                        short_help="One promotion train across many clusters: plan, status, advance.",
                        help="One driver promotion train across the fleet's stacks, wave by wave (Fleet.yaml; "
                        "docs/fleet.md).")
app.add_typer(fleet_app)

KubeconfigDirOption = Annotated[
    Path | None,
    typer.Option("--kubeconfig-dir", help="A folder with one kubeconfig per stack, named after it (DIR/<stack>); a "
                 "stack without one: its cluster.existing kubeconfig and context, else $KUBECONFIG."),
]


def _fleet_call(call: Callable[[], Exit], as_json: bool) -> Callable[[], Exit]:
    """A fleet verb's call, with the backend's and git's refusals turned into their exit codes."""

    def wrapped() -> Exit:
        from preview.revisions import RevisionError
        from rollout.backend import BackendError

        try:
            return call()
        except BackendError as error:
            return refused(error.code, "backend", f"fleet: {error}", as_json=as_json)
        except RevisionError as error:
            return refused(Exit.INVALID, "invalid-input", f"{error.flag}: {error}", as_json=as_json)

    return wrapped


def _project(project_dir: Path | None) -> Path:
    from rollout.project import default_project_dir

    return project_dir if project_dir is not None else default_project_dir()


@fleet_app.command("plan")
def fleet_plan(
    project_dir: ProjectDirOption = None,
    as_markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown of one PR comment.")] = False,
    as_json: JsonOption = False,
    at: AtOption = None,
    debug: DebugOption = False,
) -> None:
    """Offline, wave by wave: each stack's plan and policy verdict, the driver it moves from and to, and what each
    wave waits for. Exit 1 when the pack would refuse a stack."""

    def call() -> Exit:
        from rollout import fleet_plan as verb

        if as_markdown and as_json:
            raise typer.BadParameter("give --markdown or --json, not both", param_hint="--markdown")
        return verb.execute(_project(project_dir), as_json, as_markdown, when)

    when = moment(at)
    run(call, debug, as_json)


@fleet_app.command("status")
def fleet_status(
    project_dir: ProjectDirOption = None,
    kubeconfig_dir: KubeconfigDirOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Where the train is, read from the world: each stack's last deployment (the backend), each cluster's upgrade
    states, pauses and signs, the attestations; the current wave and what blocks its next step. Changes nothing."""

    def call() -> Exit:
        from rollout import fleet as verb
        from rollout.fleet_project import load_project

        project = load_project(_project(project_dir))
        return verb.status(project, verb.AutomationBackend(project.project_dir), verb.Clusters(kubeconfig_dir),
                           as_json)

    run(_fleet_call(call, as_json), debug, as_json)


@fleet_app.command("advance")
def fleet_advance(
    project_dir: ProjectDirOption = None,
    kubeconfig_dir: KubeconfigDirOption = None,
    yes: Annotated[bool, typer.Option("--yes", help="Take the step (else: say what it is, change nothing).")] = False,
    stage: Annotated[
        str | None, typer.Option("--stage", help="Bring up only stacks of this stage (canary or prod); an `up` of the "
                                 "other stage is reported as withheld, for a run from that stage's environment.")
    ] = None,
    packs: Annotated[
        Path | None, typer.Option("--packs", help="The protected policy packs: DIR/<commit>/pack and "
                                  "DIR/<commit>/<stage>.json for each commit deploy-plan names (packRef).")
    ] = None,
    policy_pack: Annotated[
        str | None, typer.Option("--policy-pack", help="Without --packs: the pack every `up` enforces (default: the "
                                 "project's policy/, with policy/<stage>.json).")
    ] = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Take the train's next safe step and return: `up` the stacks of the current wave that differ from what they
    run (wave concurrency, fleet limits, maintenance windows), verify the ones done, or, on a bad sign in any
    cluster, pause every stack the train started and exit 1. Never waits for a rollout; run it again."""

    def call() -> Exit:
        from rollout import fleet as verb
        from rollout.fleet_project import load_project
        from fleetspec.base import Stage

        if stage is not None and stage not in Stage._value2member_map_:
            raise typer.BadParameter(f"{stage!r} is not a stage (canary or prod)", param_hint="--stage")
        if packs is not None and policy_pack is not None:
            raise typer.BadParameter("give --packs or --policy-pack, not both", param_hint="--packs")
        if packs is not None and not packs.is_dir():
            raise typer.BadParameter(f"{packs} is not a folder", param_hint="--packs")
        project = load_project(_project(project_dir))
        return verb.advance(project, verb.AutomationBackend(project.project_dir), verb.Clusters(kubeconfig_dir),
                            yes=yes, packs=verb.Packs(packs, Path(policy_pack) if policy_pack else None),
                            only_stage=Stage(stage) if stage else None, as_json=as_json)

    run(_fleet_call(call, as_json), debug, as_json)


@fleet_app.command("halt")
def fleet_halt(
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded on the train's lease and on each node.")],
    project_dir: ProjectDirOption = None,
    kubeconfig_dir: KubeconfigDirOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Halt the train and pause every stack of the fleet at once (`pause` semantics; an image-owned stack cannot be
    paused: no `up` of it follows, and what is in flight is reported)."""

    def call() -> Exit:
        from rollout import fleet as verb
        from rollout.fleet_project import load_project

        if not reason.strip():
            raise typer.BadParameter("say why, in words", param_hint="--reason")
        return verb.halt(load_project(_project(project_dir)), verb.Clusters(kubeconfig_dir), reason, as_json)

    run(_fleet_call(call, as_json), debug, as_json)


@fleet_app.command("resume")
def fleet_resume(
    project_dir: ProjectDirOption = None,
    kubeconfig_dir: KubeconfigDirOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Resume every stack of the fleet (`resume` semantics: only the skip labels `pause` set) and lift the train's
    halt. A node held by a failed validation stays held: `gpu-rollout release-node`."""

    def call() -> Exit:
        from rollout import fleet as verb
        from rollout.fleet_project import load_project

        return verb.resume_all(load_project(_project(project_dir)), verb.Clusters(kubeconfig_dir), as_json)

    run(_fleet_call(call, as_json), debug, as_json)


# ---------------------------------------------------------------- live cluster verbs


@dataclass(frozen=True)
class LiveTarget:
    """What every live verb is told by the options they share: which stack, which cluster, how to report."""

    stack: str | None
    stack_file: Path | None
    project_dir: Path | None
    kubeconfig: str | None
    context: str | None
    as_json: bool
    debug: bool

    def open(self) -> Live:
        """The stack's spec and an adapter to its cluster (:func:`rollout.context.open_live`)."""
        from rollout import context

        return context.open_live(self.stack, self.stack_file, self.project_dir, self.kubeconfig, self.context)


def live_target(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = None,
    kubeconfig: KubeconfigOption = None,
    kube_context: ContextOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> LiveTarget:
    """The options every live verb shares, declared once: :func:`live_verb` gives each verb these parameters."""
    return LiveTarget(stack, stack_file_path, project_dir, kubeconfig, kube_context, as_json, debug)


_SHARED = tuple(inspect.signature(live_target, eval_str=True).parameters.values())
_LISTED_LAST = ("as_json", "debug")  # --help lists the verb's own options between the target's and these


def live_verb(verb: Callable[..., Exit]) -> Callable[..., None]:
    """A live verb's command: the options of :func:`live_target`, then the verb's own (its parameters after the
    first, a :class:`LiveTarget`). The command builds the target and runs ``verb(target, **own)`` through
    :func:`run`, which turns what it returns or raises into the exit code."""
    parameters = list(inspect.signature(verb, eval_str=True).parameters.values())
    if not parameters or parameters[0].annotation is not LiveTarget:
        raise TypeError(f"live verb {verb.__name__}: its first parameter takes the LiveTarget")
    own = parameters[1:]
    clash = {p.name for p in own} & {p.name for p in _SHARED}
    if clash:
        raise TypeError(f"live verb {verb.__name__}: {sorted(clash)} are options every live verb already has")

    def command(**options: Any) -> None:
        target = live_target(**{p.name: options.pop(p.name) for p in _SHARED})
        run(lambda: verb(target, **options), target.debug, target.as_json)

    command.__name__ = command.__qualname__ = verb.__name__  # typer names the command after the function
    command.__doc__ = verb.__doc__
    command.__module__ = verb.__module__
    # A parameter without a default (a positional argument, such as release-node's NODE) comes first.
    required = [p for p in own if p.default is inspect.Parameter.empty]
    optional = [p for p in own if p.default is not inspect.Parameter.empty]
    command.__signature__ = inspect.Signature([  # type: ignore[attr-defined]  # typer reads the options from it
        *required, *(p for p in _SHARED if p.name not in _LISTED_LAST), *optional,
        *(p for p in _SHARED if p.name in _LISTED_LAST),
    ])
    return command


@app.command(short_help="Read-only live checks before a rollout: owner, versions, capacity, PDBs.")
@live_verb
def preflight(target: LiveTarget) -> Exit:
    """Read-only live checks before a rollout: driver owner, versions, compatibility, capacity, PDBs."""
    from rollout import preflight as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, target.as_json)


PrometheusOption = Annotated[
    str | None,
    typer.Option("--prometheus", envvar="GPU_ROLLOUT_PROMETHEUS",
                 help="Prometheus base URL (http://prometheus:9090), instead of the stack's validation.prometheus "
                 "(a URL, or a Service reached through the API server's service proxy)."),
]


def _prometheus_url(value: str | None) -> str | None:
    """--prometheus, refused unless it is an http(s) URL (a Service is the stack's to name)."""
    from urllib.parse import urlsplit

    if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
        raise typer.BadParameter(f"{value!r} is not an http(s) URL such as http://prometheus:9090",
                                 param_hint="--prometheus")
    return value


@app.command(short_help="Follow the rollout per pool; pause on a failed node or a model at risk.")
@live_verb
def watch(
    target: LiveTarget,
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between polls.")] = 30.0,
    stuck_after: Annotated[
        float, typer.Option("--stuck-after", min=1.0, help="Minutes in one upgrade state before a node counts as stuck "
                            "(on an image-owned stack: minutes NotReady).")
    ] = 60.0,
    no_auto_pause: Annotated[
        bool, typer.Option("--no-auto-pause", help="Report triggers but do not pause nor evict anything.")
    ] = False,
    max_failed_polls: Annotated[
        int, typer.Option("--max-failed-polls", min=1,
                          help="Give up after this many polls in a row fail (throttling, 5xx, timeouts).")
    ] = 5,
    prometheus: PrometheusOption = None,
) -> Exit:
    """Follow the rollout per pool; on upgrade-failed, a failed validation, a model below minAvailable, a model's
    SLO breached or a stuck node, pause and exit 1.

    A node held by a failed validation also has its model pods evicted (PDBs respected) where the stack says
    so. On an image-owned stack it follows the generations instead, and reports a trigger without pausing.
    """
    from rollout import watch as verb

    prometheus = _prometheus_url(prometheus)
    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, once=once, interval=interval,
                        stuck_after=stuck_after * 60, auto_pause=not no_auto_pause, as_json=target.as_json,
                        max_failed_polls=max_failed_polls, prometheus_url=prometheus)


@app.command(short_help="Hold back every node of the stack's pools not yet upgraded (skip label).")
@live_verb
def pause(
    target: LiveTarget,
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded on each node.")] = "paused by gpu-rollout",
) -> Exit:
    """Hold back every node of the stack's pools not yet upgraded (skip label, recorded as ours).

    Refused on an image-owned stack: there is no operator upgrade to hold.
    """
    from rollout import pause as verb

    live = target.open()
    return verb.execute("pause", live.stack.name, live.spec, live.kube, target.as_json, reason)


@app.command(short_help="Remove exactly the skip labels `pause` set for this stack.")
@live_verb
def resume(target: LiveTarget) -> Exit:
    """Remove exactly the skip labels `pause` set for this stack; never one someone else set."""
    from rollout import pause as verb

    live = target.open()
    return verb.execute("resume", live.stack.name, live.spec, live.kube, target.as_json, "")


@app.command(short_help="Predict the rollout: time per wave and pool, models below minimum, stalls.")
@live_verb
def simulate(
    target: LiveTarget,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="Read nodes, pods, PDBs and the operator's policy from the live "
                           "cluster (read-only) instead of the stack; without it no cluster is reached.")
    ] = False,
    parallel: Annotated[
        int | None, typer.Option("--parallel", min=0, help="Simulate with this maxParallelUpgrades instead of the "
                                 "configured one (0: unlimited).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulated durations' spread.")] = 0,
) -> Exit:
    """Predict the rollout before it starts: time per wave and pool, models below minAvailable, stalls, and the
    safest fast parallelism. Exit 1 when the configured policy would stall or drop a model below its minimum."""
    from rollout import simulate as verb

    if from_cluster:
        live = target.open()
        return verb.execute(live.stack.name, lambda: verb.cluster_fleet(live.kube, live.spec), parallel=parallel,
                            seed=seed, as_json=target.as_json)
    if target.kubeconfig or target.context:
        raise typer.BadParameter("they choose a cluster to read: give them with --from-cluster (without it no "
                                 "cluster is reached)", param_hint="--kubeconfig/--context")
    from rollout import context

    ref = context.resolve_stack(target.stack, target.stack_file, target.project_dir)
    return verb.execute(ref.name, lambda: verb.stack_fleet(ref.path), parallel=parallel, seed=seed,
                        as_json=target.as_json)


@app.command("release-node", short_help="Put a node the validation job holds back into service.")
@live_verb
def release_node(
    target: LiveTarget,
    node: Annotated[str, typer.Argument(help="The node held by a failed validation.", show_default=False)],
    accept_failed: Annotated[
        bool, typer.Option("--accept-failed", help="Release it even though its latest validation failed on the "
                           "driver it still runs.")
    ] = False,
    keep_cordoned: Annotated[
        bool, typer.Option("--keep-cordoned", help="Remove the hold record only; leave the node cordoned.")
    ] = False,
) -> Exit:
    """Put a node the validation job holds (cordoned after a failed validation) back into service.

    Removes the job's hold record and uncordons the node; refused for a node that is not held, and for one
    still failing on the driver it runs unless --accept-failed. resume never uncordons a held node.
    """
    from rollout import release as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, node, accept_failed=accept_failed,
                        keep_cordoned=keep_cordoned, as_json=target.as_json)


# ---------------------------------------------------------------- rollback (the Pulumi engine, Automation API)


@app.command(short_help="Go back to an earlier good update from `pulumi stack history`.")
def rollback(
    stack: Annotated[str, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Stack name in the backend.")],
    project_dir: ProjectDirOption = None,
    to_version: Annotated[
        int | None, typer.Option("--to-version", min=1, help="Go back to this update of `pulumi stack history` "
                                 "(default: the newest succeeded one on another driver, node image or generation).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan and the commands; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Set the config (of the first step) and run `pulumi up`.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Roll back to a driver the canary stack (promotion.canaryStack) never ran.")
    ] = False,
    all_config: Annotated[
        bool, typer.Option("--all-config", help="Restore the target update's whole config, not only what decides "
                           "what runs on the GPU nodes (driver, operator chart and driver mode, pool generations, "
                           "images and holds).")
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why --yes runs although the stack file differs from the default "
                                 "branch's (or cannot be compared with it).")
    ] = None,
    policy_pack: Annotated[
        str | None, typer.Option("--policy-pack", help="Policy pack for `up` (default: the project's policy/).")
    ] = None,
    policy_pack_config: Annotated[
        str | None, typer.Option("--policy-pack-config", help="Its config (default: policy/<stage>.json).")
    ] = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Go back to an earlier good update from `pulumi stack history`: restore what decides what runs on the GPU
    nodes (every other difference is listed as left alone; --all-config restores it too), show the config that
    changes and the commands; with --yes set it in the stack file and run `up` with the policy pack, then open a
    pull request with the stack file. Refuses (exit 1, or 2 for bad input) and changes nothing when there is no
    history or earlier good update, an update is in progress, secrets cannot be decrypted, the canary never ran
    the target driver (unless --force), or, with --yes, the stack file is not the default branch's (unless
    --reason)."""

    def call() -> Exit:
        from rollout import rollback as verb
        from rollout.project import default_project_dir

        if reason is not None and not reason.strip():
            raise typer.BadParameter("say why, in words", param_hint="--reason")
        project = project_dir if project_dir is not None else default_project_dir()
        return verb.execute(stack, project, to_version=to_version, dry_run=dry_run, yes=yes, force=force,
                            all_config=all_config, reason=reason, as_json=as_json, policy_pack=policy_pack,
                            policy_pack_config=policy_pack_config)

    run(call, debug, as_json)


SigningKeyOption = Annotated[
    Path | None,
    typer.Option("--signing-key", help="PEM file of the Ed25519 private key a canary's attestation is signed with "
                 "(else $GPU_ROLLOUT_SIGNING_KEY, the PEM text; `gpu-rollout keygen` makes one)."),
]


@app.command(short_help="Validate the upgraded nodes; a passing canary writes a signed attestation.")
@live_verb
def verify(
    target: LiveTarget,
    prometheus: PrometheusOption = None,
    signing_key: SigningKeyOption = None,
    smoke: Annotated[
        bool, typer.Option("--smoke", help="Right after a rollout: attest nothing, and exit 1 only on a failed "
                           "check (an inconclusive one, such as the soak's metrics, is left to the verify at the "
                           "end of the soak).")
    ] = False,
) -> Exit:
    """Validate the upgraded nodes (runbook section 5); a passing canary writes attestations/<stack>/<driver>.json,
    signed with its key.

    Exit 0 only when every check passes; a failed or inconclusive check exits 1 with its reason. With --smoke
    nothing is attested and only a failed check exits 1.
    """
    from rollout import verify as verb
    from engine_contracts.attestation import AttestationError

    prometheus = _prometheus_url(prometheus)
    try:
        key = verb.signing_key(signing_key)
    except AttestationError as error:
        say(str(error))
        return Exit.INVALID
    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, project_dir=live.stack.project_dir,
                        prometheus_url=prometheus, as_json=target.as_json, smoke=smoke, key=key)


@app.command(short_help="Is this canary ready to attest, and when will it be.")
@live_verb
def soak(target: LiveTarget) -> Exit:
    """Is this canary ready to attest, and when will it be: its soak (from the last upgraded node's finished
    upgrade) against the longest promotion.minSoakHours of the prod stacks promoted from it.

    Exit 0 whenever it answered (JSON: ready, readyAt, reason); 2 for a stack that is not a canary.
    """
    from rollout import soak as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, project_dir=live.stack.project_dir,
                        as_json=target.as_json)


# ---------------------------------------------------------------- init (offline)


@app.command(short_help="Make a team's first canary and prod stack files from the example of its cloud.")
def init(
    cloud: Annotated[str, typer.Option("--cloud", help="aks, eks or existing: which example to start from.")],
    name: Annotated[
        str | None, typer.Option("--name", help="The stacks' name: writes Pulumi.<NAME>-canary.yaml and "
                                 "Pulumi.<NAME>-prod.yaml (or give --canary and --prod).")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="cluster.name: the cluster's name, recorded on it and checked by "
                                 "the live verbs (default: --aks-cluster/--eks-cluster/--context).")
    ] = None,
    canary: Annotated[str | None, typer.Option("--canary", help="The canary stack's name.")] = None,
    prod: Annotated[str | None, typer.Option("--prod", help="The prod stack's name.")] = None,
    resource_group: Annotated[str | None, typer.Option("--resource-group", help="AKS: the cluster's resource group.")] = None,
    aks_cluster: Annotated[str | None, typer.Option("--aks-cluster", help="AKS: the managed cluster's name.")] = None,
    location: Annotated[str | None, typer.Option("--location", help="AKS: the Azure region (westeurope).")] = None,
    eks_cluster: Annotated[str | None, typer.Option("--eks-cluster", help="EKS: the cluster's name.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="EKS: the AWS region (us-east-1).")] = None,
    node_role_arn: Annotated[str | None, typer.Option("--node-role-arn", help="EKS: the GPU nodes' IAM role.")] = None,
    subnets: Annotated[list[str] | None, typer.Option("--subnet", help="EKS: a subnet of the GPU node groups "
                                                      "(repeatable).")] = None,
    kube_context: Annotated[str | None, typer.Option("--context", help="existing: the cluster's kubeconfig "
                                                     "context.")] = None,
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", help="existing: its kubeconfig file (default: "
                                                   "$KUBECONFIG, else ~/.kube/config).")] = None,
    change_ticket: Annotated[str | None, typer.Option("--change-ticket", help="changeTicket of both stacks "
                                                      "(default: none; prod's plan asks for one).")] = None,
    trust_key: Annotated[
        Path | None, typer.Option("--trust-key", help="The *.pub.json `gpu-rollout keygen` wrote: list it in "
                                  "policy/prod.json's trustedKeys and remove the example key (default: leave "
                                  "policy/prod.json alone and print the step).")
    ] = None,
    project_dir: ProjectDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Write a team's first canary and prod stack files from the example of --cloud: the team's cluster, the
    prod stack promoted from the new canary (no example attestation, no example waivers), and, with
    --trust-key, the team's key trusted instead of the example key. Never replaces a file; prints the next steps."""

    def call() -> Exit:
        from rollout import starter as verb
        from rollout.project import default_project_dir

        if cloud not in verb.EXAMPLES:
            raise typer.BadParameter(f"{cloud!r} is not one of {', '.join(verb.EXAMPLES)}", param_hint="--cloud")
        if name is None and (canary is None or prod is None):
            raise typer.BadParameter("give --name (or both --canary and --prod)", param_hint="--name")
        identity = cluster or {"aks": aks_cluster, "eks": eks_cluster, "existing": kube_context}[cloud]
        if not identity:
            raise typer.BadParameter("give the cluster's name", param_hint="--cluster")
        target = verb.Cluster(cloud, identity, resource_group, aks_cluster, location, region, eks_cluster,
                              node_role_arn, tuple(subnets or ()), kube_context, kubeconfig)
        project = project_dir if project_dir is not None else default_project_dir()
        return verb.execute(project, target, canary or f"{name}-canary", prod or f"{name}-prod", change_ticket,
                            trust_key)

    run(call, debug)


# ---------------------------------------------------------------- keygen (offline)


@app.command(short_help="Make an Ed25519 key pair for signing canary attestations.")
def keygen(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the key pair into (created if missing).")],
    comment: Annotated[str, typer.Option("--comment", help="What the key is: who holds it, since when.")] = "",
    debug: DebugOption = False,
) -> None:
    """Make an Ed25519 key pair for signing canary attestations; print the trustedKeys entry for policy/prod.json."""

    def call() -> Exit:
        from rollout import keygen as verb

        return verb.execute(out, comment)

    run(call, debug)


def main() -> None:
    # `gpu-rollout plan | head` closes the pipe early: end as Unix tools do (SIGPIPE, 141 in the shell), not with
    # click's exit 1, which reads as a mandatory violation.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    app()


if __name__ == "__main__":
    main()
