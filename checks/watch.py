"""Watch a rollout: progress per pool, the operator's status and events, and the triggers that pause it.

Triggers: a node in ``upgrade-failed``; a model whose available replicas fall below its minAvailable;
a node in one in-progress state longer than ``stuck_after``. Time in state comes from the operator's
``GPUDriverUpgrade`` event for that state when there is one, else from when this watch first saw the
node in it. Time is injected (``clock``, ``sleep``), so tests never wait.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from checks import kube as k
from checks.inventory import labels_of, meta, name_of, pool_selector
from checks.owner import node_driver_version
from checks.pause import PauseReport, pause
from spec import capacity, labels
from spec.model import FleetSpec

FAILED = "upgrade-failed"
IN_PROGRESS = ("cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
               "pod-restart-required", "validation-required", "uncordon-required")
EVENT_REASON = "GPUDriverUpgrade"


@dataclass(frozen=True)
class NodeProgress:
    name: str
    pool: str
    state: str  # "" when the node has no upgrade-state label
    driver: str | None
    done: bool
    seconds_in_state: float | None
    skipped: bool

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "pool": self.pool, "state": self.state, "driver": self.driver, "done": self.done,
                "secondsInState": None if self.seconds_in_state is None else round(self.seconds_in_state),
                "skipped": self.skipped}


@dataclass(frozen=True)
class Trigger:
    kind: str  # upgrade-failed | below-min-available | stuck
    subject: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "message": self.message}


@dataclass
class Snapshot:
    at: float
    nodes: list[NodeProgress]
    models: list[dict[str, Any]]
    operator: list[dict[str, str]]
    events: list[dict[str, str]]
    triggers: list[Trigger]

    def pools(self, spec: FleetSpec) -> list[dict[str, Any]]:
        out = []
        for pool in spec.nodePools:
            nodes = [n for n in self.nodes if n.pool == pool.name]
            out.append({"pool": pool.name, "target": spec.pool_driver_version(pool), "held": spec.pool_held(pool),
                        "done": sum(n.done for n in nodes), "total": len(nodes),
                        "states": dict(sorted(Counter(n.state or "(none)" for n in nodes).items()))})
        return out

    def complete(self, spec: FleetSpec) -> bool:
        """Every node of every released pool runs its target driver and is upgrade-done."""
        return all(p["held"] or p["done"] == p["total"] for p in self.pools(spec))

    def as_json(self, spec: FleetSpec) -> dict[str, Any]:
        return {"at": self.at, "pools": self.pools(spec), "nodes": [n.as_json() for n in self.nodes],
                "models": self.models, "operator": self.operator, "events": self.events,
                "triggers": [t.as_json() for t in self.triggers]}


@dataclass
class StateTracker:
    """When this watch first saw each node in its current state (survives across polls)."""

    first_seen: dict[str, tuple[str, float]] = field(default_factory=dict)

    def since(self, node: str, state: str, now: float) -> float:
        seen = self.first_seen.get(node)
        if seen is None or seen[0] != state:
            self.first_seen[node] = (state, now)
            return now
        return seen[1]


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _entered_at(events: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(node, state) -> when the operator reported moving the node into that state."""
    out: dict[tuple[str, str], float] = {}
    for event in events:
        node = (event.get("involvedObject") or {}).get("name", "")
        message = event.get("message") or ""
        when = _epoch(event.get("lastTimestamp") or event.get("eventTime") or meta(event).get("creationTimestamp"))
        if "[" in message and when is not None:
            state = message.rsplit("[", 1)[1].split("]", 1)[0]
            out[(node, state)] = max(when, out.get((node, state), 0.0))
    return out


