"""Two stacks on one cluster never own the same object."""

from __future__ import annotations

import pytest

from fleetspec.load import spec_from_config
from renderers.ownership import owned_objects, shared_objects
from tests.conftest import edited, stack_config


@pytest.mark.parametrize(("canary", "prod"), [("canary", "prod"), ("eks-canary", "eks-prod")])
def test_example_canary_and_prod_stacks_own_disjoint_objects(canary: str, prod: str) -> None:
    canary_spec, prod_spec = spec_from_config(stack_config(canary)), spec_from_config(stack_config(prod))
    assert canary_spec.cluster.name == prod_spec.cluster.name  # one cluster: the check matters
    assert shared_objects(canary_spec, prod_spec) == []


def test_what_a_stack_owns() -> None:
    owned = owned_objects(spec_from_config(stack_config("prod")))
    assert "ClusterPolicy cluster-policy" in owned
    assert {"NVIDIADriver gpu-gput4", "node pool gpuh100", "PodDisruptionBudget inference/llm-chat-pdb"} <= owned
    eks = owned_objects(spec_from_config(stack_config("eks-prod")))
    assert {"node pool gpu-l40s-g1", "node pool gpu-l40s-g2"} <= eks and "node pool gpu-a10g-g3" not in eks


def test_a_canary_that_also_patches_the_cluster_policy_shares_it() -> None:
    canary = spec_from_config(edited("canary", "gpuOperator", lambda o: o.update(clusterPolicy="patch")))
    prod = spec_from_config(stack_config("prod"))
    assert shared_objects(canary, prod) == ["ClusterPolicy cluster-policy"]


def test_stacks_on_different_clusters_share_nothing() -> None:
    canary = spec_from_config(edited("canary", "gpuOperator", lambda o: o.update(clusterPolicy="patch")))
    other = spec_from_config(edited("prod", "cluster", lambda c: c.update(name="inference-weu-2")))
    assert shared_objects(canary, other) == []
