"""`gpu-rollout plan`: the offline preview of one stack, rendered by the real program under mocks."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from policy.evaluate import Violation, evaluate, from_registered, load_config, mandatory
from preview.run import PROGRAM_FILE, ProgramRun, run_program
from preview.summary import review_fields
from rollout import console as consoles
from rollout.exits import Exit
from spec.load import SpecError, SpecProblem, load_stack_file, read_stack_file, spec_from_config, stack_file
from spec.model import PROJECT
from spec.ownership import shared_objects
from spec.resource_facts import read_stack_outputs
from spec.stacks import stack_name


def read_previous_outputs(path: Path, flag: str = "--previous-outputs") -> dict[str, Any]:
    """A stack's outputs as `pulumi stack output --json` prints them; anything else is invalid input."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([SpecProblem(flag, f"cannot read {path}: {exc.strerror}")]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(flag, f"{path} is not JSON: {exc}")]) from None
    if not isinstance(document, dict):
        raise SpecError([SpecProblem(flag, f"{path} must hold a JSON object of stack outputs")])
    return document


def run(
    stack: str, path: Path, project_dir: Path, previous_outputs: dict[str, Any] | None = None,
    canary_outputs: dict[str, Any] | None = None,
) -> ProgramRun:
    """Render ``stack`` from its stack file with the project's program; SpecError means exit 2."""
    program = project_dir / PROGRAM_FILE
    if not program.is_file():
        raise SpecError([SpecProblem("--project-dir", f"no Pulumi program {program}: run from the project "
                                     "folder (the one with Pulumi.yaml) or pass --project-dir")])
    config = read_stack_file(path)
    check_ownership(config, path)
    referenced = canary_stack_outputs(config, path, program, canary_outputs)
    return run_program(config, stack, program, previous_outputs, referenced)


def canary_stack_outputs(
    config: dict[str, str], path: Path, program: Path, given: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """What the StackReference of a promoted stack to its canary reads offline: the outputs given
    (``--canary-outputs``: `pulumi stack output --json --stack <canary>`), else those of the canary's stack
    file beside this one, rendered as plan renders it (what the canary declares; the engine's preview reads
    what it runs), else none."""
    spec = spec_from_config(config, source=str(path))
    if spec.promotion is None:
        return {}
    name = stack_name(spec.promotion.canaryStack)
    if given is not None:
        return {name: given}
    canary_path = stack_file(path.parent, name)
    if not canary_path.is_file():
        return {}
    return {name: run_program(read_stack_file(canary_path), name, program).outputs}


def check_ownership(config: dict[str, str], path: Path) -> None:
    """A stack promoted from a canary stack on the same cluster must own none of the canary's objects."""
    spec = spec_from_config(config, source=str(path))
    if spec.promotion is None:
        return
    canary_path = stack_file(path.parent, spec.promotion.canaryStack)
    if not canary_path.is_file():
        return  # the canary stack lives elsewhere (another repo or cluster): nothing to compare here
    shared = shared_objects(spec, load_stack_file(canary_path))
    if shared:
        raise SpecError(
            [SpecProblem(f"{PROJECT}:promotion.canaryStack",
                         f"this stack and '{spec.promotion.canaryStack}' both own {', '.join(shared)} on cluster "
                         f"{spec.cluster.name}; each object needs one owner (see gpuOperator.clusterPolicy: external)")],
            source=str(path),
        )


def policy_report(result: ProgramRun, now: datetime | None = None) -> list[Violation]:
    """The pack's rules over what the program registered, at the stage's enforcement (policy/<stage>.json), judged
    as of ``now`` (default: the clock)."""
    return evaluate(from_registered(result.resources), load_config(read_stack_outputs(result.outputs).stage), now)


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
        table.add_row(v.policy, f"[{style}]{v.enforcement.value}[/]", escape(v.resource), escape(v.message))
    console.print(table)


def render_table(result: ProgramRun, console: Console) -> None:
    table = Table(title=f"gpu-driver-upgrade plan: stack {result.stack}", show_lines=True)
    # Long type tokens (the validation job's admission policy binding) fold rather than narrow the review column.
    table.add_column("type", max_width=44, overflow="fold")
    table.add_column("name")
    table.add_column("what a reviewer checks")
    for resource in sorted(result.custom_resources, key=lambda r: (r.type, r.name)):
        fields = review_fields(resource.type, resource.inputs)
        # Values are text, not markup: "[secret]" or a selector in brackets must print as written.
        table.add_row(resource.type, resource.name, escape("\n".join(f"{k}: {v}" for k, v in fields)))
    console.print(table)
    outputs = read_stack_outputs(result.outputs)
    console.print(
        f"stage [bold]{outputs.stage}[/], driver [bold]{outputs.driver_version}[/]; "
        f"released pools: {', '.join(outputs.released_pools) or '-'}; "
        f"held pools: {', '.join(outputs.held_pools) or '-'}"
    )


def execute(
    stack: str, stack_file: Path, as_json: bool, project_dir: Path, previous_outputs: dict[str, Any] | None = None,
    canary_outputs: dict[str, Any] | None = None, now: datetime | None = None,
) -> Exit:
    """Render, run the policies as of ``now``, print (table or one JSON document); 1 on a mandatory violation."""
    result = run(stack, stack_file, project_dir, previous_outputs, canary_outputs)
    violations = policy_report(result, now)
    if as_json:
        sys.stdout.write(render_json(result, violations) + "\n")
    else:
        console = consoles.stdout()
        render_table(result, console)
        render_violations(violations, console)
    return Exit.failed_if(bool(mandatory(violations)))
