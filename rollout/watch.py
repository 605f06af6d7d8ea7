"""`gpu-rollout watch`: follow the rollout, pause it on a trigger, exit 1 with the reason.

On a stack whose node image owns the driver it follows the pools by generation instead and, on a
trigger, reports it and exits 1 without pausing anything (there is no operator upgrade to pause).
Either way a node held by a failed validation is a trigger; on an operator-owned stack its model pods
are also evicted where the stack says so (checks/hold.py). A model's SLO breached on a pool being upgraded
(``models[].slo``, read from the Prometheus of ``validation.prometheus`` or ``--prometheus``) is a trigger too.
"""

from __future__ import annotations

import sys

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table

from checks import kube as k
from checks.errors import ClusterError
from checks.generations import ImageSnapshot, generation_title
from checks.prometheus import for_stack
from checks.watch import Snapshot, WatchOutcome, watch
from gpu_knowledge import labels
from rollout import documents, schemas
from rollout import console as consoles
from refusals.exits import Exit
from rollout.live import note_identity
from fleetspec.model import FleetSpec


def snapshot_view(spec: FleetSpec, snapshot: Snapshot) -> Group:
    pools = Table(title="pools", title_justify="left")
    for column in ("pool", "target", "done/total", "nodes per state", "held"):
        pools.add_column(column)
    for pool in snapshot.pools(spec):
        pools.add_row(pool["pool"], pool["target"], f"{pool['done']}/{pool['total']}",
                      ", ".join(f"{s}: {c}" for s, c in pool["states"].items()), "yes" if pool["held"] else "")
    moving = Table(title="nodes in progress", title_justify="left")
    for column in ("node", "state", "time in state", "driver"):
        moving.add_column(column)
    for node in snapshot.nodes:
        if node.state not in ("", labels.UPGRADE_DONE) and node.seconds_in_state is not None:
            moving.add_row(node.name, node.state, f"{node.seconds_in_state / 60:.1f} min", node.driver or "?")
    operator = ", ".join(f"{o['kind']} {o['name']}: {o['state']}" for o in snapshot.operator) or "no operator objects"
    parts: list[RenderableType] = [pools, moving, f"operator: {operator}"]
    parts += [f"event {e['node']}: {e['message']}" for e in snapshot.events[-5:]]
    parts += [f"slo: {r.describe()}" for r in snapshot.slo if not r.triggered]
    parts += [f"[bold red]TRIGGER[/] {t.message}" for t in snapshot.triggers]
    return Group(*parts)


def image_view(spec: FleetSpec, snapshot: ImageSnapshot) -> Group:
    """Pools by generation: nodes, Ready, schedulable and reported drivers per generation label."""
    pools = Table(title="pools by generation", title_justify="left")
    for column in ("pool", "target", "generation", "in spec", "nodes", "ready", "schedulable", "drivers"):
        pools.add_column(column)
    waiting: list[str] = []
    for pool in snapshot.pools(spec):
        status = "held" if pool["held"] else "done" if pool["done"] else "in progress"
        for index, gen in enumerate(pool["generations"] or [None]):
            first = index == 0
            head = (f"{pool['pool']} ({status})" if first else "", pool["target"] if first else "")
            if gen is None:
                pools.add_row(*head, "-", "", "0", "0", "0", "")
                continue
            spec_text = gen["spec"] + (f" ({gen['specDriver']})" if gen["specDriver"] else "")
            pools.add_row(*head, generation_title(gen["generation"]), spec_text, str(gen["nodes"]),
                          str(gen["ready"]), str(gen["schedulable"]),
                          ", ".join(f"{d}: {c}" for d, c in gen["drivers"].items()))
        if not pool["held"]:
            waiting += [f"{pool['pool']}: {reason}" for reason in pool["waiting"]]
    models = Table(title="models", title_justify="left")
    for column in ("model", "available", "minAvailable", "replicas"):
        models.add_column(column)
    for model in snapshot.models:
        models.add_row(model["model"], str(model["available"]), str(model["minAvailable"]), str(model["replicas"]))
    not_ready = [f"node {n.name} ({n.pool} {generation_title(n.generation)}) not Ready for "
                 f"{(n.seconds_not_ready or 0) / 60:.1f} min" for n in snapshot.nodes if not n.ready]
    parts: list[RenderableType] = [pools, models, "driver owner: node image (nothing to pause: progress is by generation)"]
    parts += [f"waiting: {line}" for line in waiting] + not_ready
    parts += [f"slo: {r.describe()}" for r in snapshot.slo if not r.triggered]
    parts += [f"[bold red]TRIGGER[/] {t.message}" for t in snapshot.triggers]
    return Group(*parts)


