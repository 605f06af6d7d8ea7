"""The region's GPU quota against what surge needs (runbook section 2: "check quota before you rely on surge").

Where a pool relies on surge (:func:`surge_needs`: an image-owned pool whose newest generation is a cloud pool
that does not run all its nodes yet, whose nodes arrive beside the old generation's; or a rolling update of the
pool's cloud pools to the Kubernetes version the stack declares, which AKS surges by ``maxSurge`` and an EKS node
group launches first), the nodes that arrive must fit in the region's quota, or the cloud refuses them and the
upgrade stalls mid-pool with a node drained. The quota is
read with the stack's cloud identity, through :mod:`cloud_credentials`:

- Azure: the VM family of the pool's size (Resource SKUs API) and the usages of the subscription in the location
  (``Microsoft.Compute/locations/{location}/usages``: the family's vCPUs and the regional total, ``cores``); the
  subscription and location are the ones the pool's nodes report (``spec.providerID``, ``topology.kubernetes.io/
  region``).
- AWS: Service Quotas ``GetServiceQuota`` for the instance class's vCPU quota (:mod:`gpu_knowledge.cloud_quotas`)
  and its current use, the vCPUs of the region's pending and running instances of that class
  (``ec2:DescribeInstances``), in ``cluster.eks.region``.

A quota the identity cannot read is a "not read" warning that says why and what permission it lacks, never a
pass. :func:`judge` turns needs and quotas into findings; the check (``surge-quota``, :mod:`checks.disruption`)
reports them.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import urllib3

from checks.objects import Obj, labels_of, spec_of
from cloud_credentials.credentials import (AwsKeys, AwsSigV4, AzureToken, Credential, CredentialError,
                                           aws_keys_from_environment)
from fleetspec.membership import node_membership
from fleetspec.model import Cloud, DriverOwner, FleetSpec, NodePool
from gpu_knowledge import cloud_gpus, cloud_quotas, labels
from gpu_knowledge.capacity import node_group_surges

AZURE_MANAGEMENT = "https://management.azure.com"
AZURE_MANAGEMENT_SCOPE = "https://management.azure.com/.default"
AZURE_FIX = ("give the identity a role with Microsoft.Compute/locations/usages/read and Microsoft.Compute/skus/read "
             "on the subscription (Reader does); in CI azure/login with OIDC")
AWS_FIX = ("give the job AWS credentials of a role allowed servicequotas:GetServiceQuota and ec2:DescribeInstances "
           "in the region: in CI aws-actions/configure-aws-credentials with role-to-assume (OIDC)")
_SUBSCRIPTION = re.compile(r"^azure:///subscriptions/(?P<sub>[^/]+)/", re.IGNORECASE)
_EC2_NS = "{http://ec2.amazonaws.com/doc/2016-11-15/}"


class QuotaNotRead(Exception):
    """A quota could not be read: why, in one line, and the fix."""


@dataclass(frozen=True)
class SurgeNeed:
    """Nodes that arrive beside a pool's old ones during this change, and what each is."""

    pool: str
    size: str  # the AKS VM size or EC2 instance type of the arriving nodes
    nodes: int
    spot: bool  # EKS SPOT capacity: counted against the Spot requests quota
    why: str

    def vcpus(self, per_node: int) -> int:
        return self.nodes * per_node


@dataclass(frozen=True)
class Quota:
    """One quota as read: what it is, its limit and current use, in vCPUs, and the needs it must hold."""

    name: str  # in words, e.g. "Azure usage standardNDSH100v5Family in westeurope"
    limit: float
    used: float
    needs: tuple[tuple[SurgeNeed, int], ...] = field(default=())  # each need with its vCPUs per node


@dataclass(frozen=True)
class Judged:
    ok: bool | None  # None: not read
    subject: str
    message: str


@dataclass
class _Seen:
    """What the pool nodes say, per pool: nodes per generation, an instance type, zones, Kubernetes versions."""

    nodes: dict[int | None, int] = field(default_factory=dict)
    size: str | None = None
    zones: set[str] = field(default_factory=set)
    kubelets: set[str] = field(default_factory=set)


