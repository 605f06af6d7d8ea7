"""Watch an image-owned rollout (``driver.owner: image``): progress per pool by node-pool generation.

With the driver in the node image there is no operator upgrade to follow: no upgrade-state label, no
skip label that does anything. A pool moves blue/green: a new generation (EKS node group
``<pool>-g<id>``, AKS agent pool ``<pool>g<id>``, nodes labelled ``gpu-driver-upgrade.io/generation``)
comes up on the new image beside the old one, and the old one is retired in the spec
(``retired: true``) once the new one ran clean for the soak time. So this reads live nodes only: per
pool and generation label, how many nodes, how many are Ready and schedulable, and which drivers GFD
reports (``nvidia.com/cuda.driver-version.full``, the deprecated labels as fallback).

A released pool (not held, ``FleetSpec.pool_held``; a canary pool always counts as released) is *done*
when every node of it that is not on a generation retired in the spec (or no longer listed there) is
Ready and reports the pool's target driver, and at least ``nodeCount`` such nodes exist (each
generation's node group has min size ``nodeCount``, so fewer means the new one has not come up). An old
generation still live in the spec blocks done while it has nodes; one retired in the spec does not,
even while the cloud is still removing its nodes. Held pools are shown, never waited for. The rollout
is complete when every released pool is done.

Triggers (no auto-pause: there is nothing to pause; the watch reports them and exits 1):

- ``below-min-available``: a model's available replicas below its minAvailable (as on the operator path);
- ``not-ready``: a node of the stack's pools whose Ready condition is not True for longer than the stuck
  threshold; since the earlier of the condition's ``lastTransitionTime`` and when this watch first saw
  it not Ready;
- ``slo-breach``: a model's SLO breached on a pool being upgraded for as long as it declares, and ``slo-no-data``: no
  figure of it for as long (as on the operator path: :mod:`checks.slo`).

A pool's nodes are found by :func:`fleetspec.membership.node_membership` (the project's pool label, else the
cloud's pool label: EKS node group ``<pool>-g<id>``, AKS agent pool ``<pool>g<id>``), and a node's
generation by the project's generation label, else by the cloud pool it is in; so a pool the stack has
not labelled yet is followed too.

One poll is a LIST of every node, one of Deployments and one of pods per declared model, whatever the
fleet's size.

JSON (:meth:`ImageSnapshot.as_json`; ``gpu-rollout watch --json`` adds ``"stack"``)::

    {"owner": "image", "at": <epoch seconds>, "complete": <bool>,
     "pools": [{"pool": "gpu-l40s", "target": "580.173.02", "held": false, "nodeCount": 4,
                "done": false, "waiting": ["g1 (570.195.03) is still live in the spec with 4 node(s) ..."],
                "generations": [{"generation": "1",       # the node label; "" for nodes without one
                                 "spec": "live",          # live | retired | not in spec | none (pool has none)
                                 "specDriver": "570.195.03",  # what the spec says the image ships, or null
                                 "nodes": 4, "ready": 4, "schedulable": 4,
                                 "drivers": {"570.195.03": 4}}]}],   # GFD's driver -> nodes; "unknown": no label
     "nodes": [{"name", "pool", "generation", "driver", "ready", "schedulable",
                "secondsNotReady"}],                     # secondsNotReady: null while Ready
     "models": [{"model": "ns/name", "available", "minAvailable", "replicas"}],
     "triggers": [{"kind": "below-min-available" | "validation-failed" | "not-ready" | "slo-breach" |
                   "slo-no-data", "subject",
                   "message"}],
     "slo": [...]}                                       # as on the operator path (checks/watch.py)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from checks import kube as k
from checks.hold import HeldNode, held_nodes
from checks.inventory import pool_nodes_of
from checks.nodestate import node_driver_version, require_nodes
from checks.objects import Obj, labels_of, name_of, spec_of, status_of
from checks.progress import StateTracker, Trigger, epoch, list_model_pods, model_rows
from checks.prometheus import Prometheus
from checks.slo import SloReading, slo_of
from gpu_knowledge import labels
from fleetspec.model import FleetSpec, NodePool
from vocabulary.triggers import TriggerKind

UNKNOWN_DRIVER = "unknown"


@dataclass(frozen=True)
class GenerationNode:
    name: str
    pool: str
    generation: str  # the generation label, "" when the node has none
    driver: str | None
    ready: bool
    schedulable: bool
    seconds_not_ready: float | None  # None while Ready

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "pool": self.pool, "generation": self.generation, "driver": self.driver,
                "ready": self.ready, "schedulable": self.schedulable,
                "secondsNotReady": None if self.seconds_not_ready is None else round(self.seconds_not_ready)}


def generation_title(generation: str) -> str:
    return f"g{generation}" if generation else "(no generation label)"


def _spec_state(pool: NodePool, generation: str) -> tuple[str, str | None]:
    """(live | retired | not in spec | none, the driver the spec says that generation's image ships)."""
    if not pool.generations:
        return "none", None
    for gen in pool.generations:
        if str(gen.id) == generation:
            return ("retired" if gen.retired else "live"), gen.driverVersion
    return "not in spec", None


def _leaving(state: str) -> bool:
    """Nodes of a generation the spec no longer keeps: `pulumi up` removes (or removed) their node group."""
    return state in ("retired", "not in spec")


def pool_progress(spec: FleetSpec, pool: NodePool, nodes: list[GenerationNode]) -> dict[str, Any]:
    """One pool's row of the snapshot (see the module docstring for its keys and the done rule)."""
    target = spec.pool_target(pool).driver
    held = spec.pool_held(pool)
    ours = [n for n in nodes if n.pool == pool.name]
    # Every live generation of the spec (one just added has no nodes yet), and any other label on a node.
    shown = {str(g.id) for g in pool.live_generations} | {n.generation for n in ours}
    generations, waiting = [], []
    staying_on_target = 0
    for generation in sorted(shown, key=lambda g: (len(g), g)):
        members = [n for n in ours if n.generation == generation]
        state, spec_driver = _spec_state(pool, generation)
        drivers = Counter(n.driver or UNKNOWN_DRIVER for n in members)
        generations.append({"generation": generation, "spec": state, "specDriver": spec_driver,
                            "nodes": len(members), "ready": sum(n.ready for n in members),
                            "schedulable": sum(n.schedulable for n in members),
                            "drivers": dict(sorted(drivers.items()))})
        if _leaving(state):
            continue
        title = generation_title(generation)
        on_target = [n for n in members if n.driver == target]
        staying_on_target += sum(n.ready for n in on_target)
        off = [n for n in members if n.driver != target]
        if off and spec_driver is not None and spec_driver != target:
            waiting.append(f"{title} ({spec_driver}) is still live in the spec with {len(off)} node(s): once the "
                           f"generation on {target} ran clean for the soak time, set retired: true and `pulumi up`")
        elif off:
            seen = ", ".join(sorted({n.driver or UNKNOWN_DRIVER for n in off}))
            waiting.append(f"{title}: {len(off)} node(s) report driver {seen}, not {target}")
        not_ready = [n for n in on_target if not n.ready]
        if not_ready:
            waiting.append(f"{title}: {len(not_ready)} node(s) on {target} not Ready")
    if pool.generations and not any(g.driverVersion == target for g in pool.live_generations):
        waiting.insert(0, f"no live generation in the spec ships {target}: add one")
    if staying_on_target < pool.nodeCount:
        waiting.append(f"{staying_on_target}/{pool.nodeCount} node(s) Ready on {target}")
    return {"pool": pool.name, "target": target, "held": held, "nodeCount": pool.nodeCount,
            "done": not waiting, "waiting": waiting, "generations": generations}


@dataclass
class ImageSnapshot:
    at: float
    nodes: list[GenerationNode]
    models: list[dict[str, Any]]
    triggers: list[Trigger]
    held: list[HeldNode] = field(default_factory=list)  # nodes held by a failed validation
    slo: list[SloReading] = field(default_factory=list)  # the models' objectives on the pools being upgraded

    def pools(self, spec: FleetSpec) -> list[dict[str, Any]]:
        return [pool_progress(spec, pool, self.nodes) for pool in spec.nodePools]

    def complete(self, spec: FleetSpec) -> bool:
        """Every released pool is done (see the module docstring)."""
        return all(p["held"] or p["done"] for p in self.pools(spec))


def _ready(node: Obj) -> tuple[bool, str | None]:
    """Whether the node's Ready condition is True, and when that condition last changed."""
    for condition in status_of(node).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True", condition.get("lastTransitionTime")
    return False, None


def take_image_snapshot(kube: k.Kube, spec: FleetSpec, tracker: StateTracker, now: float,
                        stuck_after: float, all_nodes: list[Obj] | None = None,
                        prometheus: Prometheus | None = None) -> ImageSnapshot:
    """One poll of an image-owned stack: nodes (unless ``all_nodes`` holds every node already), Deployments
    and each model's pods; with ``prometheus``, the models' SLOs on the pools being upgraded."""
    listed = pool_nodes_of(spec, kube.list(k.NODES) if all_nodes is None else all_nodes)
    require_nodes(listed, spec, "watch")
    deployments = kube.list(k.DEPLOYMENTS)
    pods = list_model_pods(kube, spec)
    nodes, triggers = [], []
    for node, membership in listed:
        node_labels = labels_of(node)
        name, pool = name_of(node), membership.pool.name
        generation = (str(membership.generation.id) if membership.generation is not None
                      else node_labels.get(labels.GENERATION, ""))
        ready, changed = _ready(node)
        seconds = None
        if not ready:
            seen = [epoch(changed), tracker.since(name, "NotReady", now)]
            seconds = max(0.0, now - min(t for t in seen if t is not None))
            if seconds > stuck_after:
                triggers.append(Trigger(TriggerKind.NOT_READY, name, f"node {name} (pool {pool}, "
                                        f"{generation_title(generation)}) has not been "
                                        f"Ready for {seconds / 60:.0f} min (threshold {stuck_after / 60:.0f} min)"))
        nodes.append(GenerationNode(name, pool, generation, node_driver_version(node),
                                    ready, not spec_of(node).get("unschedulable", False), seconds))
    held = held_nodes(listed)
    models, model_triggers = model_rows(spec, deployments, pods)
    slo = slo_of(prometheus, spec, pods, listed, now)
    return ImageSnapshot(now, nodes, models, model_triggers + [h.trigger() for h in held] + triggers
                         + [r.trigger() for r in slo if r.triggered], held, slo)
