"""The lower bound, the safest fast parallelism, and their promises over random fleets (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simulate.assess import assess
from simulate.bounds import lower_bound
from simulate.engine import simulate
from simulate.fleet import CLUSTER_POLICY, NVIDIA_DRIVER, Fleet, Group, Node, Policy, Pool
from simulate.search import (DELETION_TIMEOUT_CAP, admitted, admitted_by_pool, beyond_the_pack, recommend,
                             recommend_group)
from tests.simulate.fleets import EXACT, fleets, model, one_pool


def test_the_lower_bound_by_hand() -> None:
    # 3 nodes x 1 GPU; the PDB keeps 1 replica, so 2 nodes may be out at once; each is out at least 300 + 100 s:
    # ceil(3 / 2) x 400 = 800. The model alone: 2 evictions, 1 at a time, each back 100 s later: 100 + 400 = 500.
    fleet = one_pool(3, 1, [model("m", 2, 1)], Policy(max_parallel=1, max_unavailable="100%", deletion_timeout=0))
    bound = lower_bound(fleet, simulate(fleet).models)
    assert bound.seconds == pytest.approx(800)
    assert [(p.pool, p.nodes, p.at_once) for p in bound.pools] == [("a", 3, 2)]
    assert [(m.evictions, m.allowance, m.seconds) for m in bound.models] == [(2, 1, 500.0)]
    assessment = assess(fleet)
    assert assessment.ratio == pytest.approx(1230 / 800)


def test_the_lower_bound_counts_gpu_time_where_every_node_of_a_pool_moves() -> None:
    # 4 nodes x 1 GPU; 3 replicas keeping 2: 2 nodes out at once, ceil(4 / 2) x 400 = 800. In GPU-seconds over
    # the span T: 2 GPUs stay under kept replicas, so 2 x T >= 4 nodes x 400 out + 2 kept replacements x 100
    # loading + 3 evicted replicas x 10 terminating, T >= 915.
    fleet = one_pool(4, 1, [model("m", 3, 2)], Policy(max_parallel=2, max_unavailable="100%", deletion_timeout=0))
    out = simulate(fleet)
    bound = lower_bound(fleet, out.models)
    assert [(p.at_once, p.seconds) for p in bound.pools] == [(2, pytest.approx(915))]
    assert bound.seconds == pytest.approx(915)
    assert out.seconds is not None and out.seconds >= 915


def test_the_bound_within_what_the_pack_admits_by_hand() -> None:
    # The fleet of the first test, the pack admitting one node at a time: 3 x 400 = 1200 (GPU-time: 3 GPUs, 1 kept,
    # (3 x 400 + 100 + 2 x 10) / 2 = 660; the model: 500). The spare capacity alone would let 2 out: 800.
    fleet = one_pool(3, 1, [model("m", 2, 1)], Policy(max_parallel=1, max_unavailable="100%", deletion_timeout=0))
    out = simulate(fleet)
    within = lower_bound(fleet, out.models, {"a": 1})
    assert within.seconds == pytest.approx(1200)
    assert [(p.at_once, p.pack_admits, p.held_by_pack) for p in within.pools] == [(1, 1, True)]
    assert within.limited_by == "nodes at once: a 1 (the pack)"
    assert within.as_json()["pools"][0]["packAdmits"] == 1
    assert out.seconds is not None and out.seconds >= within.seconds
    # A limit above what the capacity allows changes nothing, and says so.
    loose = lower_bound(fleet, out.models, {"a": 3})
    assert loose.seconds == pytest.approx(800) and not loose.pools[0].held_by_pack
    assert loose.limited_by.startswith("spare capacity")
    with pytest.raises(ValueError, match="at least 1"):
        lower_bound(fleet, out.models, {"a": 0})


def test_admitted_by_pool_is_each_policy_s_own_per_pool_and_the_least_for_one_policy() -> None:
    fleet = _two_pools()
    assert admitted_by_pool(fleet) == {"a": 6, "b": 2}
    # Each policy is held by the pack to its own pools' limits, even where the stack sends one value to both (a
    # percentage maxUnavailable gives each policy its own slots): the least over the pools of one policy only.
    assert admitted_by_pool(replace(fleet, per_pool_policies=False)) == {"a": 6, "b": 2}
    one = replace(fleet, groups=(Group(CLUSTER_POLICY, "cluster-policy", ("a", "b"), fleet.groups[0].policy),))
    assert admitted_by_pool(one) == {"a": 2, "b": 2}
    # A policy with the controller off rolls nothing, so it limits nothing; nor one the pack does not see.
    off = fleet.with_policy(1, replace(fleet.groups[1].policy, auto_upgrade=False))
    assert admitted_by_pool(off) == {"a": 6}
    assert admitted_by_pool(replace(one, groups=(replace(one.groups[0], judged_by_pack=False),))) == {}
    # No spare node at all on b: the pack leaves it to spare-capacity, no parallelism limit from this rule.
    full = replace(fleet, models=(fleet.models[0], model("mb", 6, 5, pools=("b",))))
    assert admitted_by_pool(full) == {"a": 6}


def test_beyond_the_pack_judges_each_pool_by_its_own_limit() -> None:
    # One ClusterPolicy over both pools, 4 at once: pool a (the pack admits 6) takes 4, within; pool b (admits 2)
    # takes 4, beyond. Held to the least limit, pool a would be wrongly named too.
    two = _two_pools()
    policy = Policy(max_parallel=4, max_unavailable="100%", deletion_timeout=900)
    fleet = replace(two, groups=(Group(CLUSTER_POLICY, "cluster-policy", ("a", "b"), policy),), per_pool_policies=False)
    assert beyond_the_pack(fleet) == [
        "ClusterPolicy cluster-policy may take 4 node(s) of b at once; the policy pack admits 2 "
        "(parallelism-within-spare-capacity: 2 node(s) of b at once in its worst case)"]
    assert beyond_the_pack(fleet.with_policy(0, policy.with_parallelism(2, "100%"))) == []
    assert beyond_the_pack(fleet.with_policy(0, replace(policy, auto_upgrade=False))) == []  # rolls nothing
    # An external ClusterPolicy is not this stack's to send: the pack sees nothing to refuse.
    assert beyond_the_pack(replace(fleet, groups=(replace(fleet.groups[0], judged_by_pack=False),))) == []


def test_beyond_the_pack_judges_a_canary_pool_s_policy_by_its_setting() -> None:
    # canary-one-node-at-a-time: exactly 1, whatever maxUnavailable allows and whether the controller rolls or not.
    two = _two_pools()
    canary = replace(two, pools=(replace(two.pools[0], one_at_a_time=True), two.pools[1]))
    at = [canary.with_policy(0, replace(canary.groups[0].policy, max_parallel=value, auto_upgrade=rolls))
          for value, rolls in ((0, True), (2, True), (3, False), (1, True))]
    assert [beyond_the_pack(f) for f in at] == [
        ["NVIDIADriver gpu-a sets maxParallelUpgrades 0 (unlimited); the policy pack admits only 1 "
         "(canary-one-node-at-a-time: a is a canary's pool)"],
        ["NVIDIADriver gpu-a sets maxParallelUpgrades 2; the policy pack admits only 1 "
         "(canary-one-node-at-a-time: a is a canary's pool)"],
        ["NVIDIADriver gpu-a sets maxParallelUpgrades 3; the policy pack admits only 1 "
         "(canary-one-node-at-a-time: a is a canary's pool)"],
        []]
    assert admitted_by_pool(canary) == {"a": 1, "b": 2}


def test_the_search_finds_the_largest_parallelism_that_stops_nothing() -> None:
    # 6 nodes x 1 GPU, 4 replicas keeping 3, 2 nodes spare; pod deletion gives up after 300 s, a replacement
    # loads in 100 s. Every node at once: the PDB refuses too long. One at a time is safe.
    fleet = one_pool(6, 1, [model("m", 4, 3)], Policy(max_parallel=1, max_unavailable="100%", deletion_timeout=300))
    found = recommend_group(fleet, 0, seed=0)
    assert found.max_parallel is not None and 1 <= found.max_parallel < 6
    assert found.max_unavailable == found.max_parallel  # no node was down before
    unsafe = fleet.with_policy(0, Policy(max_parallel=found.max_parallel + 1, max_unavailable="100%",
                                         deletion_timeout=300))
    assert simulate(unsafe).disruptive  # one more is not safe (the search's own claim)
    safe = fleet.with_policy(0, Policy(max_parallel=found.max_parallel, max_unavailable=found.max_unavailable,
                                       deletion_timeout=300))
    assert not simulate(safe).disruptive


def test_no_parallelism_helps_a_pdb_that_keeps_every_replica() -> None:
    fleet = one_pool(3, 1, [model("m", 2, 2)], Policy(max_parallel=1, max_unavailable="100%", deletion_timeout=300))
    recommended = recommend(fleet, seed=0)
    assert recommended.max_parallel is None and recommended.outcome is None
    assert "even one node at a time" in recommended.per_policy[0].reason


def _checked(fleet: Fleet, parallel: int, unavailable: int) -> Fleet:
    return fleet.with_policies(tuple(g.policy.with_parallelism(parallel, unavailable) for g in fleet.groups))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets())
def test_a_recommended_parallelism_never_drops_a_model_below_its_minimum(fleet: Fleet) -> None:
    recommended = recommend(fleet, seed=3)
    if recommended.max_parallel is None or recommended.max_unavailable is None:
        return
    # Simulated again from scratch, under exactly the pair the stack change would set.
    out = simulate(_checked(fleet, recommended.max_parallel, recommended.max_unavailable), seed=3)
    assert not out.below_minimum
    assert not out.disruptive


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets())
def test_the_predicted_duration_never_beats_the_lower_bound(fleet: Fleet) -> None:
    for seed in (0, 1):
        out = simulate(fleet, seed=seed)
        bound = lower_bound(fleet, out.models)
        if out.seconds is not None:
            assert out.seconds >= bound.seconds - 1e-6, (out.seconds, bound)


# ---------------------------------------------------------------- per pool (nodePools[].upgradePolicy, issue 39)


def _per_pool(fleet: Fleet) -> Fleet:
    """``fleet`` whose stack gives each pool its own policy, the pack counting the validation job where it runs."""
    pools = tuple(replace(p, judged_validation_gpus=p.gpus_per_node if p.validation_job else 0) for p in fleet.pools)
    return replace(fleet, pools=pools, per_pool_policies=True)


def _two_pools() -> Fleet:
    # Pool a: 8 one-GPU nodes, 2 replicas keeping 1 (6 GPUs spare): the pack admits 6 at once. Pool b: 6 one-GPU
    # nodes, 4 replicas keeping 3 (2 spare): 2 at once. Replacements load in 100 s, deletion waits 900 s.
    policy = Policy(max_parallel=1, max_unavailable=1, deletion_timeout=900)
    pools = (Pool("a", 0, 1), Pool("b", 1, 1))
    nodes = tuple(Node(f"{p}-{i}", p, 1) for p, count in (("a", 8), ("b", 6)) for i in range(count))
    models = (model("ma", 2, 1, pools=("a",)), model("mb", 4, 3, pools=("b",)))
    groups = tuple(Group(NVIDIA_DRIVER, f"gpu-{p.name}", (p.name,), policy) for p in pools)
    return Fleet(pools, nodes, models, groups, EXACT, place_replicas=True, per_pool_policies=True)


def test_per_pool_each_policy_gets_its_own_value_and_the_one_policy_the_least() -> None:
    fleet = _two_pools()
    assert [admitted(fleet, g)[0] for g in (0, 1)] == [6, 2]
    found = recommend(fleet, seed=0)
    assert found.per_pool and found.outcome is not None and not found.outcome.disruptive
    assert found.values == ((6, 6), (2, 2))
    one = recommend(replace(fleet, per_pool_policies=False), seed=0)
    assert not one.per_pool and (one.max_parallel, one.max_unavailable) == (2, 2)
    assert one.outcome is not None and found.outcome.seconds is not None and one.outcome.seconds is not None
    assert found.outcome.seconds < one.outcome.seconds


def test_a_canary_pool_is_admitted_one_node_at_a_time_whatever_its_spare() -> None:
    fleet = _two_pools()
    canary = replace(fleet, pools=(replace(fleet.pools[0], one_at_a_time=True), fleet.pools[1]))
    assert admitted(canary, 0) == (1, "canary-one-node-at-a-time: a is a canary's pool")
    found = recommend(canary, seed=0)
    assert found.values[0] == (1, 1)
    assert "the policy pack admits 1" in found.per_policy[0].reason


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets())
def test_a_per_pool_recommendation_is_confirmed_and_never_beyond_what_the_pack_admits(fleet: Fleet) -> None:
    fleet = _per_pool(fleet)
    found = recommend(fleet, seed=3)
    if not found.found:
        return
    assert found.per_pool and len(found.values) == len(fleet.groups)
    for group, pair in enumerate(found.values):
        limit, _ = admitted(fleet, group)
        assert pair is None or limit is None or pair[0] <= limit
    assert all(t is None or t <= DELETION_TIMEOUT_CAP for t in found.timeouts)
    # Simulated again from scratch, under exactly the pairs (and pod-deletion timeouts) the stack change would set.
    policies = tuple(g.policy if pair is None else
                     replace(g.policy.with_parallelism(*pair), deletion_timeout=t or g.policy.deletion_timeout)
                     for g, pair, t in zip(fleet.groups, found.values, found.timeouts, strict=True))
    out = simulate(fleet.with_policies(policies), seed=3)
    assert not out.below_minimum and not out.disruptive


def _slow_drains(deletion_timeout: int) -> Fleet:
    # 12 one-GPU nodes, 6 replicas keeping 4 (the pack admits 6 at once), each back 100 s after its eviction.
    # Five nodes at once: a node waits two loads (200 s) for the PDB, past a 150 s podDeletion.timeoutSeconds.
    policy = Policy(max_parallel=1, max_unavailable=1, deletion_timeout=deletion_timeout)
    return Fleet((Pool("a", 0, 1),), tuple(Node(f"a-{i}", "a", 1) for i in range(12)), (model("m", 6, 4),),
                 (Group(NVIDIA_DRIVER, "gpu-a", ("a",), policy),), EXACT, place_replicas=True, per_pool_policies=True)


def test_per_pool_a_longer_pod_deletion_timeout_comes_with_the_parallelism_it_allows() -> None:
    fleet = _slow_drains(150)
    assert admitted(fleet, 0)[0] == 6
    found = recommend(fleet, seed=0)
    assert found.values == ((6, 6),) and found.timeouts == (420,)  # twice the longest pod deletion, 200 s
    assert "podDeletion.timeoutSeconds 150 stops a node on a PDB" in found.per_policy[0].reason
    assert found.per_policy[0].deletion_timeout == 420 <= DELETION_TIMEOUT_CAP
    # The timeout is what makes it safe: the same parallelism at 150 s stops a node; at 420 s nothing stops.
    six = fleet.groups[0].policy.with_parallelism(6, 6)
    assert simulate(fleet.with_policy(0, six), seed=0).disruptive
    assert not simulate(fleet.with_policy(0, replace(six, deletion_timeout=420)), seed=0).disruptive
    # With one policy for every pool (gpuOperator.upgradePolicy), no timeout is set: its parallelism alone.
    one = recommend(replace(fleet, per_pool_policies=False), seed=0)
    assert one.timeouts == () and one.max_parallel is not None and one.max_parallel < 6


def test_no_longer_timeout_where_pod_deletion_waits_forever_or_drain_follows() -> None:
    for policy in (Policy(max_parallel=1, max_unavailable=1, deletion_timeout=0),
                   Policy(max_parallel=1, max_unavailable=1, deletion_timeout=150, drain_enable=True)):
        found = recommend(_slow_drains(150).with_policy(0, policy), seed=0)
        assert all(t is None for t in found.timeouts) and found.per_policy[0].deletion_timeout is None


@st.composite
def judged_fleets(draw: st.DrawFn) -> Fleet:
    """:func:`fleets` as the pack judges them: one ClusterPolicy over every pool or a policy per pool, canary pools
    (held to one at a time), the validation job's GPUs counted where it runs, and each policy's values drawn anew."""
    fleet = draw(fleets())
    pools = tuple(replace(p, one_at_a_time=draw(st.integers(0, 3)) == 0,
                          judged_validation_gpus=p.gpus_per_node if p.validation_job else 0) for p in fleet.pools)
    groups = fleet.groups
    if len(groups) > 1 and draw(st.booleans()):
        groups = (Group(CLUSTER_POLICY, "cluster-policy", tuple(p.name for p in pools), groups[0].policy),)
    drawn = replace(fleet, pools=pools, groups=groups, per_pool_policies=len(groups) == len(pools))
    return drawn.with_policies(tuple(
        g.policy.with_parallelism(draw(st.sampled_from([1, 2, 3, 4, 6, 0])),
                                  draw(st.sampled_from(["100%", 1, 2, 3, "25%", "50%"])))
        for g in drawn.groups))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(fleet=judged_fleets())
def test_no_run_the_pack_admits_beats_the_bound_within_it_nor_that_bound_the_lower_bound(fleet: Fleet) -> None:
    # The policies are drawn freely and kept only where the pack admits them (beyond_the_pack, which the plan's
    # own pack checks in tests/rollout/test_simulate.py); the bound is taken from the pack's limits alone.
    assume(not beyond_the_pack(fleet))
    admits = admitted_by_pool(fleet)
    if admits is None:
        return
    out = simulate(fleet, seed=1)
    within = lower_bound(fleet, out.models, admits)
    assert within.seconds >= lower_bound(fleet, out.models).seconds - 1e-6
    if out.seconds is not None:
        assert out.seconds >= within.seconds - 1e-6, (out.seconds, within)