def _seen(spec: FleetSpec, pool_nodes: Iterable[Obj]) -> dict[str, _Seen]:
    out: dict[str, _Seen] = {}
    for node in pool_nodes:
        membership = node_membership(spec, labels_of(node))
        if membership is None:
            continue
        seen = out.setdefault(membership.pool.name, _Seen())
        generation = membership.generation.id if membership.generation else None
        seen.nodes[generation] = seen.nodes.get(generation, 0) + 1
        node_labels = labels_of(node)
        seen.size = seen.size or node_labels.get(labels.INSTANCE_TYPE)
        if node_labels.get(labels.TOPOLOGY_ZONE):
            seen.zones.add(node_labels[labels.TOPOLOGY_ZONE])
        kubelet = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
        if kubelet:
            seen.kubelets.add(kubelet.removeprefix("v").split("-", 1)[0].split("+", 1)[0])
    return out


def _other_kubernetes(declared: str | None, kubelets: set[str]) -> str | None:
    """A Kubernetes version the pool's nodes run other than ``declared`` (1.33 matches 1.33.5), or None."""
    if declared is None:
        return None
    want = declared.split(".")
    return next((k for k in sorted(kubelets) if k.split(".")[: len(want)] != want), None)


def _rolling_surge(spec: FleetSpec, pool: NodePool, seen: _Seen) -> tuple[int, str] | None:
    """The nodes a rolling update of the pool's cloud pools adds at once, where this change moves the pools'
    Kubernetes version (AKS: ``maxSurge`` of each agent pool; EKS: an update that launches first adds the larger of
    twice its zones and ``maxUnavailable``, on node groups of an EKS AMI, the only ones given a version)."""
    cloud_pools = [pool.generation_nodes(g) for g in pool.live_generations] or [pool.nodeCount]
    if pool.aks is not None and spec.cluster.aks is not None:
        other = _other_kubernetes(spec.cluster.aks.kubernetesVersion, seen.kubelets)
        if other is None:
            return None
        surge = sum(cloud_quotas.aks_surge_nodes(pool.aks.maxSurge, n) for n in cloud_pools)
        return surge, (f"Kubernetes {other} -> {spec.cluster.aks.kubernetesVersion}: AKS surges maxSurge "
                       f"{pool.aks.maxSurge} per agent pool")
    if pool.eks is not None and spec.cluster.eks is not None and pool.eks.launchTemplate is None:
        other = _other_kubernetes(spec.cluster.eks.kubernetesVersion, seen.kubelets)
        if other is None or not node_group_surges(pool.eks.updateStrategy, pool.eks.capacityType):
            return None
        each = max(2 * max(len(seen.zones), 1), pool.eks.maxUnavailable)
        return each * len(cloud_pools), (f"Kubernetes {other} -> {spec.cluster.eks.kubernetesVersion}: the node "
                                         f"group update launches {each} nodes before old ones leave")
    return None


def surge_needs(spec: FleetSpec, pool_nodes: Iterable[Obj]) -> tuple[list[SurgeNeed], list[str]]:
    """Per pool, the nodes this change adds beside the old ones: an image-owned pool's newest live generation's
    nodes the cluster does not run yet (a Capacity Block's reservation is its own quota), and a rolling update's
    surge where the change moves the pools' Kubernetes version (:func:`_rolling_surge`). An existing cluster's pools
    are not this stack's to add. Also the pools that surge but whose size is unknown: a launch template's instance
    type, and no node of the pool states it."""
    if spec.cluster.cloud == Cloud.EXISTING:
        return [], []
    seen = _seen(spec, pool_nodes)
    needs, untyped = [], []
    for pool in spec.nodePools:
        found = seen.get(pool.name, _Seen())
        if pool.eks is not None and pool.eks.capacityType == "CAPACITY_BLOCK":
            continue
        added: list[tuple[int, str]] = []
        newest = pool.newest_generation
        if spec.driver.owner == DriverOwner.IMAGE and newest is not None:
            declared = pool.generation_nodes(newest)
            missing = declared - found.nodes.get(newest.id, 0)
            if missing > 0:
                added.append((missing, f"generation {newest.id} ({missing} of its {declared} nodes not up yet) "
                                       "beside the old generation"))
        rolling = _rolling_surge(spec, pool, found)
        if rolling is not None:
            added.append(rolling)
        if not added:
            continue
        if pool.aks is not None:
            size: str | None = pool.aks.vmSize
        else:
            assert pool.eks is not None  # a pool on AKS or EKS
            size = pool.eks.instanceTypes[0] if pool.eks.instanceTypes else found.size
        if size is None:
            untyped.append(pool.name)
            continue
        spot = pool.eks is not None and pool.eks.capacityType == "SPOT"
        needs += [SurgeNeed(pool.name, size, nodes, spot, why) for nodes, why in added]
    return needs, untyped


