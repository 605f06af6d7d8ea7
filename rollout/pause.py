"""`gpu-rollout pause` / `resume`: hold back or release the stack's nodes with the skip label.

On a stack whose node image owns the driver both refuse (exit 1, no call to the cluster) and say how
such a rollout is held and rolled back instead.
"""

from __future__ import annotations

from typing import Literal

from rich.console import Console

from checks import kube as k
from checks.pause import ChangeInterrupted, ImageOwnedDriver, PauseReport, pause, resume
from rollout import documents, schemas
from rollout import console as consoles
from refusals.exits import Exit
from rollout.live import note_identity
from gpu_knowledge import labels
from fleetspec.model import FleetSpec


def render_summary(verb: str, report: PauseReport, console: Console) -> None:
    """What was left alone, and the count; each changed node was printed as it was patched."""
    if verb == "pause" and report.unchanged:
        console.print(f"{len(report.unchanged)} node(s) already paused by this stack")
    if report.foreign:
        console.print(f"{len(report.foreign)} node(s) carry a skip label someone else set; left alone: "
                      + ", ".join(report.foreign[:5]) + (" ..." if len(report.foreign) > 5 else ""))
    if verb == "pause" and report.done:
        console.print(f"{len(report.done)} node(s) already upgrade-done on their pool's target driver; not held")
    if report.validation_held:
        console.print(f"{len(report.validation_held)} node(s) stay cordoned, held by a failed validation: "
                      + ", ".join(report.validation_held) + "; `watch` pauses again until each is released with "
                      "`gpu-rollout release-node --stack <stack> <node>`", markup=False, soft_wrap=True)
    console.print(f"{verb}: {len(report.changed) + len(report.held)} node(s) changed")


_ACTIONS = {
    "labelled": f"labelled {{node}} ({labels.SKIP_UPGRADE}=true)",
    "released": "released {node}",
    "unclaimed": "unclaimed {node} (pool held by the stack: skip label kept, our annotation removed)",
}


def execute(verb: Literal["pause", "resume"], stack: str, spec: FleetSpec, kube: k.Kube, as_json: bool,
            reason: str) -> Exit:
    console = consoles.stdout(highlight=False)

    def changed(action: str, node: str) -> None:
        if not as_json:
            console.print(_ACTIONS[action].format(node=node), markup=False)

    try:
        if verb == "pause":
            report = pause(kube, spec, stack, reason, on_change=changed, on_identity=note_identity)
        else:
            report = resume(kube, spec, stack, on_change=changed, on_identity=note_identity)
    except ImageOwnedDriver as error:
        if as_json:
            documents.write(schemas.PauseDocument.of(stack, verb, PauseReport(), str(error)))
        consoles.say(str(error))
        return Exit.FAILED
    except ChangeInterrupted as error:
        if as_json:
            documents.write(schemas.PauseDocument.of(stack, verb, error.report, str(error)))
        consoles.say(f"cluster error: {error}")
        return Exit.FAILED
    if as_json:
        documents.write(schemas.PauseDocument.of(stack, verb, report, None))
    else:
        render_summary(verb, report, console)
    return Exit.OK
