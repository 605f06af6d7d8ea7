"""What a managed cluster runs, read through the cloud's own API with the user's credentials
(:mod:`cloud_credentials`): an AKS cluster and its agent pools (Azure Resource Manager), an EKS cluster and its
managed node groups (the EKS API). `gpu-rollout init --from-cluster` writes the stacks from it, each GPU pool with its
import ID (:mod:`gpu_knowledge.cloud_ids`) so the program adopts it. GETs only, each bounded by a timeout; a refusal
or an unreadable answer raises :class:`CloudReadError`, one line naming the request and, for a refused credential,
its fix."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from cloud_credentials.credentials import Credential, CredentialError
from gpu_knowledge import cloud_ids

ARM_ENDPOINT = "https://management.azure.com"
ARM_SCOPE = "https://management.azure.com/.default"  # an Entra ID token for Azure Resource Manager
AKS_API_VERSION = "2024-09-01"  # Microsoft.ContainerService managedClusters and agentPools
EKS_SERVICE = "eks"  # as SigV4 names the EKS API
MAX_PAGES = 50  # a cluster with more pools than 50 pages of them is not one this reads


def eks_endpoint(region: str) -> str:
    return f"https://eks.{region}.amazonaws.com"


class CloudReadError(Exception):
    """The cloud's API refused a read or answered what this cannot read: one line saying which and why."""


@dataclass(frozen=True)
class CloudPool:
    """One pool as the cloud runs it, in the words of a stack file's pool."""

    name: str
    import_id: str  # what Pulumi's `import` takes (gpu_knowledge.cloud_ids)
    count: int
    sizes: tuple[str, ...]  # AKS: (vmSize,); EKS: instanceTypes (empty beside a launch template that sets it)
    labels: dict[str, str] = field(default_factory=dict)
    system: bool = False  # AKS mode System (never a GPU pool of a stack)
    node_image: str | None = None  # AKS nodeImageVersion, EKS releaseVersion
    os_sku: str | None = None  # AKS osSKU
    zones: tuple[str, ...] = ()
    max_surge: str | None = None  # AKS upgradeSettings.maxSurge
    gpu_driver: str | None = None  # AKS gpuProfile.driver ("None": the operator installs it)
    ami_type: str | None = None  # EKS
    capacity_type: str | None = None  # EKS
    max_unavailable: int | None = None  # EKS updateConfig.maxUnavailable
    launch_template: dict[str, str] | None = None  # EKS {"id", "version"}
    disk_size: int | None = None  # EKS


@dataclass(frozen=True)
class ManagedCluster:
    """A managed cluster as its cloud describes it, and its pools in name order."""

    kubernetes_version: str | None
    location: str | None  # AKS: the Azure region
    pools: tuple[CloudPool, ...]
    subnets: tuple[str, ...] = ()  # EKS: the cluster's subnets (the node groups' own are on each group)
    node_role: str | None = None  # EKS: the node groups' IAM role, where they share one


