"""`gpu-rollout plan`: the offline preview of one stack, rendered by the real program under mocks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from preview.run import ProgramRun, run_program
from preview.summary import review_fields
from spec.load import read_stack_file


def run(stack: str, stack_file: Path) -> ProgramRun:
    """Render ``stack`` from ``stack_file``; SpecError propagates for the caller to report (exit 2)."""
    return run_program(read_stack_file(stack_file), stack)


def render_json(result: ProgramRun) -> str:
    return json.dumps(result.as_json(), indent=2, sort_keys=False)


def render_table(result: ProgramRun, console: Console) -> None:
    table = Table(title=f"gpu-driver-upgrade plan: stack {result.stack}", show_lines=True)
    table.add_column("type")
    table.add_column("name")
    table.add_column("what a reviewer checks")
    for resource in sorted(result.custom_resources, key=lambda r: (r.type, r.name)):
        fields = review_fields(resource.type, resource.inputs)
        table.add_row(resource.type, resource.name, "\n".join(f"{k}: {v}" for k, v in fields))
    console.print(table)
    outputs = result.outputs
    console.print(
        f"stage [bold]{outputs.get('stage')}[/], driver [bold]{outputs.get('driverVersion')}[/]; "
        f"released pools: {', '.join(outputs.get('releasedPools') or []) or '-'}; "
        f"held pools: {', '.join(outputs.get('heldPools') or []) or '-'}"
    )


def execute(stack: str, stack_file: Path, as_json: bool) -> int:
    """Render, print (table or one JSON document) and return the exit code."""
    result = run(stack, stack_file)
    if as_json:
        sys.stdout.write(render_json(result) + "\n")
    else:
        render_table(result, Console(width=None if sys.stdout.isatty() else 160))
    return 0
