"""The AKS managed cluster's node OS upgrade channel, read from Azure Resource Manager before preflight's checks
run (:func:`read`), for ``node-os-channel``: a channel other than ``None`` moves nodes to another node image on
AKS's schedule, so a pool created or scaled later may run another image than the canary attested.

The subscription is the one the nodes' ``spec.providerID`` names (``azure:///subscriptions/<id>/...``): what the
cluster shows, not a second copy in the stack. ARM is reached through :mod:`cloud_credentials` (the one home of
cloud API clients and their credentials).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from checks.objects import Obj, spec_of
from cloud_credentials.azure_management import AzureManagement, ManagedCluster, ManagementError
from fleetspec.model import Cloud, FleetSpec

_AZURE_PROVIDER_ID = re.compile(r"^azure:///subscriptions/(?P<subscription>[^/]+)/", re.IGNORECASE)


@dataclass(frozen=True)
class NodeOsChannel:
    """What was read: ``asked`` False where preflight had no ARM reader or the stack is not on AKS; ``channel``
    as ARM states it (None: unstated); ``error``: why it could not be read."""

    asked: bool = False
    channel: str | None = None
    error: str | None = None
    cluster: str = ""


def subscription_of(nodes: list[Obj]) -> str | None:
    """The Azure subscription the nodes' ``spec.providerID`` names (the first that names one)."""
    for node in nodes:
        match = _AZURE_PROVIDER_ID.match(str(spec_of(node).get("providerID") or ""))
        if match:
            return match.group("subscription")
    return None


def read(spec: FleetSpec, nodes: list[Obj], management: AzureManagement | None) -> NodeOsChannel:
    if spec.cluster.cloud != Cloud.AKS or spec.cluster.aks is None or management is None:
        return NodeOsChannel()
    aks = spec.cluster.aks
    name = f"{aks.resourceGroup}/{aks.clusterName}"
    subscription = subscription_of(nodes)
    if subscription is None:
        return NodeOsChannel(True, None, "no node's spec.providerID names the Azure subscription", name)
    try:
        channel = management.node_os_upgrade_channel(ManagedCluster(subscription, aks.resourceGroup, aks.clusterName))
    except ManagementError as error:
        return NodeOsChannel(True, None, str(error), name)
    return NodeOsChannel(True, channel, None, name)
