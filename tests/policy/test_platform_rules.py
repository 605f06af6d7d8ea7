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
