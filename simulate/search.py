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

import math
from dataclasses import dataclass, replace
from collections.abc import Callable
from typing import Any

from gpu_knowledge import capacity
from simulate.engine import simulate
from simulate.fleet import Fleet, Group, Policy
from simulate.outcome import PARALLELISM_CAUSES, Outcome
from vocabulary.policy_ids import PolicyId

ROUNDS = 6  # a probe runs until this many times its parallelism of nodes are done
MIN_PROBE_NODES = 40
UNLIMITED = "100%"
# The longest podDeletion.timeoutSeconds a recommendation sets: the upper end of what eviction-respects-pdb's
# remediation advises (300-900 s), so a PDB that never lets go still fails a node within a quarter hour.
DELETION_TIMEOUT_CAP = 900
DELETION_TIMEOUT_MARGIN = 2  # the timeout set is this many times the longest pod deletion the confirming run saw
LONGER_TIMEOUT_PRECISION = 32  # the search with a longer timeout stops within 1/32 of the largest safe value


@dataclass(frozen=True)
class Recommendation:
    group: str  # the policy's title: "NVIDIADriver gpu-h100", "ClusterPolicy cluster-policy"
    pools: tuple[str, ...]
    nodes: int  # nodes it rolls
    max_parallel: int | None  # None: no parallelism keeps every model at its minimum
    max_unavailable: int | None
    reason: str
    runs: int
    deletion_timeout: int | None = None  # podDeletion.timeoutSeconds to set with it (None: keep the configured)

    def as_json(self) -> dict[str, Any]:
        return {"policy": self.group, "pools": list(self.pools), "nodes": self.nodes,
                "maxParallelUpgrades": self.max_parallel, "maxUnavailable": self.max_unavailable,
                "podDeletionTimeoutSeconds": self.deletion_timeout, "reason": self.reason, "runs": self.runs}


class _Prober:
    def __init__(self, fleet: Fleet, seed: int) -> None:
        self.fleet = fleet
        self.seed = seed
        self.runs = 0

    def run(self, fleet: Fleet, nodes: int | None) -> Outcome:
        self.runs += 1
        return simulate(fleet, self.seed, stop_when_unsafe=True, stop_after=nodes)


def rolling_alone(fleet: Fleet, group: int) -> Fleet:
    """``fleet`` with only ``group``'s policy rolling (the others switched off, autoUpgrade false: their nodes stay
    put)."""
    off = tuple(g.policy if k == group else replace(g.policy, auto_upgrade=False) for k, g in enumerate(fleet.groups))
    return fleet.with_policies(off)


def moving_nodes(fleet: Fleet, group: Group) -> tuple[int, int]:
    """(nodes the policy rolls, nodes of it cordoned or NotReady before the rollout)."""
    members = [n for n in fleet.nodes if n.pool in group.pools]
    return (sum(1 for n in members if n.needs_upgrade and n.ready and not n.skip),
            sum(1 for n in members if n.cordoned or not n.ready))


def recommend_group(fleet: Fleet, group: int, seed: int, longer_timeout_up_to: int | None = None) -> Recommendation:
    """The policy's safest fast parallelism at its configured pod-deletion timeout. With ``longer_timeout_up_to``
    (the most nodes at once worth having: what the pack admits), where that timeout stops a node on a PDB below
    it, also the parallelism a longer one allows (:func:`_longer_timeout`)."""
    target = fleet.groups[group]
    nodes, down = moving_nodes(fleet, target)
    alone = rolling_alone(fleet, group)
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
    if longer_timeout_up_to is not None and bad < nodes and good < longer_timeout_up_to:
        longer = _longer_timeout(alone, group, prober, good, bad, min(nodes, longer_timeout_up_to), down)
        if longer is not None:
            return longer
    while good > 0 and not safe(good, full=True):
        good //= 2
    if good == 0:
        return found(None, "even one node at a time drops a model below its minimum or stops a node on a PDB: add "
                     "spare capacity, lower minAvailable, cache the weights or raise podDeletion.timeoutSeconds")
    return found(good, f"{bad} at once drops a model below its minimum or stops a node on a PDB"
                 if bad < nodes else "the largest that keeps every model at its minimum")