class _Api:
    """GETs of one API with one credential; JSON answers."""

    def __init__(self, endpoint: str, credential: Credential, timeout: float) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.credential = credential
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout))

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        url = f"{self.endpoint}{path}" + (f"?{urlencode(query)}" if query else "")
        return self.get_url(url)

    def get_url(self, url: str) -> Any:
        try:
            headers = self.credential.headers("GET", url, b"")
        except CredentialError as exc:
            raise CloudReadError(str(exc)) from None
        try:
            response = self._http.request("GET", url, headers={**headers, "Accept": "application/json"})
        except urllib3.exceptions.HTTPError as exc:
            raise CloudReadError(f"GET {url}: {exc}") from None
        if response.status in (401, 403):
            raise CloudReadError(f"GET {url}: HTTP {response.status} with {self.credential.what}: "
                                 f"{self.credential.fix}")
        if response.status != 200:
            raise CloudReadError(f"GET {url}: HTTP {response.status}: {response.data[:300].decode(errors='replace')}")
        try:
            return json.loads(response.data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CloudReadError(f"GET {url}: not JSON ({exc})") from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CloudReadError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _object(value: Any) -> dict[str, Any]:
    """An optional nested object: itself, else empty."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def read_aks(subscription: str, group: str, cluster: str, credential: Credential, *, endpoint: str = ARM_ENDPOINT,
             timeout: float = 30.0) -> ManagedCluster:
    """The AKS managed cluster and its agent pools (``GET managedClusters/<cluster>`` and its ``agentPools``)."""
    api = _Api(endpoint, credential, timeout)
    base = (f"/subscriptions/{quote(subscription)}/resourceGroups/{quote(group)}/providers/"
            f"Microsoft.ContainerService/managedClusters/{quote(cluster)}")
    query = {"api-version": AKS_API_VERSION}
    found = _mapping(api.get(base, query), f"managed cluster {group}/{cluster}")
    properties = _mapping(found.get("properties") or {}, f"managed cluster {group}/{cluster} properties")
    listed: list[Any] = []
    page = _mapping(api.get(f"{base}/agentPools", query), f"agent pools of {group}/{cluster}")
    for _ in range(MAX_PAGES):
        listed += page.get("value") or []
        link = _text(page.get("nextLink"))
        if link is None:
            break
        page = _mapping(api.get_url(link), f"agent pools of {group}/{cluster}")
    pools = []
    for item in listed:
        item = _mapping(item, f"an agent pool of {group}/{cluster}")
        name = _text(item.get("name")) or "?"
        props = _mapping(item.get("properties") or {}, f"agent pool {name}")
        upgrade, gpu = _object(props.get("upgradeSettings")), _object(props.get("gpuProfile"))
        pools.append(CloudPool(
            name=name,
            # The ID as Pulumi imports it: the ARM ID, spelled as gpu_knowledge.cloud_ids spells it.
            import_id=cloud_ids.aks_agent_pool(subscription, group, cluster, name),
            count=int(props.get("count") or 0),
            sizes=tuple(s for s in [_text(props.get("vmSize"))] if s),
            labels=_labels(props.get("nodeLabels")),
            system=props.get("mode") == "System",
            node_image=_text(props.get("nodeImageVersion")),
            os_sku=_text(props.get("osSKU")),
            zones=tuple(str(z) for z in props.get("availabilityZones") or []),
            max_surge=_text(upgrade.get("maxSurge")),
            gpu_driver=_text(gpu.get("driver")),
        ))
    return ManagedCluster(
        kubernetes_version=_text(properties.get("currentKubernetesVersion")) or _text(properties.get("kubernetesVersion")),
        location=_text(found.get("location")), pools=tuple(sorted(pools, key=lambda p: p.name)))


def read_eks(region: str, cluster: str, credential: Credential, *, endpoint: str | None = None,
             timeout: float = 30.0) -> ManagedCluster:
    """The EKS cluster and its managed node groups (``DescribeCluster``, ``ListNodegroups``,
    ``DescribeNodegroup``)."""
    api = _Api(endpoint or eks_endpoint(region), credential, timeout)
    base = f"/clusters/{quote(cluster)}"
    found = _mapping(_mapping(api.get(base), f"EKS cluster {cluster}").get("cluster") or {}, f"EKS cluster {cluster}")
    vpc = _object(found.get("resourcesVpcConfig"))
    names: list[str] = []
    query: dict[str, str] = {}
    for _ in range(MAX_PAGES):
        page = _mapping(api.get(f"{base}/node-groups", query or None), f"node groups of {cluster}")
        names += [n for n in page.get("nodegroups") or [] if isinstance(n, str)]
        token = _text(page.get("nextToken"))
        if token is None:
            break
        query = {"nextToken": token}
    pools, roles = [], set()
    for name in sorted(names):
        group = _mapping(_mapping(api.get(f"{base}/node-groups/{quote(name)}"), f"node group {name}")
                         .get("nodegroup") or {}, f"node group {name}")
        scaling, update = _object(group.get("scalingConfig")), _object(group.get("updateConfig"))
        template = _object(group.get("launchTemplate"))
        if _text(group.get("nodeRole")):
            roles.add(group["nodeRole"])
        pools.append(CloudPool(
            name=name, import_id=cloud_ids.eks_node_group(cluster, name),
            count=int(scaling.get("desiredSize") or 0),
            sizes=tuple(str(t) for t in group.get("instanceTypes") or []),
            labels=_labels(group.get("labels")),
            node_image=_text(group.get("releaseVersion")),
            ami_type=_text(group.get("amiType")), capacity_type=_text(group.get("capacityType")),
            max_unavailable=update.get("maxUnavailable") if isinstance(update.get("maxUnavailable"), int) else None,
            launch_template={"id": str(template.get("id")), "version": str(template.get("version"))}
            if template and template.get("id") else None,
            disk_size=group.get("diskSize") if isinstance(group.get("diskSize"), int) else None,
        ))
    return ManagedCluster(kubernetes_version=_text(found.get("version")), location=None, pools=tuple(pools),
                          subnets=tuple(str(s) for s in vpc.get("subnetIds") or []),
                          node_role=next(iter(roles)) if len(roles) == 1 else None)
