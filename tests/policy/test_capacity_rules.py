"""policy.capacity_rules called directly: the canary one node at a time, prod parallelism within spare
capacity, spare capacity and surge, on rendered and hand-edited resources."""

from __future__ import annotations

import copy

import pytest

from policy import capacity_rules
from policy.facts import Resource
from preview.run import run_program
from gpu_knowledge import labels
from engine_contracts import resource_facts as rf
from tests.conftest import stack_config
from tests.policy.rules import edit_named, of_type, resources, spec_edit, stack
from tests.policy.variants import change, eks_pool, model, pool


# ---------------------------------------------------------------- canary-one-node-at-a-time


def test_canary_without_a_visible_upgrade_policy_is_advice():
    # Before operator v26.7.0 NVIDIADrivers carry no upgradePolicy: the external ClusterPolicy's applies.
    config = change(stack_config("canary"), "gpuOperator", lambda op: op.update(chartVersion="v26.3.2"))
    items = resources(run_program(config, "canary"))
    assert all("upgradePolicy" not in r.props.get("spec", {}) for r in of_type(items, rf.NVIDIA_DRIVER))
    (finding,) = capacity_rules.canary_one_node_at_a_time(stack(items))
    assert finding.advisory and "maxParallelUpgrades 1" in finding.message


def test_image_owned_canary_needs_no_operator_upgrade_policy(rendered):
    assert list(capacity_rules.canary_one_node_at_a_time(stack(resources(rendered["eks-canary"])))) == []


@pytest.mark.parametrize(
    ("update_config", "flagged"),
    [
        ({"maxUnavailable": 2}, "maxUnavailable=2 takes 2"),
        ({"maxUnavailablePercentage": 50}, "maxUnavailablePercentage=50 takes 1"),  # 50% of 2 nodes is one
        ({"maxUnavailablePercentage": 100}, "maxUnavailablePercentage=100 takes 2"),
        ({"maxUnavailable": 1, "maxUnavailablePercentage": 50}, "not both"),
    ],
)
def test_canary_node_groups_update_one_node_at_a_time(rendered, update_config, flagged):
    items = [copy.deepcopy(r) for r in resources(rendered["eks-canary"])]
    group = next(g for g in of_type(items, rf.EKS_NODE_GROUP) if g.name == "gpu-canary-g1")  # 2 nodes
    group.props["updateConfig"] = update_config
    findings = list(capacity_rules.canary_one_node_at_a_time(stack(items)))
    if "takes 1" in flagged:
        assert findings == []
    else:
        (finding,) = findings
        assert flagged in finding.message and not finding.advisory


@pytest.mark.parametrize(("update_config", "flagged"), [
    ({"maxUnavailable": 2}, True),  # the boundary: two nodes is already more than one
    ({"maxUnavailable": 1}, False),
    ({"maxUnavailablePercentage": 10}, True),  # any percentage may mean several nodes
    ({"maxUnavailablePercentage": 1}, True),
])
def test_canary_node_group_without_a_visible_size_is_not_capped_at_one(rendered, update_config, flagged):
    items = [copy.deepcopy(r) for r in resources(rendered["eks-canary"])]
    group = next(g for g in of_type(items, rf.EKS_NODE_GROUP) if g.name == "gpu-canary-g1")
    group.props["updateConfig"] = update_config
    del group.props["scalingConfig"]
    findings = list(capacity_rules.canary_one_node_at_a_time(stack(items)))
    if not flagged:
        assert findings == []
        return
    (finding,) = findings
    assert "no visible desired size" in finding.message and not finding.advisory


def _canary_driver(rendered) -> Resource:
    return next(d for d in of_type(resources(rendered["canary"]), rf.NVIDIA_DRIVER) if d.name == "gpu-gpucanary")