def judge(quotas: Sequence[Quota]) -> list[Judged]:
    """Each quota against the surge it must hold: the vCPUs of every arriving node must fit in limit - use."""
    out = []
    for quota in quotas:
        needed = sum(need.vcpus(per_node) for need, per_node in quota.needs)
        free = quota.limit - quota.used
        what = "; ".join(f"pool {need.pool}: {need.nodes} x {need.size} ({per_node} vCPUs), {need.why}"
                         for need, per_node in quota.needs)
        text = (f"{quota.name}: {quota.used:g} of {quota.limit:g} vCPUs in use, {max(free, 0):g} free; surge needs "
                f"{needed} ({what})")
        if needed > free:
            out.append(Judged(False, quota.name, f"{text}: the cloud refuses the new nodes and the upgrade stalls "
                              "with a node drained; raise the quota or lower the nodes that arrive at once"))
        else:
            out.append(Judged(True, quota.name, text))
    return out


class CloudQuotas(Protocol):
    """Reads the quotas the needs count against, with the stack's cloud identity; raises QuotaNotRead."""

    def read(self, spec: FleetSpec, needs: Sequence[SurgeNeed], pool_nodes: Sequence[Obj]) -> list[Quota]: ...


# ---------------------------------------------------------------- HTTP, through cloud_credentials


class _Http:
    def __init__(self, credential: Credential, timeout: float) -> None:
        self.credential = credential
        self._pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout))

    def call(self, method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
        try:
            signed = self.credential.headers(method, url, body)
        except CredentialError as exc:
            raise QuotaNotRead(str(exc)) from None
        try:
            response = self._pool.request(method, url, body=body or None, headers={**(headers or {}), **signed})
        except urllib3.exceptions.HTTPError as exc:
            raise QuotaNotRead(f"{url.split('?')[0]}: no answer ({type(exc).__name__})") from None
        if response.status in (401, 403):
            raise QuotaNotRead(f"{url.split('?')[0]}: HTTP {response.status}: {self.credential.what} was refused: "
                               f"{self.credential.fix}")
        if response.status >= 300:
            raise QuotaNotRead(f"{url.split('?')[0]}: HTTP {response.status}: {_detail(response.data)}")
        return bytes(response.data)


def _detail(data: bytes) -> str:
    return " ".join(data.decode("utf-8", "replace").split())[:300]


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data or b"{}")
    except ValueError:
        raise QuotaNotRead(f"{where}: the answer is not JSON") from None


# ---------------------------------------------------------------- Azure


@dataclass
class AzureQuotas:
    """The Azure compute usages of the subscription and location the pool's nodes report."""

    token: Any = None  # an azure-identity credential; None: DefaultAzureCredential (environment, OIDC, CLI)
    endpoint: str = AZURE_MANAGEMENT
    timeout: float = 20.0

    def read(self, spec: FleetSpec, needs: Sequence[SurgeNeed], pool_nodes: Sequence[Obj]) -> list[Quota]:
        subscription, location = _azure_place(pool_nodes)
        http = _Http(AzureToken(AZURE_MANAGEMENT_SCOPE, self.token, fix=AZURE_FIX), self.timeout)
        base = f"{self.endpoint.rstrip('/')}/subscriptions/{quote(subscription)}/providers/Microsoft.Compute"
        skus = _pages(http, f"{base}/skus?" + urlencode({"api-version": "2021-07-01",
                                                         "$filter": f"location eq '{location}'"}))
        usages = {str((u.get("name") or {}).get("value", "")).lower(): u for u in
                  _pages(http, f"{base}/locations/{quote(location)}/usages?api-version=2023-09-01")}
        by_family: dict[str, list[tuple[SurgeNeed, int]]] = {}
        every: list[tuple[SurgeNeed, int]] = []
        for need in needs:
            sku = next((s for s in skus if s.get("resourceType") == "virtualMachines"
                        and str(s.get("name", "")).lower() == need.size.lower()), None)
            if sku is None or not sku.get("family"):
                raise QuotaNotRead(f"Azure offers no VM size {need.size} in {location} to subscription "
                                   f"{subscription} (Resource SKUs): pool {need.pool}")
            per_node = _capability(sku, "vCPUs") or _table_vcpus(need.size)
            if per_node is None:
                raise QuotaNotRead(f"VM size {need.size}: its vCPUs are stated neither by Azure nor by "
                                   f"{cloud_gpus.TABLE}")
            by_family.setdefault(str(sku["family"]), []).append((need, per_node))
            every.append((need, per_node))
        out = []
        for name, held in [*by_family.items(), (cloud_quotas.AZURE_REGIONAL_VCPUS, every)]:
            usage = usages.get(name.lower())
            if usage is None:
                raise QuotaNotRead(f"Azure reports no usage {name} in {location} for subscription {subscription}")
            label = (usage.get("name") or {}).get("localizedValue") or name
            out.append(Quota(f"Azure quota {label} ({name}) in {location}", float(usage.get("limit", 0)),
                             float(usage.get("currentValue", 0)), tuple(held)))
        return out


