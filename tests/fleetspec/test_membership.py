"""Pool membership: the project's label, else the cloud's pool label, else the declared nodeSelector."""

from __future__ import annotations

from gpu_knowledge import labels
from fleetspec.load import spec_from_config
from fleetspec.membership import Via, describe_selectors, node_membership, pool_node_selectors
from tests.conftest import stack_config

AKS_PROD = spec_from_config(stack_config("prod"))
EKS_PROD = spec_from_config(stack_config("eks-prod"))
EXISTING_PROD = spec_from_config(stack_config("existing-prod"))


def test_project_label_wins_and_names_the_generation() -> None:
    found = node_membership(EKS_PROD, {labels.POOL: "gpu-l40s", labels.GENERATION: "2", labels.EKS_NODE_GROUP: "x"})
    assert found is not None
    assert (found.pool.name, found.generation.id if found.generation else None, found.via) == ("gpu-l40s", 2, Via.PROJECT_LABEL)
    assert found.labelled


def test_another_stacks_pool_label_is_never_this_stacks_node() -> None:
    # The canary pool's node also carries the cloud label of a name this stack knows: the project label decides.
    assert node_membership(AKS_PROD, {labels.POOL: "gpucanary", labels.AKS_AGENT_POOL: "gput4"}) is None


def test_aks_nodes_before_the_first_up_are_found_by_their_agent_pool() -> None:
    found = node_membership(AKS_PROD, {labels.AKS_AGENT_POOL: "gpua100"})
    assert found is not None and (found.pool.name, found.via, found.labelled) == ("gpua100", Via.CLOUD_LABEL, False)


def test_eks_nodes_are_found_by_node_group_and_generation() -> None:
    found = node_membership(EKS_PROD, {labels.EKS_NODE_GROUP: "gpu-l40s-g1"})
    assert found is not None and found.pool.name == "gpu-l40s" and found.generation is not None
    assert found.generation.id == 1


def test_a_cloud_pool_of_no_stack_pool_is_not_a_member() -> None:
    assert node_membership(AKS_PROD, {labels.AKS_AGENT_POOL: "system"}) is None
    assert node_membership(AKS_PROD, {}) is None


def test_existing_cluster_nodes_are_found_by_the_declared_selector() -> None:
    found = node_membership(EXISTING_PROD, {"gpu.example.com/pool": "h100-serving", "other": "x"})
    assert found is not None and (found.pool.name, found.via) == ("h100-serving", Via.NODE_SELECTOR)
    assert node_membership(EXISTING_PROD, {"gpu.example.com/pool": "elsewhere"}) is None


def test_selectors_list_every_way_a_pool_is_found() -> None:
    pool = EKS_PROD.pool("gpu-l40s")
    assert pool_node_selectors(EKS_PROD, pool) == [
        {labels.POOL: "gpu-l40s"},
        {labels.EKS_NODE_GROUP: "gpu-l40s-g1"},
        {labels.EKS_NODE_GROUP: "gpu-l40s-g2"},
    ]
    existing = EXISTING_PROD.pool("l40s-serving")
    assert describe_selectors(pool_node_selectors(EXISTING_PROD, existing)) == (
        "gpu-driver-upgrade.io/pool=l40s-serving or gpu.example.com/pool=l40s-serving"
    )
