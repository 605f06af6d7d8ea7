"""policy.platform_rules called directly: the node OS under an operator-owned driver, Fabric Manager."""

from __future__ import annotations

from policy import platform_rules
from policy.facts import Resource
from preview.run import run_program
from engine_contracts import resource_facts as rf
from tests.conftest import eks_operator_owned, stack_config
from tests.policy.rules import of_type, resources, stack
from tests.policy.variants import change, pool


def test_operator_owned_pool_on_an_os_without_a_driver_image_is_reported(rendered):
    items = resources(rendered["prod"])
    assert [f for f in platform_rules.operator_supports_os(stack(items)) if not f.advisory] == []
    agent = of_type(items, rf.AKS_POOL)[0]
    azure_linux = Resource(agent.type, agent.name, {**agent.props, "osSKU": "AzureLinux3"})
    (finding,) = platform_rules.operator_supports_os(stack([azure_linux if r is agent else r for r in items]))
    assert not finding.advisory and finding.resource is azure_linux
    assert "no driver container for Azure Linux" in finding.message


def test_os_support_follows_the_operator_release_and_the_declared_custom_ami():
    items = resources(run_program(eks_operator_owned(), "eks-prod"))
    assert list(platform_rules.operator_supports_os(stack(items))) == []
    group = of_type(items, rf.EKS_NODE_GROUP)[0]
    labels_26_04 = {**group.props["labels"], "gpu-driver-upgrade.io/os": "ubuntu26.04"}
    newer = Resource(group.type, group.name, {**group.props, "labels": labels_26_04})
    swapped = [newer if r is group else r for r in items]
    assert list(platform_rules.operator_supports_os(stack(swapped))) == []  # 26.7 lists Ubuntu 26.04
    older = [_with_operator(r, "v25.10.1") for r in swapped]
    (finding,) = platform_rules.operator_supports_os(stack(older))
    assert not finding.advisory and "not ubuntu26.04" in finding.message
    unknown = [_with_operator(r, "v25.3.3") for r in swapped]
    assert all(f.advisory for f in platform_rules.operator_supports_os(stack(unknown)))


def _with_operator(res: Resource, chart: str) -> Resource:
    """A driver object annotated as running under another operator release (others unchanged)."""
    if res.type == rf.HELM_RELEASE:
        return Resource(res.type, res.name, {**res.props, "version": chart})
    if res.type != rf.NVIDIA_DRIVER:
        return res
    meta = res.props["metadata"]
    notes = {**meta["annotations"], "gpu-driver-upgrade.io/operator-version": chart}
    return Resource(res.type, res.name, {**res.props, "metadata": {**meta, "annotations": notes}})


def test_host_fabric_manager_pinned_to_the_pool_driver_passes_and_a_mismatch_fails():
    pinned = change(stack_config("prod"), "nodePools", pool("gpuh100", fabricManager="host", fabricManagerVersion="570.195.03"))
    assert list(platform_rules.fabric_manager_matches(stack(resources(run_program(pinned, "prod"))))) == []
    wrong = change(stack_config("prod"), "nodePools", pool("gpuh100", fabricManager="host", fabricManagerVersion="580.173.02"))
    (finding,) = platform_rules.fabric_manager_matches(stack(resources(run_program(wrong, "prod"))))
    assert "must equal driver 570.195.03" in finding.message


# ---------------------------------------------------------------- pool-hardware-matches-size (issue 30)


def _hardware(items):
    return list(platform_rules.pool_hardware_matches_size(stack(items)))


def test_the_examples_declare_what_their_sizes_carry(rendered):
    for name in ("canary", "prod", "eks-canary", "existing-canary", "existing-prod"):
        assert _hardware(resources(rendered[name])) == [], name
    # eks-prod's H100 node group is a Capacity Block: its launch template sets the type, preflight judges it
    (finding,) = _hardware(resources(rendered["eks-prod"]))
    assert finding.advisory and finding.resource.type == rf.EKS_NODE_GROUP
    assert "gpu-h100" in finding.message and "launch template lt-" in finding.message
    assert "gpu-rollout preflight" in finding.message and "pool-hardware" in finding.message


def test_an_h100_sxm_size_declared_as_one_h100_nvl_is_refused_naming_both():
    # Issue 30: Standard_ND96isr_H100_v5 (eight H100 SXM on NVSwitch) declared as the canary's PCIe H100 NVL.
    config = change(stack_config("prod"), "nodePools", pool("gpuh100", gpuProduct="NVIDIA-H100-NVL", gpusPerNode=1,
                                                         nvswitch=False))
    (finding,) = _hardware(resources(run_program(config, "prod")))
    assert not finding.advisory and finding.resource.type == rf.AKS_POOL
    assert "pool gpuh100" in finding.message
    assert "vmSize Standard_ND96isr_H100_v5 carries 8 x NVIDIA-H100-80GB-HBM3 with NVSwitch" in finding.message
    assert "declares gpuProduct NVIDIA-H100-NVL, gpusPerNode 1, nvswitch false" in finding.message
    assert "gpusPerNode 1 is not its 8" in finding.message and "nvswitch false is not its true" in finding.message


def test_one_declared_value_off_is_refused_and_another_spelling_of_the_gpu_is_not():
    count = change(stack_config("prod"), "nodePools", pool("gput4", gpusPerNode=1))  # NC64as_T4_v3 has four
    (finding,) = _hardware(resources(run_program(count, "prod")))
    assert "Standard_NC64as_T4_v3" in finding.message and "gpusPerNode 1 is not its 4" in finding.message
    spelling = change(stack_config("prod"), "nodePools", pool("gpua100", gpuProduct="NVIDIA-A100-PCIE-80GB"))
    assert _hardware(resources(run_program(spelling, "prod"))) == []


def test_an_unknown_size_is_advice_naming_the_table(rendered):
    items = resources(rendered["prod"])
    agent = next(r for r in of_type(items, rf.AKS_POOL) if "gpua100" in r.name)
    other = Resource(agent.type, agent.name, {**agent.props, "vmSize": "Standard_NC6s_v9"})
    (finding,) = _hardware([other if r is agent else r for r in items])
    assert finding.advisory and finding.resource is other
    assert "vmSize Standard_NC6s_v9 is not in gpu_knowledge.cloud_gpus's table" in finding.message


def test_each_instance_type_of_a_node_group_is_judged(rendered):
    items = resources(rendered["eks-canary"])
    group = next(r for r in of_type(items, rf.EKS_NODE_GROUP) if "a10g" in r.name)
    mixed = Resource(group.type, group.name, {**group.props, "instanceTypes": ["g5.xlarge", "g5.12xlarge", "x9.huge"]})
    found = _hardware([mixed if r is group else r for r in items])
    assert [f.advisory for f in found] == [False, True]
    assert "instanceTypes g5.12xlarge carries 4 x NVIDIA-A10G" in found[0].message
    assert "gpusPerNode 1 is not its 4" in found[0].message and "x9.huge" in found[1].message


def test_bad_props_are_advice_not_a_crash(rendered):
    items = resources(rendered["eks-canary"])
    group = of_type(items, rf.EKS_NODE_GROUP)[0]
    broken = Resource(group.type, group.name, {**group.props, "instanceTypes": "g6e.12xlarge"})  # not a list
    (finding,) = _hardware([broken if r is group else r for r in items])
    assert finding.advisory and "instanceTypes 'g6e.12xlarge' is not readable" in finding.message
