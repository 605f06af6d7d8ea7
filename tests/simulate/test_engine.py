"""The simulated upgrade controller against durations computed by hand, and the runbook's warnings reproduced."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from fleetspec.load import load_stack_file
from gpu_knowledge import capacity
from simulate import outcome as why
from simulate import search
from simulate.engine import simulate
from simulate.fleet import Fleet, Model, Policy, fleet_from_spec
from simulate.search import recommend
from fleetspec.simulation import Simulation, VALIDATION_TIMEOUT_SECONDS
from tests.conftest import PROJECT_DIR
from tests.simulate.fleets import EXACT, fleets, model, one_pool

ONE_AT_A_TIME = Policy(max_parallel=1, max_unavailable="100%", deletion_timeout=0)
UNLIMITED = Policy(max_parallel=0, max_unavailable="100%", deletion_timeout=0)


def test_one_node_at_a_time_takes_the_sum_of_each_nodes_steps() -> None:
    # 3 nodes x 1 GPU, a model of 2 replicas keeping 1: its replicas on a-0 and a-1, a-2 spare. Each node: 10 s
    # until its evicted pod is gone, 300 s driver, 100 s validator = 410 s; the replacement is Ready 100 s after
    # its eviction, well before the next node asks, so nothing waits: 3 x 410 s.
    out = simulate(one_pool(3, 1, [model("m", 2, 1)], ONE_AT_A_TIME))
    assert out.seconds == pytest.approx(3 * 410)
    assert [(p.name, p.start, p.end) for p in out.pools] == [("a", 0.0, 1230.0)]
    assert out.models[0].lowest == 1 and out.models[0].seconds_below == 0
    assert out.stalls == () and out.ok
    assert out.peak_unavailable_nodes == 1 and out.peak_unavailable_gpus == 1


def test_every_node_at_once_waits_on_the_pdb_for_the_replacement() -> None:
    # All three cordoned at t=0. a-0 gives up its replica (the PDB allows 1), whose replacement finds no schedulable
    # node; a-1's eviction is refused; a-2 (empty) is done at 400 and takes the replacement, Ready at 500; then a-1's
    # eviction goes: gone at 510, done at 510 + 400 = 910.
    out = simulate(one_pool(3, 1, [model("m", 2, 1)], UNLIMITED))
    assert out.seconds == pytest.approx(910)
    (stall,) = out.stalls
    assert (stall.node, stall.state, stall.cause, stall.pdb) == ("a-1", "pod-deletion-required", why.PDB, "ns/m-pdb")
    assert (stall.since, stall.until) == (0.0, 500.0)
    assert out.peak_unavailable_nodes == 3 and out.models[0].lowest == 1


def test_a_pod_deletion_timeout_shorter_than_the_wait_fails_the_node() -> None:
    out = simulate(one_pool(3, 1, [model("m", 2, 1)], Policy(max_parallel=0, max_unavailable="100%",
                                                               deletion_timeout=300)))
    assert out.failed == ("a-1",) and out.seconds is None and not out.ok and out.disruptive
    failed = [s for s in out.stalls if s.permanent]
    assert [(s.node, s.cause, s.pdb, s.since) for s in failed] == [("a-1", why.PDB, "ns/m-pdb", 300.0)]


def test_a_pdb_keeping_every_replica_stalls_on_the_first_node() -> None:
    """Runbook: a PDB with minAvailable = replicas blocks every drain; the first node never gets past pod deletion."""
    out = simulate(one_pool(3, 1, [model("m", 2, 2)], ONE_AT_A_TIME))
    first = out.stalls[0]
    assert (first.node, first.state, first.cause, first.pdb, first.until) == (
        "a-0", "pod-deletion-required", why.PDB, "ns/m-pdb", None)
    assert "allows 0 disruptions" in first.detail
    assert out.seconds is None and out.failed == () and not out.ok
    # The node holds the only slot: nobody else moves.
    assert {s.cause for s in out.stalls[1:]} == {why.NO_SLOT}


def test_a_single_replica_model_without_a_pdb_goes_to_zero() -> None:
    """Runbook: one replica and no PDB: gone the moment its node drains, until its replacement has loaded."""
    out = simulate(one_pool(2, 1, [model("m", 1, 1, pdb=False, load=600)], ONE_AT_A_TIME, placed_on=("a-0",)))
    (result,) = out.models
    assert result.lowest == 0 and result.below_minimum
    # Evicted from a-0 at 0, its replacement loads on a-1; a-1's turn comes at 410, before it is Ready, so it goes
    # again and loads on a-0 until 410 + 600: a thousand seconds without the model.
    assert result.seconds_below == pytest.approx(1010)
    assert not out.ok and out.disruptive


def test_unlimited_parallelism_without_spare_capacity_stops_every_node_a_pdb_holds() -> None:
    """Runbook: maxParallelUpgrades 0 with no spare capacity. The PDBs hold each model at its minimum, so the
    replicas they refuse to let go keep their nodes in pod deletion until the timeout fails them; a model no PDB
    protects drops below its minimum."""
    fleet = one_pool(4, 2, [model("chat", 4, 3, gpus=2), model("batch", 4, 4, gpus=1, pdb=False)],
                     Policy(max_parallel=0, max_unavailable="100%", deletion_timeout=300))
    out = simulate(fleet)
    chat, batch = out.models
    assert chat.lowest == 3 and not chat.below_minimum  # its PDB kept three
    assert batch.lowest < 4 and batch.below_minimum
    assert out.failed and all(s.cause == why.PDB and s.pdb == "ns/chat-pdb" for s in out.stalls if s.permanent
                              and s.state == "pod-deletion-required")
    assert out.peak_unavailable_nodes == 4 and not out.ok


def test_the_validator_past_600_seconds_fails_the_node() -> None:
    slow = Simulation(driverInstallSeconds=300, validatorSeconds=VALIDATION_TIMEOUT_SECONDS + 1, jitter=0.0)
    out = simulate(one_pool(1, 1, [], ONE_AT_A_TIME, slow))
    (stall,) = out.stalls
    assert (stall.state, stall.cause, stall.since) == ("validation-required", why.VALIDATION, 300.0 + 600.0)


def test_the_validation_job_takes_the_upgraded_node_before_the_next_replacement() -> None:
    # 2 nodes x 1 GPU, one replica on a-0 (a PDB allowing it to go). a-0 is done at 410 while the replacement runs
    # on a-1; the validation job takes a-0 until 1010. a-1's replica then has nowhere to go: pending until a-1
    # itself is done at 820, where it lands (Ready at 920), so the job on a-1 finds its GPU taken.
    durations = Simulation(driverInstallSeconds=300, validatorSeconds=100, podTerminationSeconds=10,
                           cachedLoadSeconds=100, validationJobSeconds=600, jitter=0.0)
    out = simulate(one_pool(2, 1, [model("m", 1, 0)], ONE_AT_A_TIME, durations, validation_job=True,
                            placed_on=("a-0",)))
    assert out.seconds == pytest.approx(820)
    assert out.models[0].lowest == 0
    assert out.validation_job_waits == 1
    assert out.last_event == pytest.approx(1010)  # the job on a-0 ends last


def test_autoupgrade_off_rolls_nothing() -> None:
    out = simulate(one_pool(2, 1, [], Policy(auto_upgrade=False)))
    assert {s.cause for s in out.stalls} == {why.AUTO_UPGRADE_OFF} and out.seconds is None


def test_the_spread_comes_only_from_the_seed() -> None:
    fleet = one_pool(4, 1, [model("m", 2, 1)], ONE_AT_A_TIME, Simulation(jitter=0.3))
    assert simulate(fleet, seed=7) == simulate(fleet, seed=7)
    assert simulate(fleet, seed=7).seconds != simulate(fleet, seed=8).seconds


def test_nodes_already_on_the_target_need_nothing() -> None:
    from dataclasses import replace

    fleet = one_pool(2, 1, [], ONE_AT_A_TIME)
    fleet = replace(fleet, nodes=(replace(fleet.nodes[0], needs_upgrade=False), fleet.nodes[1]))
    assert simulate(fleet).seconds == pytest.approx(400)


def test_a_skip_label_holds_its_node_for_good() -> None:
    from dataclasses import replace

    fleet = one_pool(2, 1, [], ONE_AT_A_TIME)
    fleet = replace(fleet, nodes=(replace(fleet.nodes[0], skip=True), fleet.nodes[1]))
    out = simulate(fleet)
    assert [(s.node, s.cause, s.permanent) for s in out.stalls] == [("a-0", why.SKIP, True)]
    assert out.pools[0].end is None and not out.ok


def test_waves_run_one_after_the_other_with_the_gap() -> None:
    from dataclasses import replace

    from simulate.fleet import Group, Node, Pool

    base = one_pool(1, 1, [], ONE_AT_A_TIME, EXACT.model_copy(update={"waveGapSeconds": 50}))
    fleet = replace(base, pools=(*base.pools, Pool("b", 1, 1)), nodes=(*base.nodes, Node("b-0", "b", 1)),
                    groups=(Group("ClusterPolicy", "cluster-policy", ("a", "b"), ONE_AT_A_TIME),))
    out = simulate(fleet)
    assert [(w.start, w.end) for w in out.waves] == [(0.0, 400.0), (450.0, 850.0)]
    assert out.seconds == pytest.approx(850)


# ---------------------------------------------------------------- one placement for a search's runs (issue 39)


def _fresh(fleet: Fleet) -> Fleet:
    """``fleet`` in new tuples: no run of it has been placed yet."""
    return replace(fleet, nodes=tuple(list(fleet.nodes)), pools=tuple(list(fleet.pools)),
                   models=tuple(list(fleet.models)), pods=tuple(list(fleet.pods)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets())
def test_a_fleet_under_other_policies_starts_from_the_same_placement_as_a_fresh_one(fleet: Fleet) -> None:
    # The search's runs share the placement of the first (the nodes, models and seed are the same); a run between
    # them (every node at once, the most evictions) must leave nothing behind for the next.
    every = fleet.with_policies(tuple(g.policy.with_parallelism(0, "100%") for g in fleet.groups))
    for run in (fleet, every, fleet, every):
        assert simulate(run, seed=1) == simulate(_fresh(run), seed=1)
        assert simulate(run, seed=1, stop_after=1) == simulate(_fresh(run), seed=1, stop_after=1)


def test_the_prod_example_s_recommendation_is_that_of_runs_each_placed_afresh(monkeypatch) -> None:
    fleet = fleet_from_spec(load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml"))
    shared = recommend(fleet, seed=0)
    monkeypatch.setattr(search, "simulate", lambda f, seed=0, **kw: simulate(_fresh(f), seed, **kw))
    assert recommend(fleet, seed=0) == shared


@pytest.mark.parametrize("budget", [(2, None), ("50%", None), ("34%", None), (None, 1), (None, "25%"), (None, None),
                                    (7, None), (None, 0)])
def test_a_model_s_disruptions_allowed_are_the_disruption_controller_s(budget) -> None:
    m = Model("ns/m", 6, 1, 0, ("a",), 100, budget)
    for ready in range(0, 8):
        assert m.disruptions_allowed(ready) == capacity.pdb_disruptions_allowed(*budget, 6, healthy=ready)
    assert m.kept == 6 - capacity.pdb_disruptions_allowed(*budget, 6)
