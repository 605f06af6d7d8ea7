"""`gpu-rollout`: the command line. Every verb is written one way: a function whose first parameter is its option
group (a dataclass of :mod:`rollout.cli.options`), whose other parameters are its own options, which makes one
call into a package and returns an :class:`refusals.exits.Exit`. :func:`command` turns it into a typer command
(the group's options, the verb's own, then ``--json`` and ``--debug``) that runs it through :func:`run`; the
table at the end registers the verbs, in the order ``--help`` lists them: the offline verbs
(:mod:`rollout.cli.offline`), the live ones (:mod:`rollout.cli.live`), the fleet's (:mod:`rollout.cli.fleet`).

Exit codes (:class:`refusals.exits.Exit`): 0 all good; 1 a check or mandatory policy failed; 2 the input is
invalid (the message names the key path, file or flag, and what is wrong); 70 a defect of gpu-rollout, not of
its input (one line, and the file its traceback was written to). Bad input never ends in a traceback: a verb
stops by raising a refusal (:mod:`refusals.errors`, which carries its code and kind), and :func:`run` alone turns
it into the exit code, one message on stderr and, with ``--json``, the error document.

Verbs import what they use when they run: ``--help`` and the live verbs never load the Pulumi SDK, which
only ``plan``, ``diff`` (both render the program offline) and ``rollback`` (the Automation API) need.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from preview.garbage import leave_garbage_to_exit
from refusals.exits import Exit
from rollout.cli.running import command, internal_error, live_verb, refusal_of, run, spec_error_text

__all__ = ["app", "command", "doctor_app", "fleet_app", "internal_error", "live_verb", "main", "refusal_of", "run",
           "spec_error_text", "version_text"]

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
fleet_app = typer.Typer(name="fleet", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                        short_help="One promotion train across many clusters: plan, status, advance.",
                        help="One driver promotion train across the fleet's stacks, wave by wave (Fleet.yaml; "
                        "docs/fleet.md).")

doctor_app = typer.Typer(name="doctor", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                         short_help="Checks of what surrounds the rollout: the repository's GitHub settings.",
                         help="Checks of what surrounds the rollout rather than a stack (docs/cicd.md).")

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


# ---------------------------------------------------------------- the verbs, in the order --help lists them

from rollout.cli import doctor, fleet, live, offline  # noqa: E402  (the verbs; registered below)

VERBS: tuple[tuple[str, Callable[..., None], str], ...] = (
    ("plan", offline.plan, "Offline preview of a stack: what `pulumi up` sends, and the verdicts."),
    ("diff", offline.diff, "Changes per stack between two git revisions: driver, pools, policy."),
    ("deploy-plan", offline.deploy_plan, "Which stacks a merge deploys, in which order, with which policy pack."),
    ("stacks", offline.stacks, "The project's stacks as their files declare them: stage, cloud, credentials."),
    ("review", offline.review, "Every pinned version of every stack against the compatibility data (quarterly)."),
    ("preflight", live.preflight, "Read-only live checks before a rollout: owner, versions, capacity, PDBs."),
    ("watch", live.watch, "Follow the rollout per pool; pause on a failed node or a model at risk."),
    ("pause", live.pause, "Hold back every node of the stack's pools not yet upgraded (skip label)."),
    ("resume", live.resume, "Remove exactly the skip labels `pause` set for this stack."),
    ("simulate", live.simulate, "Predict the rollout: time per wave and pool, models below minimum, stalls."),
    ("release-node", live.release_node, "Put a node the validation job holds back into service."),
    ("rollback", offline.rollback, "Go back to an earlier good update from `pulumi stack history`."),
    ("verify", live.verify, "Validate the upgraded nodes; a passing canary writes a signed attestation."),
    ("soak", live.soak, "Is this canary ready to attest, and when will it be."),
    ("runbook", offline.runbook, "docs/runbook.md with your stack names in every command."),
    ("guard", live.guard, "Watch the cluster without a person: pause on a trigger, alert on drift, /metrics."),
    ("init", offline.init, "Make a team's first canary and prod stack files from the example of its cloud."),
    ("keygen", offline.keygen, "Make an Ed25519 key pair for signing canary attestations."),
)
FLEET_VERBS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("plan", fleet.plan), ("status", fleet.status), ("advance", fleet.advance), ("halt", fleet.halt),
    ("resume", fleet.resume), ("hold", fleet.hold),
)

for _name, _verb, _short_help in VERBS:
    app.command(_name, short_help=_short_help)(_verb)
for _name, _verb in FLEET_VERBS:
    fleet_app.command(_name)(_verb)
app.add_typer(fleet_app)
doctor_app.command("github")(doctor.github)
app.add_typer(doctor_app)


def main() -> None:
    # `gpu-rollout plan | head` closes the pipe early: end as Unix tools do (SIGPIPE, 141 in the shell), not with
    # click's exit 1, which reads as a mandatory violation.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # One command, then exit: a rendering's cyclic garbage is left for the exit to free, not walked first.
    leave_garbage_to_exit()
    app()


if __name__ == "__main__":
    main()
