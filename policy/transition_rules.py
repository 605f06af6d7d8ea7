"""Rules over the step from the stack's last deployment to this change, which the program surfaces on the
resources it registers (components/previous.py): what the cloud or the operator cannot take in one step."""

from __future__ import annotations

from collections.abc import Iterator

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, resource_policy, stack_policy
from gpu_knowledge import labels
from gpu_knowledge import replacement
from engine_contracts import resource_facts as rf
from vocabulary.policy_ids import PolicyId


@resource_policy(
    PolicyId.CLOUD_POOL_NOT_REPLACED,
    "Checks that no change alters a field the cloud cannot change in place on a node pool (EKS amiType, capacityType, instanceTypes, subnets, diskSize, launch template; AKS vmSize, GPU driver setting).",
    resource_types=rf.CLOUD_POOL_TYPES,
    severity=Severity.CRITICAL, topics=("disruption", "lifecycle"),
    remediation="Keep the pool's replace-only fields as deployed; add a new generation (or pool) with the new settings beside it, move the workloads, then retire the old one.",
    config_keys=("nodePools[].generations",),
)
def cloud_pool_not_replaced(res: Resource) -> Iterator[Finding]:
    """A cloud pool's replace-only fields keep the values it was deployed with."""
    if res.type == rf.EKS_NODE_GROUP:
        planned, cloud, kind = replacement.eks_node_group_fields(res.props), "EKS", "node group"
        keys = replacement.EKS_REPLACE_ONLY
    elif res.type == rf.AKS_POOL:
        planned, cloud, kind = replacement.aks_agent_pool_fields(res.props), "AKS", "agent pool"
        keys = replacement.AKS_REPLACE_ONLY
    else:
        return
    deployed = _deployed(res)
    if deployed is None:
        yield advice(f"{res.name}: no {labels.TAG_DEPLOYED_WITH} tag, so a replace-only change cannot be seen", res)
        return
    changes = replacement.changed_fields(deployed, planned, keys)
    if changes:
        what = "; ".join(f"{field} {old} -> {new}" for field, old, new in changes)
        yield Finding(
            f"{res.name}: {what}. {cloud} cannot change this {kind} in place, and a replacement under the same "
            f"name fails or takes every node of it down at once: add a new generation (or pool) beside it with "
            "the new settings, move the workloads, then retire the old one",
            res,
        )


def _deployed(res: Resource) -> dict[str, str] | None:
    record = rf.read_pool_tags(res.props).deployed_with
    return replacement.decode(record) if record is not None else None


@resource_policy(
    PolicyId.CAPACITY_BLOCK_UPDATED_EMPTY,
    "Checks that a Capacity Block node group changes its AMI release or launch template version only at desired size 0, as AWS documents.",
    resource_types=(rf.EKS_NODE_GROUP,),
    severity=Severity.HIGH, topics=("disruption", "lifecycle", "capacity-block"),
    remediation="Move the reservation's nodes to a new generation one at a time (generations[].nodeCount), or set the generation's nodeCount to 0 before changing its version.",
    config_keys=("nodePools[].generations[].nodeCount",),
)
def capacity_block_updated_empty(res: Resource) -> Iterator[Finding]:
    """A Capacity Block node group moves to another AMI or launch template version only at desired size 0."""
    group = facts.node_group_update(res)
    if group is None or group.capacity_type != "CAPACITY_BLOCK":
        return
    deployed = _deployed(res)
    if deployed is None:
        return  # cloud-pool-not-replaced already advises that the record is missing
    changes = replacement.changed_fields(deployed, replacement.eks_node_group_fields(res.props), replacement.EKS_VERSION_FIELDS)
    if changes and group.desired_size != 0:
        what = "; ".join(f"{field} {old} -> {new}" for field, old, new in changes)
        yield Finding(
            f"{res.name}: {what} on a Capacity Block node group with desired size {group.desired_size}. AWS updates "
            "such a group only at desired size 0, and lowering the desired size does not respect "
            "PodDisruptionBudgets: move the reservation's nodes to a new generation one at a time instead "
            "(drain a node of the old generation, lower its generations[].nodeCount by one and raise the "
            "new generation's by one), or set this generation's nodeCount to 0 first",
            res,
        )


@stack_policy(
    PolicyId.PER_POOL_MODE_OWN_CHANGE,
    "Checks that per-pool NVIDIADriver mode is switched on in a change of its own, not together with an operator upgrade.",
    severity=Severity.CRITICAL, topics=("disruption", "migration"),
    remediation="Upgrade the GPU Operator in one change; once it runs clean, set gpuOperator.useNvidiaDriverCrd: true in the next.",
    config_keys=("gpuOperator.useNvidiaDriverCrd", "gpuOperator.chartVersion"),
)
def per_pool_mode_own_change(stack: StackFacts) -> Iterator[Finding]:
    """Per-pool NVIDIADriver mode is switched on in a change of its own, never with an operator upgrade."""
    installs_chart = stack.has(rf.HELM_RELEASE)
    patches_policy = stack.has(*rf.CLUSTER_POLICY_TYPES)
    if not (installs_chart or patches_policy):
        return  # this stack does not own the driver mode (canary stacks: clusterPolicy external)
    last = stack.previous
    for record in stack.identities:
        res, now = record.resource, record.facts
        was_version = last.operator_version
        if last.per_pool_drivers is not False or now.per_pool_drivers is not True or was_version == now.operator_version:
            continue
        message = (
            f"per-pool NVIDIADriver mode (useNvidiaDriverCrd) is switched on in the same change as the operator "
            f"moves from {was_version} to {now.operator_version}: the old operator removes the running "
            "driver pods before the new one takes them over (NVIDIA's migration guide). Upgrade the operator "
            "first, let it settle, then enable per-pool mode in a change of its own"
        )
        # Helm: this stack upgrades the operator itself. Patch: the chart version is declared, so the
        # operator may already run it; the live check (preflight) reads the running release.
        yield Finding(message, res) if installs_chart else advice(message + " (if it is not upgraded yet)", res)