def test_unset_max_parallel_upgrades_takes_the_default_of_the_resource_kind(rendered, helm_release):
    # (test_upgrade_rules.py checks autoUpgrade's defaults on the same resources.)
    stage_canary = _canary_driver(rendered)
    # NVIDIADriver CRD: maxParallelUpgrades defaults to 1.
    crd = spec_edit(stage_canary, ("spec", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None)
    assert list(capacity_rules.canary_one_node_at_a_time(stack([crd]))) == []
    # Helm values: the chart renders maxParallelUpgrades 0 (unlimited).
    notes = {**helm_release.props.get("metadata", {}), "labels": {labels.ROLE: "canary"}}
    helm = spec_edit(
        Resource(helm_release.type, helm_release.name, {**helm_release.props, "metadata": notes}, helm_release.urn),
        ("values", "driver", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None,
    )
    (unlimited,) = capacity_rules.canary_one_node_at_a_time(stack([helm]))
    assert "0 (unlimited)" in unlimited.message and "unset" in unlimited.message


# ---------------------------------------------------------------- parallelism-within-spare-capacity


def _without_stage(items: list[Resource]) -> list[Resource]:
    out = []
    for res in items:
        props = copy.deepcopy(dict(res.props))
        (props.get("metadata") or {}).get("annotations", {}).pop(labels.ANNOTATION_STAGE, None)
        (props.get("tags") or {}).pop(labels.TAG_STAGE, None)
        out.append(Resource(res.type, res.name, props, res.urn))
    return out


def test_parallelism_without_a_visible_stage_is_advice(rendered):
    items = _without_stage(resources(rendered["prod"]))
    assert stack(items).stage is None and not stack(items).stage_stated
    (finding,) = capacity_rules.parallelism_within_spare_capacity(stack(items))
    assert finding.advisory and "stage" in finding.message


def test_malformed_parallelism_values_are_findings_not_exceptions(rendered):
    # (test_budget_rules.py and test_upgrade_rules.py check the other malformed policy values.)
    items = resources(rendered["prod"])
    drivers = of_type(items, rf.NVIDIA_DRIVER)
    bad_parallel = [spec_edit(d, ("spec", "upgradePolicy"), maxParallelUpgrades="two") for d in drivers]
    swapped = [r for r in items if r.type != rf.NVIDIA_DRIVER] + bad_parallel
    found = list(capacity_rules.parallelism_within_spare_capacity(stack(swapped)))
    assert found and all("'two' is not a non-negative integer" in f.message and not f.advisory for f in found)
    bad_unavailable = [spec_edit(d, ("spec", "upgradePolicy"), maxUnavailable="lots") for d in drivers]
    swapped = [r for r in items if r.type != rf.NVIDIA_DRIVER] + bad_unavailable
    found = list(capacity_rules.parallelism_within_spare_capacity(stack(swapped)))
    assert found and all("maxUnavailable 'lots'" in f.message for f in found)


# ---------------------------------------------------------------- EKS node group update parallelism and surge


def _eks_prod(*edits) -> list[Resource]:
    config = stack_config("eks-prod")
    for edit in edits:
        config = change(config, "nodePools", edit)
    return resources(run_program(config, "eks-prod"))


def _policy_findings(rule, items: list[Resource], group: str) -> list:
    return [f for f in rule(stack(items)) if f.resource is not None and f.resource.name == group]


# Leaving the Capacity Block: no launch template, so the node group names its instance type itself.
ON_DEMAND_DEFAULT = {
    "capacityType": "ON_DEMAND", "updateStrategy": "DEFAULT", "launchTemplate": None, "instanceTypes": ["p5.48xlarge"]
}


def test_node_group_beyond_spare_capacity_names_its_numbers():
    items = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2))
    (finding,) = capacity_rules.parallelism_within_spare_capacity(stack(items))
    assert finding.resource.name == "gpu-h100-g1" and not finding.advisory
    assert finding.message == (
        "gpu-h100-g1: updateConfig.maxUnavailable=2 lets 2 of 3 nodes update at once with no surge "
        "(capacityType CAPACITY_BLOCK: the reservation is fixed); on pool gpu-h100 16 GPUs out but only 8 spare; "
        "llm-chat could drop below minAvailable"
    )


def test_default_strategy_on_demand_surge_passes_and_minimal_does_not():
    surging = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **ON_DEMAND_DEFAULT))
    assert list(capacity_rules.parallelism_within_spare_capacity(stack(surging))) == []
    spot = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **{**ON_DEMAND_DEFAULT, "capacityType": "SPOT"}))
    assert list(capacity_rules.parallelism_within_spare_capacity(stack(spot))) == []
    minimal = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **{**ON_DEMAND_DEFAULT, "updateStrategy": "MINIMAL"}))
    (finding,) = capacity_rules.parallelism_within_spare_capacity(stack(minimal))
    assert "(updateStrategy MINIMAL: old nodes terminate first)" in finding.message
    # A Capacity Block never surges, whatever the strategy.
    block_default = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, updateStrategy="DEFAULT"))
    (finding,) = capacity_rules.parallelism_within_spare_capacity(stack(block_default))
    assert "CAPACITY_BLOCK" in finding.message


def test_node_group_without_surge_needs_its_nodes_covered_by_spare_gpus():
    # 3 nodes, one spare: two out at once leave llm-chat's evicted replica nowhere to go.
    items = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2))
    (finding,) = capacity_rules.parallelism_within_spare_capacity(stack(items))
    assert "lets 2 of 3 nodes update at once" in finding.message
    assert "on pool gpu-h100 16 GPUs out but only 8 spare; llm-chat could drop below minAvailable" in finding.message


