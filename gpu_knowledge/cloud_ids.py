"""The IDs a cloud gives an existing GPU pool, as Pulumi's ``import`` resource option takes them (what a stack names
to adopt a pool it did not create, ``nodePools[].aks.adopt`` / ``nodePools[].eks.adopt``):

- an AKS agent pool: its Azure Resource Manager ID,
  ``/subscriptions/<sub>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<cluster>/agentPools/<pool>``
  (azure-native's ``containerservice.AgentPool`` id); ARM compares the segments' names without regard to case;
- an EKS managed node group: ``<cluster>:<node group>`` (pulumi-aws's ``eks.NodeGroup`` id).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AKS_AGENT_POOL_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[0-9A-Fa-f-]{36})/resourceGroups/(?P<group>[-\w._()]{1,90})"
    r"/providers/Microsoft\.ContainerService/managedClusters/(?P<cluster>[-\w]{1,63})/agentPools/(?P<pool>[a-z][a-z0-9]{0,11})$",
    re.IGNORECASE,
)
EKS_NODE_GROUP_ID = re.compile(r"^(?P<cluster>[A-Za-z0-9][A-Za-z0-9_-]{0,99}):(?P<pool>[A-Za-z0-9][A-Za-z0-9_-]{0,62})$")


@dataclass(frozen=True)
class PoolId:
    """An existing cloud pool's place: the cluster it belongs to (and, on AKS, its resource group and
    subscription) and its own name."""

    cluster: str
    pool: str
    group: str | None = None
    subscription: str | None = None


def aks_agent_pool_id(value: str) -> PoolId:
    """An AKS agent pool's ARM ID, read; ValueError saying the shape where it is not one."""
    found = AKS_AGENT_POOL_ID.fullmatch(value)
    if found is None:
        raise ValueError(f"'{value}' is not an AKS agent pool's resource ID: /subscriptions/<id>/resourceGroups/"
                         "<group>/providers/Microsoft.ContainerService/managedClusters/<cluster>/agentPools/<pool> "
                         "(`az aks nodepool show --query id`)")
    return PoolId(found["cluster"], found["pool"], found["group"], found["subscription"])


def aks_agent_pool(subscription: str, group: str, cluster: str, pool: str) -> str:
    """The ARM ID of an agent pool (what `az aks nodepool show --query id` prints)."""
    return (f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.ContainerService/"
            f"managedClusters/{cluster}/agentPools/{pool}")


def eks_node_group_id(value: str) -> PoolId:
    """An EKS node group's import ID, read; ValueError saying the shape where it is not one."""
    found = EKS_NODE_GROUP_ID.fullmatch(value)
    if found is None:
        raise ValueError(f"'{value}' is not an EKS node group's import ID: <cluster>:<node group>")
    return PoolId(found["cluster"], found["pool"])


def eks_node_group(cluster: str, pool: str) -> str:
    return f"{cluster}:{pool}"