def take_snapshot(kube: k.Kube, spec: FleetSpec, tracker: StateTracker, now: float,
                  stuck_after: float) -> Snapshot:
    """One poll: five LISTs, whatever the fleet's size."""
    nodes = kube.list(k.NODES, label_selector=pool_selector(spec))
    deployments = kube.list(k.DEPLOYMENTS)
    events = kube.list(k.EVENTS, field_selector=f"involvedObject.kind=Node,reason={EVENT_REASON}")
    policies = kube.list_optional(k.CLUSTER_POLICIES) or []
    drivers = kube.list_optional(k.NVIDIA_DRIVERS) or []
    entered = _entered_at(events)
    pools = {p.name: p for p in spec.nodePools}
    progress, triggers = [], []
    for node in sorted(nodes, key=name_of):
        node_labels = labels_of(node)
        name, pool_name = name_of(node), node_labels.get(labels.POOL, "")
        state = node_labels.get(labels.UPGRADE_STATE, "")
        driver = node_driver_version(node)
        pool = pools.get(pool_name)
        target = spec.pool_driver_version(pool) if pool else None
        done = driver == target and state in ("", "upgrade-done")
        since = min(entered.get((name, state), now), tracker.since(name, state, now)) if state else None
        seconds = None if since is None else max(0.0, now - since)
        progress.append(NodeProgress(name, pool_name, state, driver, done, seconds,
                                     node_labels.get(labels.SKIP_UPGRADE) == "true"))
        if state == FAILED:
            triggers.append(Trigger(FAILED, name, f"node {name} (pool {pool_name}) is in upgrade-failed"))
        elif state in IN_PROGRESS and seconds is not None and seconds > stuck_after:
            triggers.append(Trigger("stuck", name, f"node {name} has been in {state} for {seconds / 60:.0f} min "
                                    f"(threshold {stuck_after / 60:.0f} min)"))
    by_key = {f"{meta(d).get('namespace')}/{name_of(d)}": d for d in deployments}
    models = []
    for model in spec.models:
        key = f"{model.namespace}/{model.name}"
        deployment = by_key.get(key)
        status = (deployment or {}).get("status") or {}
        available = int(status.get("availableReplicas") or 0)
        replicas = int(((deployment or {}).get("spec") or {}).get("replicas") or model.replicas)
        minimum = capacity.min_available_replicas(model.minAvailable, replicas)
        models.append({"model": key, "available": available, "minAvailable": minimum, "replicas": replicas})
        if available < minimum:
            triggers.append(Trigger("below-min-available", key, f"model {key} has {available} available "
                                    f"replica(s), below its minAvailable {minimum}" +
                                    ("" if deployment else " (Deployment not found)")))
    operator = [{"kind": o.get("kind", kind), "name": name_of(o), "state": str((o.get("status") or {}).get("state", "?"))}
                for kind, objs in (("ClusterPolicy", policies), ("NVIDIADriver", drivers)) for o in objs]
    recent = sorted(events, key=lambda e: _epoch(e.get("lastTimestamp") or meta(e).get("creationTimestamp")) or 0)
    event_rows = [{"node": (e.get("involvedObject") or {}).get("name", ""), "message": e.get("message", "")}
                  for e in recent[-10:]]
    return Snapshot(now, progress, models, operator, event_rows, triggers)


@dataclass
class WatchOutcome:
    snapshot: Snapshot
    paused: PauseReport | None  # set when the watch paused the rollout itself

    @property
    def triggered(self) -> bool:
        return bool(self.snapshot.triggers)


def watch(kube: k.Kube, spec: FleetSpec, stack: str, *, interval: float = 30.0, stuck_after: float = 3600.0,
          auto_pause: bool = True, once: bool = False, clock: Callable[[], float] = time.time,
          sleep: Callable[[float], None] = time.sleep,
          on_snapshot: Callable[[Snapshot], None] = lambda s: None) -> WatchOutcome:
    """Poll until a trigger fires (pause unless told not to), the rollout completes, or once."""
    tracker = StateTracker()
    while True:
        snapshot = take_snapshot(kube, spec, tracker, clock(), stuck_after)
        on_snapshot(snapshot)
        if snapshot.triggers:
            reason = "; ".join(t.message for t in snapshot.triggers)
            return WatchOutcome(snapshot, pause(kube, spec, stack, reason) if auto_pause else None)
        if once or snapshot.complete(spec):
            return WatchOutcome(snapshot, None)
        sleep(interval)
