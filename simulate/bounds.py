"""The least time any schedule needs to roll a fleet, given its spare capacity: what the predicted duration is
measured against (predicted / lower bound says how much the policy costs).

Two bounds, the larger holds. Per model whose PDB lets ``a`` replicas go: an eviction needs the allowance, and gets
it back only when a replacement is Ready, a load time later; so ``E`` evictions (its Ready replicas on nodes that
move) take at least ``(ceil(E / a) - 1)`` load times, and the last node then still installs and validates. Per pool: each node, once its pods are evicted, spends at least the driver install and the validator's time out of
service (the shortest the spread allows); and no more nodes can be out at once than
:func:`gpu_knowledge.capacity.nodes_out_within_budgets` allows, since the replicas each PDB keeps (of the models that run on
that pool alone) must still fit on the others. With identical steps, ``n`` nodes at most ``k`` at a time take at least
``ceil(n / k)`` steps; where every node of a pool moves, a count of GPU-seconds bounds it too (:func:`_gpu_time`:
the nodes out, the kept replicas Ready, their replacements loading, the evicted terminating). Waves run one after the other, with the configured gap between them, and each lasts at least
as long as the bound of any model whose evictions all fall within it. Everything ignored
(waiting for slots, evictions, jobs, loads, models spanning pools) only makes real schedules longer, so the bound
holds for any schedule that honours the PDBs: the simulator's included.

Within what the policy pack admits (``admits``: per pool, the most nodes its upgrade policy may roll at once by
canary-one-node-at-a-time and parallelism-within-spare-capacity), the same bound with no pool rolling more nodes at
once than that: the least time any schedule the pack lets through needs. The two side by side split a predicted
duration into what the pack's rules cost (the step between them) and what the controller's schedule costs (the
prediction over the second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from simulate.fleet import Fleet, Node
from simulate.outcome import ModelOutcome
from gpu_knowledge import capacity, labels
from fleetspec.simulation import VALIDATION_TIMEOUT_SECONDS


@dataclass(frozen=True)
class PoolBound:
    pool: str
    wave: int
    nodes: int  # nodes to upgrade
    at_once: int  # the most that can be out at once
    node_seconds: float  # the least one node is out
    seconds: float
    pack_admits: int | None = None  # where the bound is within the pack: the most nodes at once it admits (None: any)
    held_by_pack: bool = False  # the pack admits fewer nodes at once than the spare capacity would allow

    def as_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "wave": self.wave, "nodes": self.nodes, "maxNodesOutAtOnce": self.at_once,
                "packAdmits": self.pack_admits, "nodeSeconds": round(self.node_seconds, 1),
                "seconds": round(self.seconds, 1)}


@dataclass(frozen=True)
class ModelBound:
    model: str
    evictions: int  # its Ready replicas on nodes that move
    allowance: int  # replicas its PDB lets go at once
    load_seconds: float  # the least a replacement takes until Ready
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "evictions": self.evictions, "allowance": self.allowance,
                "loadSeconds": round(self.load_seconds, 1), "seconds": round(self.seconds, 1)}


@dataclass(frozen=True)
class LowerBound:
    seconds: float
    pools: tuple[PoolBound, ...]
    models: tuple[ModelBound, ...] = ()

    @property
    def limited_by(self) -> str:
        """What sets the bound: a model's PDB and load time, or the pools' spare capacity."""
        slowest = max(self.models, key=lambda m: m.seconds, default=None)
        if slowest is not None and slowest.seconds >= self.seconds:
            return (f"model {slowest.model}: {slowest.evictions} evictions, {slowest.allowance} at a time, each back "
                    f"after {slowest.load_seconds / 60:.1f} min")
        moving = [p for p in self.pools if p.nodes]
        if not any(p.held_by_pack for p in moving):
            return "spare capacity: " + ", ".join(f"{p.pool} {p.at_once} node(s) at once" for p in moving)
        return "nodes at once: " + ", ".join(
            f"{p.pool} {p.at_once} ({'the pack' if p.held_by_pack else 'spare capacity'})" for p in moving)

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "minutes": round(self.seconds / 60, 1),
                "limitedBy": self.limited_by, "pools": [p.as_json() for p in self.pools],
                "models": [m.as_json() for m in self.models]}


def lower_bound(fleet: Fleet, models: tuple[ModelOutcome, ...], admits: Mapping[str, int] | None = None) -> LowerBound:
    """The bound for ``fleet``; ``models`` is any run's outcome of it, for the replicas Ready before the rollout
    (a PDB keeps no more than were Ready). With ``admits`` (pool: at least 1 node at once), the bound within what
    the policy pack admits: no pool named there has more nodes out at once."""
    if admits is not None and any(limit < 1 for limit in admits.values()):
        raise ValueError(f"a pool's admitted nodes at once must be at least 1, got {dict(admits)}")
    durations = fleet.durations
    shortest = 1 - durations.jitter
    node_seconds = shortest * (durations.driverInstallSeconds
                               + min(durations.validatorSeconds, VALIDATION_TIMEOUT_SECONDS))
    started = {m.name: m.ready_at_start for m in models}
    bounds = []
    for pool in fleet.pools:
        members = [n for n in fleet.nodes if n.pool == pool.name]
        # What the simulator moves after the wave's release (a node seen mid-upgrade may move any time).
        moving = sum(1 for n in members if n.needs_upgrade and n.state in ("", labels.UPGRADE_REQUIRED, labels.UPGRADE_DONE)
                     and n.ready and not n.skip)
        kept = [capacity.Workload(m.name, kept, m.gpus_per_replica, kept)
                for m in fleet.models if m.pools == (pool.name,)
                for kept in [min(m.kept, started.get(m.name, m.replicas))]]
        largest = max((n.gpus for n in members), default=pool.gpus_per_node)
        shape = capacity.PoolShape(pool.name, len(members), max(largest, 1))
        at_once = max(1, capacity.nodes_out_within_budgets(shape, kept))
        limit = None if admits is None else admits.get(pool.name)
        held = False
        if limit is not None and limit < at_once:
            at_once, held = limit, True
        seconds = math.ceil(moving / at_once) * node_seconds if moving else 0.0
        if moving and moving == len(members):
            seconds = max(seconds, _gpu_time(fleet, pool.name, members, started, node_seconds))
        bounds.append(PoolBound(pool.name, pool.wave, moving, at_once, node_seconds, seconds, limit, held))
    waves = sorted({p.wave for p in fleet.pools})
    limits = _model_bounds(fleet, started, node_seconds)
    within = _wave_of_models(fleet)
    total = sum(max([*(b.seconds for b in bounds if b.wave == w),
                     *(m.seconds for m in limits if within.get(m.model) == w)]) for w in waves)
    total += durations.waveGapSeconds * max(0, len(waves) - 1)
    return LowerBound(max([total, *(m.seconds for m in limits)]), tuple(bounds), limits)


def _gpu_time(fleet: Fleet, pool: str, members: list[Node], started: dict[str, int], node_seconds: float) -> float:
    """The pool's bound in GPU-seconds, when every node of it moves (so it holds at the pool's end no replica that
    did not land after its node's upgrade). At any moment each GPU of the pool is at most one of: on a node out
    for its install and validation, under a Ready replica, under a replica loading, under an evicted replica
    terminating. Over the pool's span ``T``: every node is out ``node_seconds``; the replicas each PDB keeps of the
    pool's own models are Ready throughout; at the end at least as many are Ready on upgraded nodes, each loaded
    there within ``T``; and every replica Ready at the start is evicted and terminates within ``T``. So
    ``T x total >= total x node_seconds + kept x T + kept x load + started x termination`` (in GPUs)."""
    durations = fleet.durations
    shortest = 1 - durations.jitter
    total = sum(n.gpus for n in members)
    kept_gpus = 0
    loading = 0.0
    terminating = 0.0
    for model in fleet.models:
        if model.pools != (pool,):
            continue
        ready = started.get(model.name, model.replicas)
        kept = min(model.kept, ready)
        kept_gpus += kept * model.gpus_per_replica
        loading += kept * model.gpus_per_replica * shortest * model.load_seconds
        if fleet.place_replicas:
            terminating += ready * model.gpus_per_replica * shortest * durations.podTerminationSeconds
    spare = total - kept_gpus
    if spare <= 0:
        return 0.0  # the kept replicas leave no room: nothing moves, no bound is needed
    return (total * node_seconds + loading + terminating) / spare


def _wave_of_models(fleet: Fleet) -> dict[str, int]:
    """The wave of each model whose evictions all fall within one wave: its pools are in that wave, and every node of
    them waits for the wave's release (none seen mid-upgrade, which moves at any time). Waves run one after the
    other, so such a model's bound holds for its wave alone."""
    wave = {p.name: p.wave for p in fleet.pools}
    waiting = ("", labels.UPGRADE_REQUIRED, labels.UPGRADE_DONE)
    early = {n.pool for n in fleet.nodes if n.state not in waiting}
    found = {}
    for model in fleet.models:
        if not model.pools or early & set(model.pools) or any(p not in wave for p in model.pools):
            continue
        waves = {wave[p] for p in model.pools}
        if len(waves) == 1:
            (found[model.name],) = waves
    return found


def _model_bounds(fleet: Fleet, started: dict[str, int], node_seconds: float) -> tuple[ModelBound, ...]:
    shortest = 1 - fleet.durations.jitter
    moving = {n.name for n in fleet.nodes if n.needs_upgrade and n.ready and not n.skip}
    on_moving = [0] * len(fleet.models)
    for pod in fleet.pods:
        if pod.model is not None and pod.ready and pod.node in moving:
            on_moving[pod.model] += 1
    found = []
    for index, model in enumerate(fleet.models):
        ready = started.get(model.name, model.replicas)
        # The stack's case: the scheduler placed the replicas, and every node moves.
        evictions = min(ready, model.replicas) if fleet.place_replicas else on_moving[index]
        allowance = max(0, ready - model.kept) if model.pdb is not None else 0
        if not evictions or not allowance:
            continue  # no PDB limits it, or none lets a replica go (that stalls: no bound is needed)
        load = shortest * model.load_seconds
        seconds = (math.ceil(evictions / allowance) - 1) * load + node_seconds
        found.append(ModelBound(model.name, evictions, allowance, load, seconds))
    return tuple(found)


__all__ = ["LowerBound", "ModelBound", "PoolBound", "lower_bound"]