def _largest_safe(safe: Callable[[int], bool], low: int, most: int) -> int:
    """The largest value up to ``most`` that ``safe`` passes, ``low`` taken as safe: doubling, then halving the gap
    until it is within :data:`LONGER_TIMEOUT_PRECISION` of the value (each probe of a large fleet runs thousands of
    nodes)."""
    high = most + 1
    probe = min(most, max(1, low * 2))
    while probe < high:
        if not safe(probe):
            high = probe
        elif probe == most:
            return most
        else:
            low, probe = probe, min(most, probe * 2)
    while high - low > max(1, low // LONGER_TIMEOUT_PRECISION):
        middle = (low + high) // 2
        if safe(middle):
            low = middle
        else:
            high = middle
    return low


def _longer_timeout(alone: Fleet, group: int, prober: _Prober, good: int, bad: int, most: int,
                    down: int) -> Recommendation | None:
    """Where the configured podDeletion.timeoutSeconds is what stops a node (a drain that honours the PDBs, waiting
    on replacements to load, outlasts it): the largest parallelism whose runs finish every pod deletion within
    :data:`DELETION_TIMEOUT_CAP` / :data:`DELETION_TIMEOUT_MARGIN`, and a timeout of that margin times the longest
    pod deletion its full run saw (so at most the cap). A run whose deletions all end before its timeout is the
    same run at any longer one, so the full run confirms the pair. None where no longer timeout buys a node more,
    where drain is on (a failed pod deletion goes on to drain, not to upgrade-failed) or the configured timeout
    leaves no room for the margin (0 waits forever)."""
    target = alone.groups[group]
    configured = target.policy.deletion_timeout
    searched = DELETION_TIMEOUT_CAP // DELETION_TIMEOUT_MARGIN
    if configured == 0 or configured >= searched or target.policy.drain_enable:
        return None
    nodes = moving_nodes(alone, target)[0]

    def run(parallel: int, full: bool) -> Outcome:
        policy = replace(target.policy.with_parallelism(parallel, UNLIMITED), deletion_timeout=searched)
        horizon = None if full else min(nodes, max(MIN_PROBE_NODES, ROUNDS * parallel))
        return prober.run(alone.with_policy(group, policy), horizon)

    # A probe safe at the configured timeout never reached it: at a longer one it is the same run, so ``good`` holds.
    low = _largest_safe(lambda parallel: not run(parallel, full=False).disruptive, good, most)
    while low > good:
        confirmed = run(low, full=True)
        if not confirmed.disruptive:
            seen = confirmed.longest_pod_deletion
            timeout = 60 * math.ceil(DELETION_TIMEOUT_MARGIN * seen / 60)
            if timeout <= configured:  # the configured one already leaves the margin
                return Recommendation(target.title, target.pools, nodes, low, low + down,
                                      f"{low} at once: its longest pod deletion, {seen:.0f} s, ends well within "
                                      f"podDeletion.timeoutSeconds {configured}", prober.runs)
            reason = (f"podDeletion.timeoutSeconds {configured} stops a node on a PDB at {bad} at once; {timeout} "
                      f"({DELETION_TIMEOUT_MARGIN} x the longest pod deletion seen, {seen:.0f} s; at most "
                      f"{DELETION_TIMEOUT_CAP}) lets {low} at once wait for their PDBs instead")
            return Recommendation(target.title, target.pools, nodes, low, low + down, reason, prober.runs, timeout)
        low //= 2
    return None


@dataclass(frozen=True)
class Recommended:
    """What the stack should send, with the run of the whole fleet that confirms it: one pair per policy where the
    stack gives each pool its own (``nodePools[].upgradePolicy``), else the one pair ``gpuOperator.upgradePolicy``
    sends every policy (``max_parallel``, ``max_unavailable``)."""

    per_policy: tuple[Recommendation, ...]
    max_parallel: int | None  # the one pair; None per pool, or when none is safe
    max_unavailable: int | None
    outcome: Outcome | None  # the whole fleet under the recommended set
    per_pool: bool = False  # each policy its own pair (``values``)
    values: tuple[tuple[int, int] | None, ...] = ()  # per policy: the confirmed (maxParallelUpgrades, maxUnavailable)
    timeouts: tuple[int | None, ...] = ()  # per policy, per pool: podDeletion.timeoutSeconds to set (None: keep it)

    @property
    def found(self) -> bool:
        return self.outcome is not None


CANARY_RULE, CAPACITY_RULE = PolicyId.CANARY_ONE_NODE_AT_A_TIME, PolicyId.PARALLELISM_WITHIN_SPARE_CAPACITY


def pack_limits(fleet: Fleet, group: int) -> dict[str, tuple[int, str]]:
    """Per pool the policy rolls, the most nodes of it at once the policy pack admits, with the rule that says so:
    1 on a canary's pool (canary-one-node-at-a-time); else what parallelism-within-spare-capacity admits by its
    arithmetic (``capacity.most_nodes_out_safely`` over the pool's models, the validation job's GPUs as the pack
    counts them), where that is fewer than the pool's nodes. A pool without one node of spare GPUs is left to
    spare-capacity, as the rule leaves it: no parallelism fixes it."""
    target = fleet.groups[group]
    limits: dict[str, tuple[int, str]] = {}
    for pool in fleet.pools:
        if pool.name not in target.pools:
            continue
        if pool.one_at_a_time:
            limits[pool.name] = (1, f"{CANARY_RULE}: {pool.name} is a canary's pool")
            continue
        nodes = sum(1 for n in fleet.nodes if n.pool == pool.name)
        workloads = [capacity.Workload(m.name, m.replicas, m.gpus_per_replica, *m.pdb)
                     for m in fleet.models if pool.name in m.pools and m.pdb is not None]
        shape = capacity.PoolShape(pool.name, nodes, pool.gpus_per_node)
        if nodes == 0 or capacity.spare_nodes(shape, workloads) < 1:
            continue
        safe = capacity.most_nodes_out_safely(shape, workloads, pool.judged_validation_gpus)
        if safe < nodes:
            limits[pool.name] = (safe, f"{CAPACITY_RULE}: {safe} node(s) of {pool.name} at once in its worst case")
    return limits


def admitted(fleet: Fleet, group: int) -> tuple[int | None, str]:
    """The largest ``maxParallelUpgrades`` the policy pack admits for a policy (None: any; 0: none): the least of
    :func:`pack_limits` over its pools, with the rule that sets it."""
    return min(pack_limits(fleet, group).values(), key=lambda limit: limit[0], default=(None, ""))


def beyond_the_pack(fleet: Fleet) -> list[str]:
    """Where a policy as simulated is one the pack refuses, in words: the stack that sends it fails `gpu-rollout plan`.
    canary-one-node-at-a-time judges the setting: maxParallelUpgrades exactly 1 (0 is unlimited), autoUpgrade on or
    off. parallelism-within-spare-capacity judges the nodes of each pool a rolling policy may take at once
    (``capacity.policy_nodes_out``) against that pool's own limit; a policy with autoUpgrade false rolls nothing
    and is skipped, as the rule skips it."""
    found = []
    canary_pools = {p.name for p in fleet.pools if p.one_at_a_time}
    for k, group in enumerate(fleet.groups):
        if not group.judged_by_pack:
            continue  # an external ClusterPolicy: the pack sees no policy to refuse (it advises checking it)
        policy = group.policy
        bound = [pool for pool in group.pools if pool in canary_pools]
        if bound and policy.max_parallel != 1:
            setting = "0 (unlimited)" if policy.max_parallel == 0 else str(policy.max_parallel)
            found.append(f"{group.title} sets maxParallelUpgrades {setting}; the policy pack admits only 1 "
                         f"({CANARY_RULE}: {', '.join(bound)} is a canary's pool)")
        if not policy.auto_upgrade:
            continue
        members = [n.pool for n in fleet.nodes if n.pool in group.pools]
        for pool, (limit, why) in pack_limits(fleet, k).items():
            if pool in canary_pools:
                continue
            out = capacity.policy_nodes_out(policy.max_parallel, policy.max_unavailable, len(members),
                                            members.count(pool))
            if out > limit:
                found.append(f"{group.title} may take {out} node(s) of {pool} at once; the policy pack admits "
                             f"{limit} ({why})")
    return found


def admitted_by_pool(fleet: Fleet) -> dict[str, int] | None:
    """Per pool, the most nodes at once any policy the pack admits may roll of it: its policy's :func:`admitted`
    (already the least over the pools that policy rolls: the pack holds its slots to each); a pool the pack leaves
    free is absent. None where the pack admits no parallelism on a rolling policy: no schedule it admits exists.
    Policies with autoUpgrade false roll nothing and limit nothing; nor does a policy the pack does not see (an
    external ClusterPolicy)."""
    limits: dict[str, int] = {}
    for k, group in enumerate(fleet.groups):
        if not group.policy.auto_upgrade or not group.judged_by_pack:
            continue
        limit = admitted(fleet, k)[0]
        if limit == 0:
            return None
        if limit is not None:
            limits.update((pool, limit) for pool in group.pools)
    return limits


def _within(found: Recommendation, admits: tuple[int | None, str]) -> Recommendation:
    """``found`` held to what the pack admits."""
    limit, why = admits
    if found.max_parallel is None or found.max_unavailable is None or limit is None or found.max_parallel <= limit:
        return found
    if limit == 0:
        return Recommendation(found.group, found.pools, found.nodes, None, None,
                              f"the policy pack admits no parallelism ({why}): add spare capacity", found.runs)
    down = found.max_unavailable - found.max_parallel
    return Recommendation(found.group, found.pools, found.nodes, limit, limit + down,
                          f"the policy pack admits {limit} ({why}); the simulation alone: {found.max_parallel}",
                          found.runs, found.deletion_timeout)


def _at_fault(fleet: Fleet, outcome: Outcome) -> set[int]:
    """The policies whose pools hold what made a run unsafe: a model below its minimum, a node stopped on evictions."""
    pools = {s.pool for s in outcome.stalls if s.permanent and s.cause in PARALLELISM_CAUSES}
    below = {m.name for m in outcome.below_minimum}
    pools |= {p for m in fleet.models if m.name in below for p in m.pools}
    owner = fleet.group_of_pool()
    return {owner[p] for p in pools if p in owner}


def recommend(fleet: Fleet, seed: int) -> Recommended:
    # Per pool, a policy's own podDeletion.timeoutSeconds may be set with its parallelism (up to what the pack
    # admits); with one policy for every pool, its parallelism alone.
    longer = per_pool(fleet)
    per_policy = tuple(_within(recommend_group(fleet, g, seed, _worth(fleet, g, admits) if longer else None), admits)
                       for g in range(len(fleet.groups)) for admits in [admitted(fleet, g)])
    values = [r for r in per_policy if r.nodes and r.max_parallel is not None]
    if not values or any(r.nodes and r.max_parallel is None and fleet.groups[k].policy.auto_upgrade
                         for k, r in enumerate(per_policy)):
        return Recommended(per_policy, None, None, None, per_pool=per_pool(fleet))
    if per_pool(fleet):
        return _confirm_per_policy(fleet, seed, per_policy)
    parallel = min(r.max_parallel for r in values if r.max_parallel is not None)
    extra = max(r.max_unavailable - r.max_parallel for r in values
                if r.max_unavailable is not None and r.max_parallel is not None)
    while parallel > 0:
        policies = tuple(g.policy.with_parallelism(parallel, parallel + extra) for g in fleet.groups)
        outcome = simulate(fleet.with_policies(policies), seed)
        if not outcome.disruptive:
            return Recommended(per_policy, parallel, parallel + extra, outcome,
                               values=tuple((parallel, parallel + extra) for _ in fleet.groups))
        parallel //= 2
    return Recommended(per_policy, None, None, None)


def _worth(fleet: Fleet, group: int, admits: tuple[int | None, str]) -> int:
    """The most nodes at once worth a longer timeout: what the pack admits, else every node the policy rolls."""
    limit = admits[0]
    return moving_nodes(fleet, fleet.groups[group])[0] if limit is None else limit


def per_pool(fleet: Fleet) -> bool:
    """The stack can take a pair per policy: each pool its own NVIDIADriver's (``nodePools[].upgradePolicy``)."""
    return fleet.per_pool_policies and all(len(g.pools) == 1 for g in fleet.groups)


def _applied(policy: Policy, deletion_timeout: int | None) -> Policy:
    return policy if deletion_timeout is None else replace(policy, deletion_timeout=deletion_timeout)


def _confirm_per_policy(fleet: Fleet, seed: int, per_policy: tuple[Recommendation, ...]) -> Recommended:
    """Each policy its own pair, confirmed by a run of the whole fleet; while that run is not safe, the pairs of the
    policies at fault (all, when none is) step down by a quarter, at least one. A policy alone can be safe at a value
    the whole fleet is not (the durations drawn differ), and the pools not at fault keep theirs."""
    pairs: list[tuple[int, int] | None] = [
        None if r.max_parallel is None or r.max_unavailable is None else (r.max_parallel, r.max_unavailable)
        for r in per_policy]
    timeouts = tuple(r.deletion_timeout for r in per_policy)
    while True:
        policies = tuple(g.policy if pair is None else _applied(g.policy.with_parallelism(*pair), timeout)
                         for g, pair, timeout in zip(fleet.groups, pairs, timeouts, strict=True))
        outcome = simulate(fleet.with_policies(policies), seed)
        if not outcome.disruptive:
            return Recommended(per_policy, None, None, outcome, per_pool=True, values=tuple(pairs),
                               timeouts=tuple(t if pair is not None else None
                                              for t, pair in zip(timeouts, pairs, strict=True)))
        fault = _at_fault(fleet, outcome) or {k for k, pair in enumerate(pairs) if pair is not None}
        for k in fault:
            pair = pairs[k]
            if pair is None:
                continue
            parallel = pair[0] - max(1, pair[0] // 4)
            if parallel == 0:
                return Recommended(per_policy, None, None, None, per_pool=True)
            pairs[k] = (parallel, parallel + pair[1] - pair[0])
        if all(pairs[k] is None for k in fault):
            return Recommended(per_policy, None, None, None, per_pool=True)


__all__ = ["DELETION_TIMEOUT_CAP", "UNLIMITED", "Recommendation", "Recommended", "admitted", "admitted_by_pool",
           "beyond_the_pack", "moving_nodes", "pack_limits", "per_pool", "recommend", "recommend_group",
           "rolling_alone"]
