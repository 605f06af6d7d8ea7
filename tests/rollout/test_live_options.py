"""The options every live verb shares, declared once (rollout.cli.options.LiveTarget) and given to each verb by
@live_verb: the same names, env vars and help texts on every verb, in the same places of its --help; a verb
gets them as one LiveTarget and its return value is the exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from rollout.cli import app, live_verb
from rollout.cli.options import LiveTarget
from refusals.exits import Exit

LIVE_VERBS = ["preflight", "watch", "pause", "resume", "verify", "soak"]
OWN_OPTIONS = {
    "preflight": [],
    "watch": ["--once", "--interval", "--stuck-after", "--no-auto-pause", "--max-failed-polls", "--prometheus"],
    "pause": ["--reason"],
    "resume": [],
    "verify": ["--prometheus", "--signing-key", "--smoke"],
    "soak": [],
}
# (flag, env var): the stack and cluster first, then the verb's own options, then how to report.
TARGET = [("--stack", "GPU_ROLLOUT_STACK"), ("--stack-file", "GPU_ROLLOUT_STACK_FILE"),
          ("--project-dir", "GPU_ROLLOUT_PROJECT_DIR"), ("--kubeconfig", None), ("--context", None)]
REPORT = [("--json", None), ("--debug", "GPU_ROLLOUT_DEBUG")]


def options(verb: str) -> list:
    return [p for p in typer.main.get_command(app).commands[verb].params if p.name != "help"]


@pytest.mark.parametrize("verb", LIVE_VERBS)
def test_every_live_verb_has_the_shared_options_around_its_own(verb: str) -> None:
    found = [(p.opts[0], getattr(p, "envvar", None)) for p in options(verb)]
    own = [(flag, env) for flag, env in found if flag in OWN_OPTIONS[verb]]
    assert found == TARGET + own + REPORT
    assert [flag for flag, _ in own] == OWN_OPTIONS[verb]


def test_the_shared_options_read_alike_on_every_verb() -> None:
    shared = {flag for flag, _ in TARGET + REPORT}
    helps = {verb: {p.opts[0]: getattr(p, "help", None) for p in options(verb) if p.opts[0] in shared}
             for verb in LIVE_VERBS}
    assert all(helps[verb] == helps["preflight"] for verb in LIVE_VERBS)
    assert helps["preflight"]["--kubeconfig"].startswith("kubeconfig file (else the stack's cluster.existing")
    assert all(helps["preflight"].values())


# ---------------------------------------------------------------- @live_verb itself, on a verb of its own

probe_app = typer.Typer(add_completion=False)
seen: list[tuple[LiveTarget, int]] = []


@probe_app.command()
@live_verb
def probe(target: LiveTarget, code: Annotated[int, typer.Option("--code")] = 0) -> Exit:
    """A verb that records what it was given."""
    seen.append((target, code))
    return Exit(code)


def test_a_live_verb_gets_one_target_built_from_the_flags_and_env_and_returns_the_exit_code() -> None:
    seen.clear()
    result = CliRunner().invoke(probe_app, ["--stack", "prod", "--kubeconfig", "/k", "--json", "--code", "1"],
                                env={"GPU_ROLLOUT_PROJECT_DIR": "/project", "GPU_ROLLOUT_DEBUG": "1"})
    assert result.exit_code == Exit.FAILED == 1, result.output
    assert seen == [(LiveTarget(stack="prod", stack_file=None, project_dir=Path("/project"), kubeconfig="/k",
                                context=None, as_json=True, debug=True), 1)]
    assert probe.__doc__ == "A verb that records what it was given."


def test_a_live_verb_cannot_redeclare_a_shared_option_or_skip_the_target() -> None:
    def stack_again(target: LiveTarget, stack: str = "") -> Exit:
        return Exit.OK

    with pytest.raises(TypeError, match=r"live verb stack_again: \['stack'\] are options every live verb"):
        live_verb(stack_again)

    def no_target(stack: str = "") -> Exit:
        return Exit.OK

    with pytest.raises(TypeError, match="live verb no_target: its first parameter takes the LiveTarget"):
        live_verb(no_target)
