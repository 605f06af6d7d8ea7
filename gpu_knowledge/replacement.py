"""Fields of a cloud pool that the cloud cannot change in place, and how a change of them is caught.

An EKS node group or AKS agent pool keeps its explicit name for life. A change to one of these fields
makes the provider replace it, and a replacement under the same name either fails at create (EKS: the
name is taken) or, on AKS, runs through a pool the cloud refuses to change (Azure: vmSize and the GPU
driver setting are fixed at creation). So the program records, as a tag on every cloud pool, the values
its last deployment sent; the policy pack compares that record with what the change would send and
refuses a difference: the way to change such a field is a new generation (or pool) beside the old one.

Sources: terraform-provider-aws internal/service/eks/node_group.go (ForceNew: ami_type, capacity_type,
disk_size, instance_types, launch_template.id, node_role_arn, subnet_ids); pulumi-azure-native
provider/pkg/gen/replacement.go (AgentPool: vmSize, gpuInstanceProfile) and AKS docs "use-nvidia-gpu"
(`--gpu-driver` is fixed at creation; update and upgrade never change it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

# Every character used below is allowed in AWS tag values (letters, digits, space and _ . : / = + - @)
# and in Azure tag values, and a record stays far below both clouds' 256-character limit.
_NONE = "-"


def _text(value: Any) -> str:
    if value is None or value == "":
        return _NONE
    if isinstance(value, (list, tuple)):
        return "+".join(str(v) for v in value) or _NONE
    return str(value)


def _digest(value: Any) -> str:
    """Long values (subnet lists, role ARNs) as a short digest: their change matters, not their text."""
    text = _text(value)
    return text if text == _NONE else hashlib.sha256(text.encode()).hexdigest()[:12]


def _get(props: Mapping[str, Any], *path: str) -> Any:
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


EKS_REPLACE_ONLY: tuple[str, ...] = ("amiType", "capacityType", "diskSize", "instanceTypes", "launchTemplate", "nodeRoleArn", "subnetIds")
AKS_REPLACE_ONLY: tuple[str, ...] = ("vmSize", "gpuProfile.driver", "gpuInstanceProfile")
# Updated in place, by rolling the node group's nodes; a Capacity Block node group only at desired size 0
# (EKS user guide, "Create a managed node group with Capacity Blocks": "When upgrading managed node groups
# with Capacity Blocks, make sure that the desired size of the node group is set to 0").
EKS_VERSION_FIELDS = ("releaseVersion", "launchTemplateVersion")


def eks_node_group_fields(props: Mapping[str, Any]) -> dict[str, str]:
    """The replace-only and version fields of an EKS node group, from its properties as the engine sees them."""
    instance_types = props.get("instanceTypes")
    return {
        "releaseVersion": _text(props.get("releaseVersion")),
        "launchTemplateVersion": _text(_get(props, "launchTemplate", "version")),
        "amiType": _text(props.get("amiType")),
        "capacityType": _text(props.get("capacityType")),
        "diskSize": _text(props.get("diskSize")),
        "instanceTypes": _text(list(instance_types) if instance_types is not None else None),
        "launchTemplate": _text(_get(props, "launchTemplate", "id")),
        "nodeRoleArn": _digest(props.get("nodeRoleArn")),
        "subnetIds": _digest(sorted(props.get("subnetIds") or [])),
    }


def aks_agent_pool_fields(props: Mapping[str, Any]) -> dict[str, str]:
    """The fields of an AKS agent pool fixed at creation, from its properties as the engine sees them."""
    return {
        "vmSize": _text(props.get("vmSize")),
        "gpuProfile.driver": _text(_get(props, "gpuProfile", "driver")),
        "gpuInstanceProfile": _text(props.get("gpuInstanceProfile")),
    }


def encode(fields: Mapping[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(fields.items()))


def decode(record: str) -> dict[str, str]:
    fields = {}
    for part in record.split():
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = value
    return fields


def changed_fields(
    deployed: Mapping[str, str], planned: Mapping[str, str], keys: tuple[str, ...]
) -> list[tuple[str, str, str]]:
    """(field, deployed value, planned value) for each of ``keys`` the change would alter. A key the
    deployed record lacks (written by an older release) is not compared."""
    return [
        (key, deployed[key], planned.get(key, _NONE))
        for key in keys
        if key in deployed and deployed[key] != planned.get(key, _NONE)
    ]
