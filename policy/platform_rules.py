"""Rules about the node platform under the driver: the operating system of each operator-owned pool, and
the Fabric Manager of NVSwitch pools, which must match the driver exactly."""

from __future__ import annotations

from collections.abc import Iterator

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from gpu_knowledge import compat
from engine_contracts import resource_facts as rf
from gpu_knowledge.platform import aks_os, eks_os
from vocabulary.policy_ids import PolicyId


def _pool_os(res: Resource, declared: str | None) -> tuple[str, ...]:
    """The operating systems a cloud pool (or pool record) may run, from the field that decides it."""
    if res.type == rf.AKS_POOL:
        # The wire name is osSKU (azure-native); AKS's default is Ubuntu.
        return aks_os(str(res.props.get("osSKU") or "Ubuntu"))
    if res.type == rf.EKS_NODE_GROUP:
        # EKS reports a node group on a launch template's custom AMI as amiType CUSTOM (API Nodegroup.amiType):
        # its OS is the one declared with the template.
        ami_type = res.props.get("amiType")
        return eks_os(None if ami_type in (None, "", rf.EKS_CUSTOM_AMI) else ami_type, declared)
    return eks_os(None, declared)


@stack_policy(
    PolicyId.OPERATOR_SUPPORTS_OS,
    "Checks that every pool the GPU Operator installs the driver on runs an operating system the operator release ships a driver image for.",
    severity=Severity.CRITICAL, topics=("compatibility", "platform"),
    remediation="Run operator-owned pools on Ubuntu (AKS osSku Ubuntu2204/Ubuntu2404; EKS a custom Ubuntu AMI through a launch template) or let the node image own the driver (driver.owner: image).",
    config_keys=(
        "nodePools[].aks.osSku",
        "nodePools[].eks.launchTemplate.os",
        "nodePools[].existing.os",
        "driver.owner",
    ),
)
def operator_supports_os(stack: StackFacts) -> Iterator[Finding]:
    """Every pool the operator's driver installs on runs an OS the operator release has a driver image for."""
    for pool in stack.pools.values():
        owners = [d for d in facts.drivers_for_pool(pool, stack.drivers) if d.facts.version]
        for res in pool.resources:
            if not owners or facts.node_image_owns_driver(res):
                continue  # no operator driver here, or single-driver-owner's concern
            systems = _pool_os(res, rf.read_pool_labels(facts.node_labels(res)).os)
            if not systems:
                yield advice(
                    f"pool {pool.name} ({res.name}): its operating system is not visible (declare "
                    "eks.launchTemplate.os or existing.os), so the operator's support for it cannot be checked",
                    res,
                )
                continue
            for owner in owners:
                if not owner.facts.operator_version:
                    continue  # operator-supports-driver already says the release is not visible
                for os_id in systems:
                    answer = compat.operator_supports_os(owner.facts.operator_version, os_id)
                    if answer.no:
                        yield Finding(f"pool {pool.name} ({res.name}): {answer.reason}", res)
                    elif answer.unknown:
                        yield advice(f"pool {pool.name} ({res.name}): {answer.reason}", res)


@stack_policy(
    PolicyId.FABRIC_MANAGER_MATCHES,
    "Checks that NVSwitch pools with a host-installed Fabric Manager pin it to exactly the driver version.",
    severity=Severity.CRITICAL, topics=("compatibility", "nvswitch"),
    remediation="Set nodePools[].fabricManagerVersion to the pool's driver version, or let the driver container bring Fabric Manager.",
    config_keys=("nodePools[].fabricManagerVersion", "nodePools[].fabricManager"),
)
def fabric_manager_matches(stack: StackFacts) -> Iterator[Finding]:
    """NVSwitch pools with a host-installed Fabric Manager pin it to exactly the driver version."""
    for pool in stack.pools.values():
        pool_facts = pool.facts
        if pool_facts.nvswitch is not True or pool_facts.fabric_manager != "host":
            continue
        res = pool.resources[0]
        pinned = pool_facts.fabric_manager_version
        if not pinned:
            yield Finding(
                f"pool {pool.name}: NVSwitch pool with a host-installed Fabric Manager must pin its version "
                "(nodePools[].fabricManagerVersion) to the driver version",
                res,
            )
            continue
        versions = facts.pool_driver_versions(pool, stack.drivers)
        if not versions:
            yield advice(f"pool {pool.name}: no driver version is visible to compare Fabric Manager {pinned} with", res)
        for version, _source in versions:
            answer = compat.fabric_manager_matches(pinned, version)
            if not answer.yes:
                yield Finding(f"pool {pool.name}: {answer.reason}", res)
