"""What `fleet advance` tells the model owners (announcements/): a stack brought up starts its moving pools, a
stack paused pauses them, a stack whose rollout is complete finishes them. Each event goes once, whichever of this
step and the in-cluster guard sees it first; telling people never changes the step's outcome."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from announcements.announce import announce_stack
from announcements.events import EventKind
from checks import kube as k
from checks.errors import ClusterError
from fleetspec.model import FleetSpec
from promotion_train import train
from rollout.console import say


def tell(specs: dict[str, FleetSpec], connect: Callable[[str, FleetSpec], k.Kube], holder: str,
         events: Iterable[tuple[str, EventKind, str, str]]) -> None:
    """Announce each (stack, kind, detail, occurrence) through the stack's webhook; a stack without one is
    skipped, and a cluster or webhook that fails is said, not raised."""
    for stack, kind, detail, occurrence in events:
        spec = specs.get(stack)
        if spec is None or spec.notifications is None or spec.notifications.webhook is None:
            continue
        try:
            outcomes = announce_stack(connect(stack, spec), spec, stack, kind, detail, holder=holder,
                                      occurrence=occurrence)
        except ClusterError as error:
            say(f"{stack}: the model owners were not told that its pools {kind.value}: {error}")
            continue
        for outcome in outcomes:
            if outcome.why != "sent" and not outcome.why.startswith("announced already"):
                say(f"{stack}: pool {outcome.event.pool} {kind.value}: the owners were {outcome.why}")
            elif outcome.sent:
                say(f"{stack}: told the owners of pool {outcome.event.pool} that it {kind.value}")


def events(found: train.Train, halted: bool, ups: Iterable[tuple[str, str]]) -> list[tuple[str, EventKind, str, str]]:
    """What this step did and saw, as events: the stacks a new halt paused (every stack the train moved), or the
    stacks paused on their own sign and those brought up (stack, wave); and the stacks whose rollout is complete."""
    out: list[tuple[str, EventKind, str, str]] = []
    sign = found.halt
    if sign is not None and not halted:
        cause = f"the fleet train halted: {sign.kind} in stack {sign.stack}: {sign.message}"
        out += [(s.world.name, EventKind.PAUSED, cause, cause) for s in found.started()]
    elif not halted:
        out += [(s.stack, EventKind.PAUSED, f"{s.kind}: {s.message}", f"{s.kind}: {s.message}")
                for s in found.own_pauses]
        out += [(stack, EventKind.STARTED, f"brought up by the fleet train in wave {wave}", "") for stack, wave in ups]
    out += [(s.world.name, EventKind.FINISHED, "its rollout is complete", "")
            for w in found.waves for s in w.stacks if s.status == train.StackStatus.COMPLETE]
    return out
