"""`gpu-rollout`: the command line. Each verb parses and validates, then makes one call into a package.

Exit codes: 0 all good; 1 a check or mandatory policy failed; 2 the input is invalid (the message names
the key path and what is wrong).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from preview.run import PROJECT_DIR
from spec.load import SpecError, stack_file

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2

app = typer.Typer(
    name="gpu-rollout",
    help="Upgrade the NVIDIA driver of a GPU inference fleet: plan, check, watch, pause, resume.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, soft_wrap=True)  # messages keep their lines whatever the terminal width


@app.callback()
def _root() -> None:
    """Upgrade the NVIDIA driver of a GPU inference fleet: plan, check, watch, pause, resume."""

StackOption = Annotated[
    str | None, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Stack name: reads Pulumi.<NAME>.yaml.")
]
StackFileOption = Annotated[
    Path | None, typer.Option("--stack-file", envvar="GPU_ROLLOUT_STACK_FILE", help="Path of a stack file.")
]
ProjectDirOption = Annotated[
    Path,
    typer.Option("--project-dir", envvar="GPU_ROLLOUT_PROJECT_DIR", help="The Pulumi project: Pulumi.yaml, __main__.py and Pulumi.<stack>.yaml "
        "(default: the current folder if it holds Pulumi.yaml, else the checkout gpu-rollout runs from)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def resolve_stack(stack: str | None, file: Path | None, project_dir: Path) -> tuple[str, Path]:
    """The stack name and its file, from --stack or --stack-file (not both)."""
    if stack and file:
        raise typer.BadParameter("give --stack or --stack-file, not both", param_hint="--stack")
    if file is not None:
        name = file.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
        return name, file
    if not stack:
        raise typer.BadParameter("a stack is required", param_hint="--stack")
    return stack, stack_file(project_dir, stack)


def fail_invalid(error: SpecError) -> None:
    err.print(str(error), markup=False, highlight=False)
    raise typer.Exit(EXIT_INVALID)


PreviousOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--previous-outputs",
        help="The stack's last deployment, as `pulumi stack output --json` prints it (default: none, a first "
        "deployment); changes the cloud cannot make in place are checked against it.",
    ),
]


@app.command()
def plan(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    as_json: JsonOption = False,
    previous_outputs: PreviousOutputsOption = None,
) -> None:
    """Offline preview of a stack: what `pulumi up` would send, with no cloud and no Pulumi CLI."""
    from rollout import plan as plan_verb

    name, path = resolve_stack(stack, stack_file_path, project_dir)
    try:
        previous = plan_verb.read_previous_outputs(previous_outputs) if previous_outputs is not None else None
        code = plan_verb.execute(name, path, as_json=as_json, project_dir=project_dir, previous_outputs=previous)
    except SpecError as error:
        fail_invalid(error)
        return
    raise typer.Exit(code)


# ---------------------------------------------------------------- live cluster verbs

# No envvar on these two: an ambient KUBECONFIG or context must never beat what the stack declares
# (cluster.existing.kubeconfig/context). KUBECONFIG is still read, below the stack's file, by kube.connect.
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


def _live(stack: str | None, file: Path | None, project_dir: Path, kubeconfig: str | None, context: str | None):
    """Stack name, FleetSpec and a connected adapter; bad config or kubeconfig exits 2."""
    from checks import kube
    from checks.errors import ConfigError
    from spec.load import load_stack_file

    name, path = resolve_stack(stack, file, project_dir)
    try:
        spec = load_stack_file(path)
    except SpecError as error:
        fail_invalid(error)
        raise
    try:
        # Precedence: --kubeconfig > cluster.existing.kubeconfig > $KUBECONFIG > ~/.kube/config, and
        # --context > cluster.existing.context > the kubeconfig's current context.
        declared = spec.cluster.existing  # an existing cluster names its kubeconfig and context in the stack
        adapter = kube.connect(
            kubeconfig or (declared.kubeconfig if declared else None), context or (declared.context if declared else None)
        )
    except ConfigError as error:
        err.print(f"--kubeconfig/--context: {error}", markup=False, highlight=False)
        raise typer.Exit(EXIT_INVALID) from None
    return name, spec, adapter


def _run_live(call) -> None:
    """Run one library call; a cluster error is a failed check (exit 1) with its message, never a partial report;
    a cluster that is not the stack's is wrong input (exit 2), refused before anything was written."""
    from checks.errors import ClusterError, WrongClusterError

    try:
        code = call()
    except WrongClusterError as error:
        err.print(f"wrong cluster: {error}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None
    except ClusterError as error:
        err.print(f"cluster error: {error}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None
    raise typer.Exit(code)


@app.command()
def preflight(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read-only live checks before a rollout: driver owner, versions, compatibility, capacity, PDBs."""
    from rollout import preflight as verb

    name, spec, adapter = _live(stack, stack_file_path, project_dir, kubeconfig, context)
    _run_live(lambda: verb.execute(name, spec, adapter, as_json))


@app.command()
def watch(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between polls.")] = 30.0,
    stuck_after: Annotated[
        float, typer.Option("--stuck-after", min=1.0, help="Minutes in one upgrade state before a node counts as stuck "
                          "(on an image-owned stack: minutes NotReady).")
    ] = 60.0,
    no_auto_pause: Annotated[bool, typer.Option("--no-auto-pause", help="Report triggers but do not pause.")] = False,
    max_failed_polls: Annotated[
        int, typer.Option("--max-failed-polls", min=1,
                          help="Give up after this many polls in a row fail (throttling, 5xx, timeouts).")
    ] = 5,
    as_json: JsonOption = False,
) -> None:
    """Follow the rollout per pool; on upgrade-failed, a model below minAvailable or a stuck node, pause and exit 1.

    On an image-owned stack it follows the generations instead, and reports a trigger without pausing.
    """
    from rollout import watch as verb

    name, spec, adapter = _live(stack, stack_file_path, project_dir, kubeconfig, context)
    _run_live(lambda: verb.execute(name, spec, adapter, once=once, interval=interval, stuck_after=stuck_after * 60,
                                   auto_pause=not no_auto_pause, as_json=as_json,
                                   max_failed_polls=max_failed_polls))


@app.command()
def pause(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded on each node.")] = "paused by gpu-rollout",
    as_json: JsonOption = False,
) -> None:
    """Hold back every node of the stack's pools not yet upgraded (skip label, recorded as ours).

    Refused on an image-owned stack: there is no operator upgrade to hold.
    """
    from rollout import pause as verb

    name, spec, adapter = _live(stack, stack_file_path, project_dir, kubeconfig, context)
    _run_live(lambda: verb.execute("pause", name, spec, adapter, as_json, reason))


@app.command()
def resume(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove exactly the skip labels `pause` set for this stack; never one someone else set."""
    from rollout import pause as verb

    name, spec, adapter = _live(stack, stack_file_path, project_dir, kubeconfig, context)
    _run_live(lambda: verb.execute("resume", name, spec, adapter, as_json, ""))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
