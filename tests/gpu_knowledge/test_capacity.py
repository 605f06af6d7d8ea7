"""Capacity arithmetic: int-or-percent rounding, the operator's upgrade slots, spare GPUs, disruption."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_knowledge.capacity import (
    NodeGpus,
    PoolShape,
    Workload,
    max_unavailable_nodes,
    min_available_replicas,
    node_group_surges,
    node_group_unavailable,
    pdb_disruptions_allowed,
    scaled_value,
    spare_capacity,
    spare_gpus,
    spare_nodes,
    take_nodes_out,
    upgrade_slots,
)


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        ("25%", 6, True, 2),
        ("25%", 6, False, 1),
        ("25%", 4, True, 1),
        ("100%", 7, True, 7),
        ("0%", 7, True, 0),
        (3, 7, True, 3),
        ("1%", 1, True, 1),
    ],
)
def test_scaled_value(value, total, round_up, expected):
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize("bad", [True, -1, "25", "x%", 2.5, None])
def test_scaled_value_rejects_non_int_or_percent(bad):
    with pytest.raises(ValueError, match="integer|percentage"):
        scaled_value(bad, 4, round_up=True)


def test_max_unavailable_rounds_up_like_the_operator():
    assert max_unavailable_nodes("25%", 8) == 2
    assert max_unavailable_nodes("25%", 9) == 3
    assert max_unavailable_nodes(1, 9) == 1


def test_min_available_rounds_up_like_kubernetes():
    assert min_available_replicas("50%", 3) == 2
    assert min_available_replicas("50%", 4) == 2
    assert min_available_replicas(2, 3) == 2


@pytest.mark.parametrize(
    ("min_available", "max_unavailable", "replicas", "allowed"),
    [
        (2, None, 3, 1),
        ("50%", None, 3, 1),  # minAvailable 50% of 3 rounds up to 2
        ("50%", None, 4, 2),
        (3, None, 3, 0),
        (4, None, 3, 0),  # more than the replicas: nothing may go
        (None, 1, 3, 1),
        (None, "25%", 3, 1),  # maxUnavailable 25% of 3 rounds UP to 1
        (None, "50%", 3, 2),  # 1.5 rounds up to 2
        (None, "0%", 3, 0),
        (None, 5, 3, 3),  # never more than the replicas
        (None, None, 3, 3),  # no budget: every pod may go
    ],
)
def test_pdb_disruptions_allowed_like_the_disruption_controller(min_available, max_unavailable, replicas, allowed):
    assert pdb_disruptions_allowed(min_available, max_unavailable, replicas) == allowed


def test_pdb_disruptions_allowed_counts_healthy_pods_and_rejects_bad_budgets():
    assert pdb_disruptions_allowed(2, None, 3, healthy=2) == 0
    assert pdb_disruptions_allowed(None, 1, 4, healthy=3) == 0
    with pytest.raises(ValueError, match="not both"):
        pdb_disruptions_allowed(1, 1, 3)
    with pytest.raises(ValueError, match="percentage"):
        pdb_disruptions_allowed("most", None, 3)


def test_workload_allowance_follows_its_pdb():
    assert Workload("w", 3, 1, "50%").disruption_allowed == 1
    assert Workload("w", 4, 1, None, "50%").disruption_allowed == 2
    assert Workload("w", 4, 1, None, "50%").min_replicas == 2


@pytest.mark.parametrize(
    ("parallel", "unavailable", "total", "expected"),
    [
        (1, "25%", 8, 1),
        (2, "25%", 8, 2),
        (4, "25%", 8, 2),  # maxUnavailable caps parallelism
        (0, "25%", 8, 2),  # 0 = unlimited, still capped by maxUnavailable
        (0, "100%", 8, 8),
        (1, "100%", 4, 1),  # docs example: one node at a time
        (3, 1, 5, 1),
    ],
)
def test_upgrade_slots_at_plan_time(parallel, unavailable, total, expected):
    assert upgrade_slots(parallel, unavailable, total) == expected


def test_upgrade_slots_counts_nodes_already_unavailable_and_in_progress():
    # Two nodes cordoned for other reasons already use up maxUnavailable=2: nothing starts.
    assert upgrade_slots(2, 2, 8, unavailable=2) == 0
    assert upgrade_slots(2, 3, 8, unavailable=2) == 1
    assert upgrade_slots(2, "100%", 8, in_progress=1) == 1
    # Only nodes that wait for an upgrade can take a slot.
    assert upgrade_slots(0, "100%", 8, upgrade_required=3) == 3


def test_upgrade_slots_rejects_negative_parallelism():
    with pytest.raises(ValueError, match="maxParallelUpgrades"):
        upgrade_slots(-1, 1, 4)


@given(
    parallel=st.integers(0, 20),
    unavailable=st.one_of(st.integers(0, 30), st.integers(0, 100).map(lambda p: f"{p}%")),
    total=st.integers(0, 40),
)
def test_upgrade_slots_never_exceed_limits(parallel, unavailable, total):
    slots = upgrade_slots(parallel, unavailable, total)
    assert 0 <= slots <= total
    assert slots <= max_unavailable_nodes(unavailable, total)
    if parallel:
        assert slots <= parallel


A100 = PoolShape("gpua100", nodes=8, gpus_per_node=1)
EMBED = Workload("embed-triton", replicas=4, gpus_per_replica=1, min_available=3)
CODE = Workload("code-tgi", replicas=3, gpus_per_replica=1, min_available="50%")


def test_spare_gpus_and_nodes_of_a_pool():
    assert spare_gpus(A100, [EMBED, CODE]) == 1
    assert spare_nodes(A100, [EMBED, CODE]) == 1
    h100 = PoolShape("gpuh100", nodes=2, gpus_per_node=8)
    chat = Workload("llm-chat", replicas=2, gpus_per_replica=8, min_available=1)
    assert spare_gpus(h100, [chat]) == 0
    assert spare_nodes(h100, [chat]) == 0
    assert spare_gpus(h100, [chat, chat]) == -16
    assert spare_nodes(h100, [chat, chat]) == 0


def test_one_node_out_is_covered_by_one_spare_gpu():
    outcome = take_nodes_out(A100, [EMBED, CODE], 1)
    assert (outcome.nodes_out, outcome.gpus_out, outcome.spare_gpus) == (1, 1, 1)
    assert outcome.covered and outcome.safe and outcome.below_min == ()


def test_two_nodes_out_exceed_spare_and_may_break_min_available():
    outcome = take_nodes_out(A100, [EMBED, CODE], 2)
    assert not outcome.covered
    # embed-triton may lose 2 replicas but its PDB allows 1; code-tgi allows 1 of 3 too.
    assert outcome.below_min == ("embed-triton", "code-tgi")
    assert not outcome.safe


def test_uncovered_loss_within_pdb_allowance_keeps_min_available():
    # 16 GPUs, 14 requested: 2 spare, one node (4 GPUs) out is not covered ...
    pool = PoolShape("gput4", nodes=4, gpus_per_node=4)
    rerank = Workload("rerank-sglang", replicas=10, gpus_per_replica=1, min_available=6)
    batch = Workload("batch", replicas=1, gpus_per_replica=4, min_available=1)
    outcome = take_nodes_out(pool, [rerank, batch], 1)
    assert outcome.spare_gpus == 2 and not outcome.covered
    # ... rerank may lose 4 of 10 (its PDB allows 4), the single batch replica may be lost (allows 0).
    assert outcome.below_min == ("batch",)


def test_replica_larger_than_a_node_is_always_below_min():
    pool = PoolShape("small", nodes=4, gpus_per_node=4)
    huge = Workload("huge", replicas=2, gpus_per_replica=8, min_available=1)
    assert take_nodes_out(pool, [huge], 0).below_min == ("huge",)


def test_take_nodes_out_rejects_more_nodes_than_the_pool_has():
    with pytest.raises(ValueError, match="nodes_out"):
        take_nodes_out(A100, [EMBED], 9)


def test_spare_capacity_from_live_nodes():
    measured = spare_capacity(
        [NodeGpus("n1", 8, 8), NodeGpus("n2", 8, 0), NodeGpus("n3", 4, 2)],
    )
    assert (measured.allocatable, measured.requested, measured.spare, measured.largest_node) == (20, 10, 10, 8)
    assert measured.covers_one_node and measured.spare_nodes == 1
    full = spare_capacity([NodeGpus("n1", 8, 8), NodeGpus("n2", 8, 4)])
    assert full.spare == 4 and not full.covers_one_node and full.spare_nodes == 0
    empty = spare_capacity([])
    assert not empty.covers_one_node and empty.spare_nodes == 0
    assert NodeGpus("n", 4, 6).free == 0


# ---------------------------------------------------------------- EKS managed node group updates


@pytest.mark.parametrize(
    ("max_unavailable", "percentage", "desired", "expected"),
    [
        (2, None, 3, 2),
        (5, None, 3, 3),  # never more than the group has
        (None, 50, 3, 2),  # 1.5 rounds up
        (None, 33, 3, 1),
        (None, 1, 10, 1),
        (None, 100, 4, 4),
        (None, None, 3, 1),  # the EKS default
        (1, None, 0, 0),
    ],
)
def test_node_group_unavailable(max_unavailable, percentage, desired, expected):
    assert node_group_unavailable(max_unavailable, percentage, desired) == expected


@pytest.mark.parametrize(
    ("max_unavailable", "percentage", "message"),
    [
        (0, None, "maxUnavailable must be an integer from 1 to 100"),
        (101, None, "maxUnavailable must be an integer from 1 to 100"),
        ("2", None, "maxUnavailable must be an integer"),
        (True, None, "maxUnavailable must be an integer"),
        (None, 0, "maxUnavailablePercentage must be an integer from 1 to 100"),
        (None, "25%", "maxUnavailablePercentage must be an integer"),
        (1, 25, "not both"),
    ],
)
def test_node_group_unavailable_rejects_what_eks_refuses(max_unavailable, percentage, message):
    with pytest.raises(ValueError, match=message):
        node_group_unavailable(max_unavailable, percentage, 4)


@pytest.mark.parametrize(
    ("strategy", "capacity_type", "surges"),
    [
        ("DEFAULT", "ON_DEMAND", True),
        ("DEFAULT", "SPOT", True),
        (None, None, True),  # EKS defaults: DEFAULT on ON_DEMAND
        ("MINIMAL", "ON_DEMAND", False),
        ("MINIMAL", "SPOT", False),
        ("DEFAULT", "CAPACITY_BLOCK", False),
        ("MINIMAL", "CAPACITY_BLOCK", False),
    ],
)
def test_node_group_surges_only_with_default_strategy_on_elastic_capacity(strategy, capacity_type, surges):
    assert node_group_surges(strategy, capacity_type) is surges


@pytest.mark.parametrize(("strategy", "capacity_type"), [("FAST", "ON_DEMAND"), ("DEFAULT", "RESERVED"), (1, None)])
def test_node_group_surges_rejects_unknown_values(strategy, capacity_type):
    with pytest.raises(ValueError, match="must be one of"):
        node_group_surges(strategy, capacity_type)


def test_node_group_without_surge_uses_the_same_disruption_arithmetic():
    # eks-prod's H100 Capacity Block: 3 nodes of 8, llm-chat 2 x 8 with minAvailable 1.
    pool = PoolShape("gpu-h100", 3, 8)
    chat = [Workload("llm-chat", 2, 8, 1)]
    assert take_nodes_out(pool, chat, node_group_unavailable(1, None, 3)).safe
    two = take_nodes_out(pool, chat, node_group_unavailable(2, None, 3))
    assert (two.gpus_out, two.spare_gpus, two.below_min) == (16, 8, ("llm-chat",))


@pytest.mark.parametrize("value", ["101%", "150%", "-5%", " 25%", "25 %", "025%"])
def test_capacity_reads_int_or_percent_with_the_specs_one_grammar(value: str) -> None:
    # One grammar: what the spec refuses (maxUnavailable, minAvailable, maxSurge), the arithmetic refuses too.
    from fleetspec.base import int_or_percent

    with pytest.raises(ValueError, match="percentage"):
        int_or_percent(value, "maxUnavailable")
    with pytest.raises(ValueError, match="0% to 100%"):
        scaled_value(value, 10, round_up=True)
