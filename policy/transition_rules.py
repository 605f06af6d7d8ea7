"""Rules over the step from the stack's last deployment to this change, which the program surfaces on the
resources it registers (components/previous.py): what the cloud or the operator cannot take in one step."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policy import facts
from policy.facts import Resource
from policy.findings import Finding, advice
from spec import labels, replacement


def cloud_pool_not_replaced(res: Resource) -> Iterator[Finding]:
    """A cloud pool's replace-only fields keep the values it was deployed with."""
    if res.type == facts.EKS_NODE_GROUP:
        planned, cloud, kind = replacement.eks_node_group_fields(res.props), "EKS", "node group"
        keys = replacement.EKS_REPLACE_ONLY
    elif res.type == facts.AKS_POOL:
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
    record = facts.prop(res.props, "tags", labels.TAG_DEPLOYED_WITH)
    return replacement.decode(record) if isinstance(record, str) else None


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


def per_pool_mode_own_change(resources: Sequence[Resource]) -> Iterator[Finding]:
    """Per-pool NVIDIADriver mode is switched on in a change of its own, never with an operator upgrade."""
    installs_chart = any(r.type == facts.HELM_RELEASE for r in resources)
    patches_policy = any(r.type in (facts.CLUSTER_POLICY, facts.CLUSTER_POLICY_CR) for r in resources)
    if not (installs_chart or patches_policy):
        return  # this stack does not own the driver mode (canary stacks: clusterPolicy external)
    for res in resources:
        if facts.prop(res.props, "metadata", "labels", labels.RECORD) != labels.RECORD_CLUSTER_IDENTITY:
            continue
        notes = facts.prop(res.props, "metadata", "annotations") or {}
        data = res.props.get("data") or {}
        was_per_pool = notes.get(labels.ANNOTATION_PREVIOUS_PER_POOL_DRIVERS)
        was_version = notes.get(labels.ANNOTATION_PREVIOUS_OPERATOR_VERSION)
        if was_per_pool != "false" or data.get("perPoolDrivers") != "true" or was_version == data.get("operatorVersion"):
            continue
        message = (
            f"per-pool NVIDIADriver mode (useNvidiaDriverCrd) is switched on in the same change as the operator "
            f"moves from {was_version} to {data.get('operatorVersion')}: the old operator removes the running "
            "driver pods before the new one takes them over (NVIDIA's migration guide). Upgrade the operator "
            "first, let it settle, then enable per-pool mode in a change of its own"
        )
        # Helm: this stack upgrades the operator itself. Patch: the chart version is declared, so the
        # operator may already run it; the live check (preflight) reads the running release.
        yield Finding(message, res) if installs_chart else advice(message + " (if it is not upgraded yet)", res)
