"""Rules about the node platform under the driver: the operating system of each operator-owned pool, the
Fabric Manager of NVSwitch pools, which must match the driver exactly, and each pool's declared hardware
against what its VM size or instance type carries (``gpu_knowledge.cloud_gpus``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from gpu_knowledge import cloud_gpus, compat, labels
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
        owners = [d for d in stack.drivers_of(pool) if d.facts.version]
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
        versions = stack.driver_versions_of(pool)
        if not versions:
            yield advice(f"pool {pool.name}: no driver version is visible to compare Fabric Manager {pinned} with", res)
        for version, _source in versions:
            answer = compat.fabric_manager_matches(pinned, version)
            if not answer.yes:
                yield Finding(f"pool {pool.name}: {answer.reason}", res)


def _declared(res: Resource) -> cloud_gpus.Declared:
    """The hardware a cloud pool's nodes are declared to have (its node labels, written from the spec)."""
    stated = rf.read_pool_labels(facts.node_labels(res))
    return cloud_gpus.Declared(stated.gpu_product, stated.gpus_per_node, stated.nvswitch,
                               mig=stated.mig_config != labels.MIG_CONFIG_DISABLED)


def _declared_text(declared: cloud_gpus.Declared) -> str:
    nvswitch = "unset" if declared.nvswitch is None else str(declared.nvswitch).lower()
    return (f"gpuProduct {declared.gpu_product or 'unset'}, gpusPerNode {declared.gpus_per_node or 'unset'}, "
            f"nvswitch {nvswitch}")


def _sizes(res: Resource) -> tuple[str, Any] | None:
    """What names the machines of a cloud pool, as sent: (``vmSize``, the size) of an AKS agent pool,
    (``instanceTypes``, the list, or None or [] where the launch template sets the type) of an EKS node group; None for a
    resource without one (an existing cluster's pool record)."""
    if res.type == rf.AKS_POOL:
        return "vmSize", res.props.get("vmSize")
    if res.type == rf.EKS_NODE_GROUP:
        return "instanceTypes", res.props.get("instanceTypes")
    return None


@stack_policy(
    PolicyId.POOL_HARDWARE_MATCHES_SIZE,
    "Checks that each pool's declared GPU product, GPUs per node and NVSwitch agree with what its AKS VM size or EKS instance type carries.",
    severity=Severity.CRITICAL, topics=("compatibility", "hardware"),
    remediation="Declare the pool's hardware as its VM size or instance type carries it (nodePools[].gpuProduct, gpusPerNode, nvswitch), or run the pool on the size that carries the declared GPUs. The canary gate, the capacity rules and Fabric Manager all rest on that declaration.",
    config_keys=(
        "nodePools[].gpuProduct",
        "nodePools[].gpusPerNode",
        "nodePools[].nvswitch",
        "nodePools[].aks.vmSize",
        "nodePools[].eks.instanceTypes",
    ),
)
def pool_hardware_matches_size(stack: StackFacts) -> Iterator[Finding]:
    """A pool whose declaration contradicts its size is refused, naming both; an unknown size is advice naming the
    table; an EKS node group whose type only its launch template sets is preflight's to judge (advice); a pool of
    an existing cluster has no size here."""
    for pool in stack.pools.values():
        for res in pool.resources:
            sizes = _sizes(res)
            if sizes is None:
                continue  # cloud: existing: no size to judge; preflight compares the nodes' own labels
            field, sent = sizes
            declared = _declared(res)
            if res.type == rf.EKS_NODE_GROUP and (sent is None or sent == []):
                # None as sent; [] in the engine's outputs (the provider's state of a node group without types)
                template = facts.prop(res.props, "launchTemplate", "id")
                where = f"its launch template {template}" if template else "its launch template"
                yield advice(
                    f"pool {pool.name} ({res.name}): no {field} sent, {where} sets the instance type, which the pack "
                    f"cannot see: `gpu-rollout preflight` (check pool-hardware) judges the declared {_declared_text(declared)} "
                    f"against the nodes' {labels.INSTANCE_TYPE} and GFD labels",
                    res,
                )
                continue
            names = [sent] if res.type == rf.AKS_POOL else sent
            if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
                yield advice(f"pool {pool.name} ({res.name}): {field} {sent!r} is not readable as sent, so the "
                             f"declared {_declared_text(declared)} cannot be compared with the hardware", res)
                continue
            for size in names:
                row = cloud_gpus.aks_vm_size(size) if res.type == rf.AKS_POOL else cloud_gpus.eks_instance_type(size)
                if row is None:
                    yield advice(
                        f"pool {pool.name} ({res.name}): {field} {size} is not in {cloud_gpus.TABLE}'s table of GPU "
                        f"sizes, so the declared {_declared_text(declared)} cannot be compared with the hardware; add "
                        "the size with its public source, or check the declaration by hand (`gpu-rollout preflight` "
                        "compares it with the nodes' GFD labels)",
                        res,
                    )
                    continue
                wrong = cloud_gpus.contradictions(row, declared)
                if wrong:
                    yield Finding(
                        f"pool {pool.name} ({res.name}): {field} {size} carries {row.describe()}, but the pool "
                        f"declares {_declared_text(declared)}: {'; '.join(wrong)}",
                        res,
                    )