def what_was_done(stack: str, outcome: WatchOutcome) -> str:
    """What the watch did about its triggers, in words (the line after the reasons)."""
    paused = outcome.paused
    if isinstance(outcome.snapshot, ImageSnapshot):
        what = ("nothing paused: the node image owns the driver; hold the rollout by not adding a new "
                "generation, roll back by keeping the old generation live (retired: false)")
    elif outcome.pause_error is not None:
        what = (f"AUTO-PAUSE FAILED: {outcome.pause_error}; run `gpu-rollout pause --stack {stack}` "
                "as soon as the cluster answers")
    elif paused is not None:
        what = f"paused {len(paused.changed)} node(s) with the skip label"
    else:
        what = "not paused (--no-auto-pause)"
    if outcome.evictions is not None:
        what += f"; {outcome.evictions.describe()}"
    if outcome.snapshot.held:
        what += ("; a node held by a failed validation stays cordoned until `gpu-rollout release-node "
                 f"--stack {stack} <node>`")
    return what


def document(stack: str, spec: FleetSpec, outcome: WatchOutcome) -> schemas.WatchDocument:
    """``watch --json``: the last snapshot; on an operator-owned stack also what a trigger's pause did."""
    snapshot = outcome.snapshot
    pools = snapshot.pools(spec)
    image_owned = isinstance(snapshot, ImageSnapshot)
    found = schemas.WatchDocument(
        stack=stack, owner="image" if image_owned else "operator", at=snapshot.at,
        complete=snapshot.complete(spec),
        pools=pools, nodes=[n.as_json() for n in snapshot.nodes], models=snapshot.models,
        triggers=[t.as_json() for t in snapshot.triggers], slo=[r.as_json() for r in snapshot.slo])
    if not isinstance(snapshot, ImageSnapshot):
        found.operator, found.events = snapshot.operator, snapshot.events
        found.paused = outcome.paused.as_json() if outcome.paused else None
        found.pauseError = outcome.pause_error
        found.evictions = outcome.evictions.as_json() if outcome.evictions else None
    return found


def execute(stack: str, spec: FleetSpec, kube: k.Kube, *, once: bool, interval: float, stuck_after: float,
            auto_pause: bool, as_json: bool, max_failed_polls: int = 5, prometheus_url: str | None = None) -> Exit:
    console = consoles.stdout()
    live = Live(console=console, auto_refresh=False) if sys.stdout.isatty() and not as_json else None

    def show(snapshot: Snapshot | ImageSnapshot) -> None:
        if as_json:
            return
        view = image_view(spec, snapshot) if isinstance(snapshot, ImageSnapshot) else snapshot_view(spec, snapshot)
        if live is not None:
            live.update(view, refresh=True)
        else:
            console.print(view)

    def poll_failed(error: ClusterError, failures: int) -> None:
        consoles.say(f"poll failed ({failures}/{max_failed_polls} in a row), retrying in {interval:.0f} s: {error}")

    if live is not None:
        live.start()
    try:
        outcome = watch(kube, spec, stack, interval=interval, stuck_after=stuck_after, auto_pause=auto_pause,
                        once=once, max_failed_polls=max_failed_polls, on_snapshot=show, on_poll_error=poll_failed,
                        on_identity=note_identity,
                        prometheus=for_stack(spec.validation.prometheus if spec.validation else None, kube,
                                             prometheus_url))
    finally:
        if live is not None:
            live.stop()
    image_owned = isinstance(outcome.snapshot, ImageSnapshot)
    if as_json:
        documents.write(document(stack, spec, outcome))
    if outcome.triggered:
        reason = "; ".join(t.message for t in outcome.snapshot.triggers)
        consoles.say(f"rollout stopped: {reason}; {what_was_done(stack, outcome)}")
    elif not as_json and outcome.snapshot.complete(spec):
        console.print("rollout complete: every node of every released pool runs its target driver"
                      + (" (old generations gone or retired in the spec)" if image_owned else ""))
    return Exit.failed_if(outcome.triggered)