def test_a_pool_without_one_spare_node_is_spare_capacitys_finding_alone():
    # 2 nodes, both full: no parallelism setting helps (one node at a time is the least), so only
    # spare-capacity reports it, with its own remedy (a node more).
    items = _eks_prod(pool("gpu-h100", nodeCount=2))
    assert list(capacity_rules.parallelism_within_spare_capacity(stack(items))) == []
    (finding,) = [f for f in capacity_rules.spare_capacity(stack(items)) if "gpu-h100" in f.message]
    assert "0 spare GPUs, less than one node" in finding.message


def test_node_group_parallelism_is_a_prod_rule():
    # The canary has its own rule (canary-one-node-at-a-time); eks-canary's MINIMAL group is not checked here.
    config = change(stack_config("eks-canary"), "nodePools", eks_pool("gpu-canary", maxUnavailable=2))
    items = resources(run_program(config, "eks-canary"))
    assert list(capacity_rules.parallelism_within_spare_capacity(stack(items))) == []


@pytest.mark.parametrize(
    ("update_config", "nodes_out"),
    [({"maxUnavailablePercentage": 50}, 2), ({"maxUnavailablePercentage": 34}, 2), ({"maxUnavailablePercentage": 33}, 1),
     ({}, 1), (None, 1)],
)
def test_node_group_percentage_rounds_up_against_the_desired_size(rendered, update_config, nodes_out):
    items = resources(rendered["eks-prod"])
    config = None if update_config is None else {**update_config, "updateStrategy": "MINIMAL"}
    items = edit_named(items, "gpu-h100-g1", updateConfig=config)
    found = _policy_findings(capacity_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    if nodes_out == 1:
        assert found == []  # 8 GPUs out, 8 spare, llm-chat keeps minAvailable
    else:
        (finding,) = found
        assert f"lets {nodes_out} of 3 nodes" in finding.message and "maxUnavailablePercentage=" in finding.message


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"updateConfig": "fast"}, "updateConfig must be an object, not 'fast'"),
        ({"updateConfig": {"maxUnavailable": "two"}}, "maxUnavailable must be an integer from 1 to 100, got 'two'"),
        ({"updateConfig": {"maxUnavailable": 0}}, "maxUnavailable must be an integer from 1 to 100, got 0"),
        ({"updateConfig": {"maxUnavailablePercentage": 150}}, "maxUnavailablePercentage must be an integer from 1 to 100"),
        ({"updateConfig": {"maxUnavailable": 1, "maxUnavailablePercentage": 10}}, "not both"),
        ({"updateConfig": {"maxUnavailable": 1, "updateStrategy": "FAST"}}, "updateStrategy must be one of DEFAULT, MINIMAL"),
        ({"capacityType": "RESERVED"}, "capacityType must be one of"),
    ],
)
def test_malformed_node_group_values_are_findings_not_exceptions(rendered, props, expected):
    items = edit_named(resources(rendered["eks-prod"]), "gpu-h100-g1", **props)
    (finding,) = _policy_findings(capacity_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    assert expected in finding.message and not finding.advisory


def test_node_group_size_not_visible_is_advice(rendered):
    items = resources(rendered["eks-prod"])
    group = next(r for r in items if r.name == "gpu-h100-g1")
    items = edit_named(items, "gpu-h100-g1", scalingConfig={**group.props["scalingConfig"], "desiredSize": "three"})
    (finding,) = _policy_findings(capacity_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    assert finding.advisory and "desiredSize" in finding.message


def test_generations_count_as_surge_only_where_the_node_groups_can_surge(rendered):
    assert list(capacity_rules.spare_capacity(stack(resources(rendered["eks-prod"])))) == []
    (block,) = capacity_rules.spare_capacity(stack(_eks_prod(pool("gpu-h100", nodeCount=2))))
    assert block.message.startswith("pool gpu-h100: 0 spare GPUs, less than one node (8)")
    why = "its generations cannot surge: gpu-h100-g1 (capacityType CAPACITY_BLOCK: the reservation is fixed)"
    assert why in block.message
    canary = change(stack_config("eks-canary"), "nodePools", pool("gpu-canary", nodeCount=1))
    (minimal,) = capacity_rules.spare_capacity(stack(resources(run_program(canary, "eks-canary"))))
    assert "gpu-canary-g1, gpu-canary-g2 (updateStrategy MINIMAL: GPU capacity declared scarce" in minimal.message
    # On-demand capacity with the DEFAULT strategy launches the new generation beside the old one.
    surging = _eks_prod(pool("gpu-h100", nodeCount=2), eks_pool("gpu-h100", **ON_DEMAND_DEFAULT))
    assert list(capacity_rules.spare_capacity(stack(surging))) == []
    # A malformed strategy is no surge, and the message says why.
    items = edit_named(surging, "gpu-h100-g1", updateConfig={"maxUnavailable": 1, "updateStrategy": "FAST"})
    (odd,) = capacity_rules.spare_capacity(stack(items))
    assert "gpu-h100-g1 (updateStrategy must be one of DEFAULT, MINIMAL, got 'FAST')" in odd.message


def test_a_canary_pools_own_upgrade_policy_is_held_to_one_node_at_a_time():
    """nodePools[].upgradePolicy (issue 39): the pack reads what each NVIDIADriver carries, the pool's own keys."""
    from policy.evaluate import evaluate, from_registered, load_config
    from tests.conftest import as_planned, edited

    config = edited("canary", "nodePools", lambda pools: pools[0].update(upgradePolicy={"maxParallelUpgrades": 2}))
    found = [v for v in evaluate(from_registered(as_planned("canary", config).resources), load_config("canary"))
             if v.policy == "canary-one-node-at-a-time"]
    assert [(v.resource, "maxParallelUpgrades must be 1, not 2" in v.message) for v in found] == [
        ("gpu-gpucanary", True)]
    assert "nodePools[].upgradePolicy.maxParallelUpgrades" in found[0].config_keys


# ---------------------------------------------------------------- the validation job's GPUs (issue 32, point 2)
# While a node upgrades, the validation job holds the GPUs of the node upgraded before it (the upgrade controller
# moves on as soon as a node is done): both capacity rules count them, as preflight's spare-capacity does.


def _without_validation(config: dict[str, str]) -> dict[str, str]:
    config = dict(config)
    del config["gpu-driver-upgrade:validation"]
    return config


def test_parallelism_counts_the_nodes_the_validation_job_holds():
    # gput4: 4 nodes of 4 GPUs, rerank-sglang 2 replicas keeping 1: 14 spare. Three nodes at once: 12 GPUs out,
    # covered; with the job's 4 on the node upgraded before them, 16: rerank-sglang may lose both replicas.
    three = change(stack_config("prod"), "nodePools",
                   pool("gput4", upgradePolicy={"maxParallelUpgrades": 3, "maxUnavailable": 3}))
    (finding,) = [f for f in capacity_rules.parallelism_within_spare_capacity(stack(resources(run_program(three, "prod"))))
                  if "gput4" in f.message]
    assert not finding.advisory
    assert "16 GPUs out (the validation job's 4 per node just upgraded included) but only 14 spare" in finding.message
    assert "rerank-sglang could drop below minAvailable" in finding.message
    unvalidated = resources(run_program(_without_validation(three), "prod"))
    assert stack(unvalidated).validation_gpus == {}
    assert [f for f in capacity_rules.parallelism_within_spare_capacity(stack(unvalidated)) if "gput4" in f.message] == []


def test_spare_capacity_advises_where_the_validation_hold_leaves_pods_pending(rendered):
    # gpucanary: 3 nodes of 1 GPU, llm-chat-canary 2 replicas keeping 1: one spare GPU covers one node, not one
    # node and the job's GPU on the node before it; the PDB still holds, so advice (preflight warns there).
    items = resources(rendered["canary"])
    assert stack(items).validation_gpus["gpucanary"] == 1
    (finding,) = [f for f in capacity_rules.spare_capacity(stack(items)) if "gpucanary" in f.message]
    assert finding.advisory
    assert "one node upgrading and the validation job's 1 GPUs on the node upgraded before it: 2 GPUs out but " \
        "only 1 spare" in finding.message
    unvalidated = resources(run_program(_without_validation(stack_config("canary")), "canary"))
    assert [f for f in capacity_rules.spare_capacity(stack(unvalidated)) if "gpucanary" in f.message] == []


def test_spare_capacity_refuses_where_the_validation_hold_drops_a_model_below_min_available():
    config = change(stack_config("canary"), "models", model("llm-chat-canary", minAvailable=2))
    (finding,) = [f for f in capacity_rules.spare_capacity(stack(resources(run_program(config, "canary"))))
                  if "gpucanary" in f.message]
    assert not finding.advisory and "llm-chat-canary could drop below minAvailable" in finding.message
    unvalidated = resources(run_program(_without_validation(config), "canary"))
    assert [f for f in capacity_rules.spare_capacity(stack(unvalidated)) if "gpucanary" in f.message] == []


def test_a_pool_that_moves_by_generations_has_no_validation_hold(rendered):
    # New generations are validated beside the old nodes, which keep serving.
    items = resources(rendered["eks-canary"])
    assert stack(items).validation_gpus.get("gpu-canary") == 4
    assert [f for f in capacity_rules.spare_capacity(stack(items)) if "gpu-canary:" in f.message] == []
