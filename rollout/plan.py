"""`gpu-rollout plan`: the offline preview of one stack, rendered by the real program under mocks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from policy.evaluate import Violation, evaluate, from_registered, load_config, mandatory
from preview.run import ProgramRun, run_program
from preview.summary import review_fields
from spec.load import read_stack_file


def run(stack: str, stack_file: Path) -> ProgramRun:
    """Render ``stack`` from ``stack_file``; SpecError propagates for the caller to report (exit 2)."""
    return run_program(read_stack_file(stack_file), stack)


def policy_report(result: ProgramRun) -> list[Violation]:
    """The pack's rules over what the program registered, at the stage's enforcement (policy/<stage>.json)."""
    return evaluate(from_registered(result.resources), load_config(result.outputs.get("stage")))


def render_json(result: ProgramRun, violations: list[Violation] | None = None) -> str:
    document = result.as_json()
    document["violations"] = [v.as_json() for v in violations or []]
    return json.dumps(document, indent=2, sort_keys=False)


def render_violations(violations: list[Violation], console: Console) -> None:
    if not violations:
        console.print("policies: no violations")
        return
    table = Table(title="policy violations", show_lines=True)
    for column in ("policy", "enforcement", "resource", "message"):
        table.add_column(column)
    for v in sorted(violations, key=lambda v: (v.enforcement.value != "mandatory", v.policy, v.resource)):
        style = "bold red" if v.enforcement.value == "mandatory" else "yellow"
        table.add_row(v.policy, f"[{style}]{v.enforcement.value}[/]", v.resource, v.message)
    console.print(table)


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
    """Render, run the policies, print (table or one JSON document); 1 on a mandatory violation."""
    result = run(stack, stack_file)
    violations = policy_report(result)
    if as_json:
        sys.stdout.write(render_json(result, violations) + "\n")
    else:
        console = Console(width=None if sys.stdout.isatty() else 160)
        render_table(result, console)
        render_violations(violations, console)
    return 1 if mandatory(violations) else 0
