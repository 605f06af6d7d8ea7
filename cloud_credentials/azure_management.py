"""One read of Azure Resource Manager: an AKS managed cluster's node OS upgrade channel
(``properties.autoUpgradeProfile.nodeOSUpgradeChannel``: ``None``, ``Unmanaged``, ``SecurityPatch`` or
``NodeImage``), with an Entra ID token for ARM's scope from the Azure identity in use (:class:`AzureToken`).

A channel other than ``None`` lets AKS move the nodes to another node image (or patch them) on its own schedule,
so a generation created after the canary may run another image than the canary attested. The identity needs
``Microsoft.ContainerService/managedClusters/read`` (the Reader role on the cluster); without it the answer is a
:class:`ManagementError` naming the role, and preflight warns rather than fails (docs/architecture.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3

from cloud_credentials.credentials import AzureToken, Credential, CredentialError

ARM_ENDPOINT = "https://management.azure.com"  # Azure public cloud's Resource Manager
ARM_SCOPE = "https://management.azure.com/.default"
# A GA API version whose managedClusters carry autoUpgradeProfile.nodeOSUpgradeChannel (added in 2023-06-01).
MANAGED_CLUSTERS_API = "2024-09-01"
NO_CHANNEL = "None"  # AKS's value: no automatic node OS or node image upgrade


class ManagementError(Exception):
    """ARM could not answer: one line naming the request and the fix."""


@dataclass(frozen=True)
class ManagedCluster:
    subscription: str
    resource_group: str
    name: str

    @property
    def path(self) -> str:
        return (f"/subscriptions/{quote(self.subscription)}/resourceGroups/{quote(self.resource_group)}/providers/"
                f"Microsoft.ContainerService/managedClusters/{quote(self.name)}")


class AzureManagement:
    """Reads managed clusters from ARM at ``endpoint`` with ``credential`` (an Entra token for ARM by default),
    each request bounded."""

    def __init__(self, credential: Credential | None = None, *, endpoint: str = ARM_ENDPOINT,
                 ca_file: str | None = None, timeout: float = 20.0) -> None:
        self.credential = credential or AzureToken(scope=ARM_SCOPE, fix=(
            "sign the identity in (in CI azure/login with OIDC, on a workstation `az login`) and give it the Reader "
            "role on the managed cluster"))
        self.endpoint = endpoint.rstrip("/")
        tls: dict[str, Any] = {"ca_certs": ca_file, "cert_reqs": "CERT_REQUIRED"} if ca_file else {}
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout), **tls)

    def node_os_upgrade_channel(self, cluster: ManagedCluster) -> str | None:
        """The cluster's ``nodeOSUpgradeChannel`` as ARM states it; None where the answer states none."""
        url = f"{self.endpoint}{cluster.path}?api-version={MANAGED_CLUSTERS_API}"
        what = f"ARM GET managedClusters/{cluster.name} (resource group {cluster.resource_group})"
        try:
            headers = {"Accept": "application/json", **self.credential.headers("GET", url, b"")}
            response = self._http.request("GET", url, headers=headers)
        except CredentialError as error:
            raise ManagementError(f"{what}: {error}") from None
        except urllib3.exceptions.HTTPError as error:
            raise ManagementError(f"{what}: not reachable ({type(error).__name__})") from None
        if response.status in (401, 403):
            raise ManagementError(f"{what}: HTTP {response.status}: {self.credential.what} may not read the managed "
                                  "cluster: give it the Reader role on it (Microsoft.ContainerService/managedClusters/"
                                  "read)")
        if response.status != 200:
            raise ManagementError(f"{what}: HTTP {response.status}")
        try:
            document = json.loads(response.data)
        except ValueError:
            raise ManagementError(f"{what}: the answer is not JSON") from None
        profile = ((document.get("properties") or {}).get("autoUpgradeProfile") or {}) if isinstance(document,
                                                                                                       dict) else {}
        channel = profile.get("nodeOSUpgradeChannel")
        return str(channel) if channel else None
