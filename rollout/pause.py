"""`gpu-rollout pause` / `resume`: hold back or release the stack's nodes with the skip label."""

from __future__ import annotations

import json
import sys

from rich.console import Console

from checks import kube as k
from checks.pause import PauseReport, pause, resume
from spec import labels
from spec.model import FleetSpec


def render(verb: str, stack: str, report: PauseReport, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({"stack": stack, "verb": verb, **report.as_json()}, indent=2) + "\n")
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    action = "labelled" if verb == "pause" else "released"
    for name in report.changed:
        console.print(f"{action} {name}" + (f" ({labels.SKIP_UPGRADE}=true)" if verb == "pause" else ""))
    if verb == "pause" and report.unchanged:
        console.print(f"{len(report.unchanged)} node(s) already paused by this stack")
    if report.foreign:
        console.print(f"{len(report.foreign)} node(s) carry a skip label someone else set; left alone: "
                      + ", ".join(report.foreign[:5]) + (" ..." if len(report.foreign) > 5 else ""))
    if verb == "pause" and report.done:
        console.print(f"{len(report.done)} node(s) already upgrade-done; not held")
    console.print(f"{verb}: {len(report.changed)} node(s) changed")


def execute(verb: str, stack: str, spec: FleetSpec, kube: k.Kube, as_json: bool, reason: str) -> int:
    report = pause(kube, spec, stack, reason) if verb == "pause" else resume(kube, spec, stack)
    render(verb, stack, report, as_json)
    return 0
