"""`gpu-rollout`: the command line. Each verb parses and validates, then makes one call into a package.

Exit codes: 0 all good; 1 a check or mandatory policy failed; 2 the input is invalid (the message names
the key path and what is wrong).
"""

from __future__ import annotations

import sys
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
err = Console(stderr=True)


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
    typer.Option("--project-dir", envvar="GPU_ROLLOUT_PROJECT_DIR", help="Folder holding Pulumi.<stack>.yaml."),
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


@app.command()
def plan(
    stack: StackOption = None,
    stack_file_path: StackFileOption = None,
    project_dir: ProjectDirOption = PROJECT_DIR,
    as_json: JsonOption = False,
) -> None:
    """Offline preview of a stack: what `pulumi up` would send, with no cloud and no Pulumi CLI."""
    from rollout import plan as plan_verb

    name, path = resolve_stack(stack, stack_file_path, project_dir)
    try:
        code = plan_verb.execute(name, path, as_json=as_json)
    except SpecError as error:
        fail_invalid(error)
        return
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
