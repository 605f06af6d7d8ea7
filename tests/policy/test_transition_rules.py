"""policy.transition_rules called directly: changes against the last deployment."""

from __future__ import annotations

import pytest

from policy import transition_rules
from policy.facts import Resource
from engine_contracts import resource_facts as rf
from tests.policy.rules import of_type, resources, stack


@pytest.mark.parametrize("stack", ["prod", "eks-prod", "eks-canary", "canary"])
def test_each_cloud_pool_records_exactly_what_it_sends(rendered, stack):
    # The tag the program writes must be what the rule computes from the same inputs, or every first
    # deployment would be reported as a replacement.
    pools = [r for r in resources(rendered[stack]) if r.type in (rf.AKS_POOL, rf.EKS_NODE_GROUP)]
    assert pools
    for res in pools:
        assert list(transition_rules.cloud_pool_not_replaced(res)) == []
    assert set(rendered[stack].outputs["cloudPools"]) == {r.name for r in pools}


def test_a_pool_without_its_record_is_advice(rendered):
    agent = of_type(resources(rendered["prod"]), rf.AKS_POOL)[0]
    bare = Resource(agent.type, agent.name, {**agent.props, "tags": {}})
    (finding,) = transition_rules.cloud_pool_not_replaced(bare)
    assert finding.advisory and "deployed-with" in finding.message


def test_every_changed_replace_only_field_is_named(rendered):
    # An on-demand group without a launch template (registration order varies: pick it by name).
    (group,) = [g for g in of_type(resources(rendered["eks-prod"]), rf.EKS_NODE_GROUP) if g.name == "gpu-l40s-g1"]
    moved = Resource(group.type, group.name, {
        **group.props, "capacityType": "SPOT", "subnetIds": ["subnet-0ffffffffffffffff"], "diskSize": 500,
    })
    (finding,) = transition_rules.cloud_pool_not_replaced(moved)
    assert not finding.advisory
    for text in ("capacityType ON_DEMAND -> SPOT", "diskSize 200 -> 500", "subnetIds ", "add a new generation"):
        assert text in finding.message


def _last_deployed(items, **outputs):
    """``items`` with the stack's last deployment (the component holding its StackReference to itself)
    showing ``outputs``."""
    (reference,) = [r for r in items if r.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT]
    edited = Resource(reference.type, reference.name, {**reference.props, "outputs": outputs})
    return [edited if r is reference else r for r in items]


def test_per_pool_mode_alone_or_an_upgrade_alone_passes(rendered):
    items = resources(rendered["prod"])  # patch mode, already per-pool; a first deployment
    assert not stack(items).previous.deployed
    assert list(transition_rules.per_pool_mode_own_change(stack(items))) == []
    upgrade_only = _last_deployed(items, operatorVersion="v26.3.3", perPoolDrivers="true")
    assert list(transition_rules.per_pool_mode_own_change(stack(upgrade_only))) == []
    mode_only = _last_deployed(items, operatorVersion="v26.7.0", perPoolDrivers="false")
    assert list(transition_rules.per_pool_mode_own_change(stack(mode_only))) == []


def test_per_pool_mode_with_a_declared_upgrade_in_patch_mode_is_advice(rendered):
    both = _last_deployed(resources(rendered["prod"]), operatorVersion="v26.3.3", perPoolDrivers="false")
    (finding,) = transition_rules.per_pool_mode_own_change(stack(both))
    assert finding.advisory and "v26.3.3 to v26.7.0" in finding.message


def test_a_stack_that_does_not_own_the_driver_mode_is_not_checked(rendered):
    both = _last_deployed(resources(rendered["canary"]), operatorVersion="v26.3.3", perPoolDrivers="false")
    assert list(transition_rules.per_pool_mode_own_change(stack(both))) == []


def test_a_capacity_block_generation_at_zero_may_change_its_release(rendered):
    groups = {g.name: g for g in of_type(resources(rendered["eks-prod"]), rf.EKS_NODE_GROUP)}
    block = groups["gpu-h100-g1"]
    newer = {**block.props, "releaseVersion": "1.33.5-20251120"}
    (finding,) = transition_rules.capacity_block_updated_empty(Resource(block.type, block.name, newer))
    assert "desired size 3" in finding.message and "one at a time" in finding.message
    emptied = {**newer, "scalingConfig": {**block.props["scalingConfig"], "desiredSize": 0}}
    assert list(transition_rules.capacity_block_updated_empty(Resource(block.type, block.name, emptied))) == []
    # On-demand node groups roll their nodes with surge: an in-place release change is theirs to make.
    on_demand = groups["gpu-l40s-g2"]
    moved = Resource(on_demand.type, on_demand.name, {**on_demand.props, "releaseVersion": "1.33.5-20251201"})
    assert list(transition_rules.capacity_block_updated_empty(moved)) == []
    assert list(transition_rules.cloud_pool_not_replaced(moved)) == []
