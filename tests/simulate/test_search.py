"""The lower bound, the safest fast parallelism, and their promises over random fleets (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from simulate.assess import assess
from simulate.bounds import lower_bound
from simulate.engine import simulate
from simulate.fleet import Fleet, Policy
from simulate.search import recommend, recommend_group
from tests.simulate.fleets import fleets, model, one_pool


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
