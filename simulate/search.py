"""The safest fast parallelism: per upgrade policy, the largest ``maxParallelUpgrades`` whose simulated rollout keeps
every model at or above its minimum and stops no node on a refused eviction; then the one value the stack sends
every policy, checked by a run of the whole fleet.

A policy is searched alone (the others' nodes stay put), first by runs stopped at the first unsafe event or after a
few rounds of that many nodes (``ROUNDS``), doubling, then halving the gap; the winner is confirmed by a run to the
end, and halved while that run is not safe. The search takes safety to shrink as parallelism grows, which is how
the controller behaves (more nodes out, fewer replicas left, longer waits on PDBs), and no run proves more than
itself: the recommendation is what the confirming run showed.

``maxUnavailable`` comes with it: the recommended parallelism plus the nodes the policy finds cordoned or NotReady
before the rollout, so maxParallelUpgrades is what limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulate.engine import simulate
from simulate.fleet import Fleet, Group, Policy
from simulate.outcome import Outcome

ROUNDS = 6  # a probe runs until this many times its parallelism of nodes are done
MIN_PROBE_NODES = 40
UNLIMITED = "100%"


@dataclass(frozen=True)
class Recommendation:
    group: str  # the policy's title: "NVIDIADriver gpu-h100", "ClusterPolicy cluster-policy"
    pools: tuple[str, ...]
    nodes: int  # nodes it rolls
    max_parallel: int | None  # None: no parallelism keeps every model at its minimum
    max_unavailable: int | None
    reason: str
    runs: int

    def as_json(self) -> dict[str, Any]:
        return {"policy": self.group, "pools": list(self.pools), "nodes": self.nodes,
                "maxParallelUpgrades": self.max_parallel, "maxUnavailable": self.max_unavailable,
                "reason": self.reason, "runs": self.runs}


class _Prober:
    def __init__(self, fleet: Fleet, seed: int) -> None:
        self.fleet = fleet
        self.seed = seed
        self.runs = 0

    def run(self, fleet: Fleet, nodes: int | None) -> Outcome:
        self.runs += 1
        return simulate(fleet, self.seed, stop_when_unsafe=True, stop_after=nodes)


def _alone(fleet: Fleet, group: int) -> Fleet:
    """``fleet`` with only ``group``'s policy rolling (the others switched off: their nodes stay put)."""
    off = tuple(g.policy if k == group else _switched_off(g.policy) for k, g in enumerate(fleet.groups))
    return fleet.with_policies(off)


def _switched_off(policy: Policy) -> Policy:
    return Policy(False, policy.max_parallel, policy.max_unavailable, policy.wait_selector, policy.wait_timeout,
                  policy.deletion_force, policy.deletion_timeout, policy.drain_enable, policy.drain_force,
                  policy.drain_timeout)


def _moving(fleet: Fleet, group: Group) -> tuple[int, int]:
    """(nodes the policy rolls, nodes of it cordoned or NotReady before the rollout)."""
    members = [n for n in fleet.nodes if n.pool in group.pools]
    return (sum(1 for n in members if n.needs_upgrade and n.ready and not n.skip),
            sum(1 for n in members if n.cordoned or not n.ready))


def recommend_group(fleet: Fleet, group: int, seed: int) -> Recommendation:
    target = fleet.groups[group]
    nodes, down = _moving(fleet, target)
    alone = _alone(fleet, group)
    prober = _Prober(fleet, seed)

    def safe(parallel: int, full: bool) -> bool:
        policy = target.policy.with_parallelism(parallel, UNLIMITED)
        horizon = None if full else min(nodes, max(MIN_PROBE_NODES, ROUNDS * parallel))
        return not prober.run(alone.with_policy(group, policy), horizon).disruptive

    def found(parallel: int | None, reason: str) -> Recommendation:
        unavailable = None if parallel is None else parallel + down
        return Recommendation(target.title, target.pools, nodes, parallel, unavailable, reason, prober.runs)

    if not target.policy.auto_upgrade:
        return found(None, "autoUpgrade is false: the controller rolls none of its nodes")
    if nodes == 0:
        return found(None, "no node to upgrade")
    if safe(nodes, full=True):
        return found(nodes, "every node at once keeps every model at its minimum")
    good, bad = 0, nodes
    probe = 1
    while probe < bad:
        if safe(probe, full=False):
            good, probe = probe, probe * 2
        else:
            bad = probe
    while bad - good > 1:
        middle = (good + bad) // 2
        if safe(middle, full=False):
            good = middle
        else:
            bad = middle
    while good > 0 and not safe(good, full=True):
        good //= 2
    if good == 0:
        return found(None, "even one node at a time drops a model below its minimum or stops a node on a PDB: add "
                     "spare capacity, lower minAvailable, cache the weights or raise podDeletion.timeoutSeconds")
    return found(good, f"{bad} at once drops a model below its minimum or stops a node on a PDB"
                 if bad < nodes else "the largest that keeps every model at its minimum")


@dataclass(frozen=True)
class Recommended:
    """The one pair the stack sends every policy (``gpuOperator.upgradePolicy``), with the run that confirms it."""

    per_policy: tuple[Recommendation, ...]
    max_parallel: int | None
    max_unavailable: int | None
    outcome: Outcome | None  # the whole fleet under the recommended pair


def recommend(fleet: Fleet, seed: int) -> Recommended:
    per_policy = tuple(recommend_group(fleet, g, seed) for g in range(len(fleet.groups)))
    values = [r for r in per_policy if r.nodes and r.max_parallel is not None]
    if not values or any(r.nodes and r.max_parallel is None and fleet.groups[k].policy.auto_upgrade
                         for k, r in enumerate(per_policy)):
        return Recommended(per_policy, None, None, None)
    parallel = min(r.max_parallel for r in values if r.max_parallel is not None)
    extra = max(r.max_unavailable - r.max_parallel for r in values
                if r.max_unavailable is not None and r.max_parallel is not None)
    while parallel > 0:
        policies = tuple(g.policy.with_parallelism(parallel, parallel + extra) for g in fleet.groups)
        outcome = simulate(fleet.with_policies(policies), seed)
        if not outcome.disruptive:
            return Recommended(per_policy, parallel, parallel + extra, outcome)
        parallel //= 2
    return Recommended(per_policy, None, None, None)


__all__ = ["Recommendation", "Recommended", "recommend", "recommend_group"]