def _azure_place(nodes: Sequence[Obj]) -> tuple[str, str]:
    for node in nodes:
        match = _SUBSCRIPTION.match(str(spec_of(node).get("providerID") or ""))
        region = labels_of(node).get(labels.TOPOLOGY_REGION)
        if match and region:
            return match["sub"], region
    raise QuotaNotRead("no node of the stack's pools states its subscription (spec.providerID azure:///subscriptions"
                       f"/...) and location ({labels.TOPOLOGY_REGION})")


def _pages(http: _Http, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        document = _json(http.call("GET", next_url), next_url.split("?")[0])
        out.extend(v for v in document.get("value") or [] if isinstance(v, dict))
        next_url = document.get("nextLink")
    return out


def _capability(sku: dict[str, Any], name: str) -> int | None:
    for capability in sku.get("capabilities") or []:
        if capability.get("name") == name:
            try:
                return int(capability.get("value"))
            except (TypeError, ValueError):
                return None
    return None


def _table_vcpus(size: str) -> int | None:
    row = cloud_gpus.any_size(size)
    return row.vcpus if row else None


# ---------------------------------------------------------------- AWS


@dataclass
class AwsQuotas:
    """Service Quotas' vCPU quota of each instance class, and its use from the region's instances."""

    keys: Callable[[], AwsKeys | None] = aws_keys_from_environment  # the environment's, as CI's OIDC role sets them
    service_quotas: str = "https://servicequotas.{region}.amazonaws.com"
    ec2: str = "https://ec2.{region}.amazonaws.com"
    timeout: float = 20.0

    def read(self, spec: FleetSpec, needs: Sequence[SurgeNeed], pool_nodes: Sequence[Obj]) -> list[Quota]:
        assert spec.cluster.eks is not None  # read only on cloud: eks
        region = spec.cluster.eks.region
        grouped: dict[cloud_quotas.Ec2Quota, list[tuple[SurgeNeed, int]]] = {}
        for need in needs:
            quota = cloud_quotas.ec2_quota(need.size, need.spot)
            per_node = _table_vcpus(need.size)
            if quota is None or per_node is None:
                raise QuotaNotRead(f"instance type {need.size} (pool {need.pool}): no P or G vCPU quota, or its "
                                   f"vCPUs, is known to {cloud_gpus.TABLE} and gpu_knowledge.cloud_quotas")
            grouped.setdefault(quota, []).append((need, per_node))
        if not grouped:
            return []
        quotas_http = _Http(AwsSigV4(region, "servicequotas", self.keys, fix=AWS_FIX), self.timeout)
        ec2_http = _Http(AwsSigV4(region, "ec2", self.keys, fix=AWS_FIX), self.timeout)
        in_use = _ec2_vcpus(ec2_http, self.ec2.format(region=region))
        out = []
        for quota, held in grouped.items():
            url = self.service_quotas.format(region=region).rstrip("/") + "/"
            body = json.dumps({"ServiceCode": cloud_quotas.EC2_SERVICE_CODE, "QuotaCode": quota.code}).encode()
            answer = _json(quotas_http.call("POST", url, body, {
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": "ServiceQuotasV20190624.GetServiceQuota"}), url)
            value = (answer.get("Quota") or {}).get("Value")
            if not isinstance(value, int | float):
                raise QuotaNotRead(f"Service Quotas answered no value for {quota.code} ({quota.name}) in {region}")
            used = sum(v for (cls, spot), v in in_use.items() if cls in quota.prefixes and spot == quota.spot)
            out.append(Quota(f"AWS quota {quota.code} ({quota.name}) in {region}", float(value), float(used),
                             tuple(held)))
        return out


def _ec2_vcpus(http: _Http, endpoint: str) -> dict[tuple[str, bool], int]:
    """vCPUs of the region's pending and running instances, by instance class and Spot or not (a Capacity Block's
    instances count against their reservation, not these quotas)."""
    out: dict[tuple[str, bool], int] = {}
    token: str | None = None
    while True:
        query = [("Action", "DescribeInstances"), ("Version", "2016-11-15"), ("MaxResults", "1000"),
                 ("Filter.1.Name", "instance-state-name"), ("Filter.1.Value.1", "pending"),
                 ("Filter.1.Value.2", "running")]
        if token:
            query.append(("NextToken", token))
        url = f"{endpoint.rstrip('/')}/?{urlencode(query)}"
        try:
            root = ET.fromstring(http.call("GET", url))
        except ET.ParseError:
            raise QuotaNotRead(f"{endpoint}: DescribeInstances answered no XML") from None
        for item in root.iter(f"{_EC2_NS}instancesSet"):
            for instance in item.findall(f"{_EC2_NS}item"):
                kind = instance.findtext(f"{_EC2_NS}instanceType") or ""
                lifecycle = instance.findtext(f"{_EC2_NS}instanceLifecycle") or ""
                if lifecycle == "capacity-block":
                    continue
                cores = instance.findtext(f"{_EC2_NS}cpuOptions/{_EC2_NS}coreCount")
                threads = instance.findtext(f"{_EC2_NS}cpuOptions/{_EC2_NS}threadsPerCore")
                vcpus = (int(cores) * int(threads or 1) if cores else _table_vcpus(kind)) or 0
                key = (cloud_quotas.instance_class(kind), lifecycle == "spot")
                out[key] = out.get(key, 0) + vcpus
        token = root.findtext(f"{_EC2_NS}nextToken")
        if not token:
            return out


def reader_for(spec: FleetSpec) -> CloudQuotas | None:
    """The stack's cloud's quota reader (None on an existing cluster: no cloud pool is the stack's)."""
    if spec.cluster.cloud == Cloud.AKS:
        return AzureQuotas()
    if spec.cluster.cloud == Cloud.EKS:
        return AwsQuotas()
    return None


@dataclass(frozen=True)
class SurgeQuota:
    """What preflight read about surge and quota: the needs, and the judged quotas or why they were not read."""

    needs: tuple[SurgeNeed, ...]
    judged: tuple[Judged, ...]
    not_read: str | None = None


def read_surge_quota(spec: FleetSpec, pool_nodes: Sequence[Obj], reader: CloudQuotas | None) -> SurgeQuota:
    """Needs, then (where any) the quotas they count against, judged; a quota not read says why."""
    needs, untyped = surge_needs(spec, pool_nodes)
    if untyped:
        return SurgeQuota(tuple(needs), (), f"pools {', '.join(untyped)}: the launch template sets the instance "
                          "type and no node of the new generation states it yet")
    if not needs:
        return SurgeQuota((), ())
    if reader is None:
        return SurgeQuota(tuple(needs), (), "no cloud identity was given to read it")
    try:
        return SurgeQuota(tuple(needs), tuple(judge(reader.read(spec, needs, pool_nodes))))
    except QuotaNotRead as exc:
        return SurgeQuota(tuple(needs), (), str(exc))


def vcpus_needed(needs: Sequence[SurgeNeed]) -> str:
    """The needs in words, for a finding that could read no quota."""
    return "; ".join(f"pool {n.pool}: {n.nodes} x {n.size}, {n.why}" for n in needs)


__all__ = ["AWS_FIX", "AZURE_FIX", "AwsQuotas", "AzureQuotas", "CloudQuotas", "Judged", "Quota", "QuotaNotRead",
           "SurgeNeed", "SurgeQuota", "judge", "read_surge_quota", "reader_for", "surge_needs",
           "vcpus_needed"]
