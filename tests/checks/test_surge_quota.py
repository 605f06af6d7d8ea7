"""surge-quota: where a pool relies on surge (a new generation's nodes arriving beside the old), preflight reads the
region's GPU quota with the stack's cloud identity and fails when surge does not fit. The clouds are loopback fakes
that answer only a request signed for their service (SigV4 for servicequotas and ec2) or carrying the Azure
identity's bearer token, as Service Quotas, EC2 and Azure Resource Manager do; a refused identity is "not read"."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from azure.core.credentials import AccessToken

from checks import disruption
from checks.inventory import Inventory
from checks.quota import AwsQuotas, AzureQuotas, read_surge_quota, surge_needs
from checks.results import Status
from cloud_credentials.credentials import AwsKeys
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.conftest import aks_image_owned, stack_config
from tests.loopback_http import FakeHandler

Answer = Callable[[str, str, dict[str, str], bytes], tuple[int, bytes]]


class _Handler(FakeHandler):
    answer: Answer
    seen: list[tuple[str, str, dict[str, str]]]

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.seen.append((self.command, self.path, headers))
        status, data = self.answer(self.command, self.path, headers, body)
        self.send_body(status, data, content_type=None)

    do_GET = do_POST = _serve  # noqa: N815 - the handler's names


@pytest.fixture
def cloud() -> Iterator[Callable[[Answer], tuple[str, list[tuple[str, str, dict[str, str]]]]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> tuple[str, list[tuple[str, str, dict[str, str]]]]:
        seen: list[tuple[str, str, dict[str, str]]] = []
        handler = type("Handler", (_Handler,), {"answer": staticmethod(answer), "seen": seen})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _node(name: str, node_labels: dict[str, str], provider: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": node_labels}, "spec": {"providerID": provider}}


# ---------------------------------------------------------------- EKS: Service Quotas and EC2, SigV4


KEYS = AwsKeys("AKIDEXAMPLE", "secret")


def _eks() -> FleetSpec:
    return spec_from_config(stack_config("eks-prod"))


def _eks_nodes() -> list[dict[str, Any]]:
    """gpu-a10g runs its newest generation (4) whole; gpu-l40s runs only generation 1: generation 2's four
    g6e.12xlarge (48 vCPUs each) are the surge."""
    nodes = [_node(f"a10g-{i}", {labels.EKS_NODE_GROUP: "gpu-a10g-g4", labels.INSTANCE_TYPE: "g5.12xlarge"})
             for i in range(3)]
    nodes += [_node(f"l40s-{i}", {labels.EKS_NODE_GROUP: "gpu-l40s-g1", labels.INSTANCE_TYPE: "g6e.12xlarge"})
              for i in range(4)]
    return nodes


def _instance(kind: str, lifecycle: str = "") -> str:
    cores = {"g5.12xlarge": 24, "g6e.12xlarge": 24, "p5.48xlarge": 96}[kind]
    life = f"<instanceLifecycle>{lifecycle}</instanceLifecycle>" if lifecycle else ""
    return (f"<item><instanceType>{kind}</instanceType>{life}<cpuOptions><coreCount>{cores}</coreCount>"
            "<threadsPerCore>2</threadsPerCore></cpuOptions></item>")


def _aws(limit: float, refuse: bool = False) -> Answer:
    """Service Quotas answers ``limit`` for L-DB2E81BA; EC2 runs 3 g5.12xlarge, 4 g6e.12xlarge and a p5 (a spot g5
    counts against another quota), over two pages."""
    pages = {"": ("<nextToken>page2</nextToken>", [_instance("g5.12xlarge")] * 3 + [_instance("p5.48xlarge")]),
             "page2": ("", [_instance("g6e.12xlarge")] * 4 + [_instance("g5.12xlarge", "spot")])}

    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        authorization = headers.get("authorization", "")
        if method == "POST":
            if refuse or "/us-east-1/servicequotas/aws4_request" not in authorization:
                return 403, b'{"__type":"AccessDeniedException"}'
            assert headers.get("x-amz-target") == "ServiceQuotasV20190624.GetServiceQuota"
            asked = json.loads(body)
            assert asked == {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"}
            return 200, json.dumps({"Quota": {"QuotaCode": "L-DB2E81BA", "Value": limit}}).encode()
        if "/us-east-1/ec2/aws4_request" not in authorization:
            return 403, b"<Response><Errors><Error><Code>UnauthorizedOperation</Code></Error></Errors></Response>"
        query = parse_qs(urlsplit(path).query)
        assert query["Action"] == ["DescribeInstances"]
        token, items = pages[query.get("NextToken", [""])[0]]
        xml = ('<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet><item>'
               f"<instancesSet>{''.join(items)}</instancesSet></item></reservationSet>{token}"
               "</DescribeInstancesResponse>")
        return 200, xml.encode()

    return answer


def _aws_reader(url: str, keys: AwsKeys | None = KEYS) -> AwsQuotas:
    return AwsQuotas(keys=lambda: keys, service_quotas=url, ec2=url)


def test_eks_surge_counts_only_the_new_generation_not_yet_up() -> None:
    needs, untyped = surge_needs(_eks(), _eks_nodes())
    assert untyped == []
    assert [(n.pool, n.size, n.nodes) for n in needs] == [("gpu-l40s", "g6e.12xlarge", 4)]


def test_eks_surge_beyond_the_quota_fails_naming_quota_use_and_need(cloud: Any) -> None:
    url, seen = cloud(_aws(limit=384))
    found = read_surge_quota(_eks(), _eks_nodes(), _aws_reader(url))
    assert found.not_read is None
    [judged] = found.judged
    assert judged.ok is False
    # In use: 3 x 48 (g5) + 4 x 48 (g6e) = 336 of 384; the spot g5 and the p5 count elsewhere. Surge: 4 x 48.
    assert "L-DB2E81BA (Running On-Demand G and VT instances) in us-east-1" in judged.message
    assert "336 of 384 vCPUs in use, 48 free; surge needs 192" in judged.message
    assert "pool gpu-l40s: 4 x g6e.12xlarge (48 vCPUs)" in judged.message
    assert sum(1 for method, _, _ in seen if method == "GET") == 2  # both pages of DescribeInstances


def test_eks_surge_within_the_quota_passes(cloud: Any) -> None:
    url, _ = cloud(_aws(limit=1024))
    [judged] = read_surge_quota(_eks(), _eks_nodes(), _aws_reader(url)).judged
    assert judged.ok is True and "688 free; surge needs 192" in judged.message


def test_an_identity_that_cannot_read_quotas_is_not_read_never_a_pass(cloud: Any) -> None:
    url, _ = cloud(_aws(limit=1024, refuse=True))
    found = read_surge_quota(_eks(), _eks_nodes(), _aws_reader(url))
    assert found.judged == ()
    assert found.not_read is not None and "HTTP 403" in found.not_read
    assert "servicequotas:GetServiceQuota" in found.not_read
    nokeys = read_surge_quota(_eks(), _eks_nodes(), _aws_reader(url, keys=None))
    assert nokeys.not_read is not None and "AWS_ACCESS_KEY_ID" in nokeys.not_read
    inventory = _inventory(_eks(), _eks_nodes())
    inventory.surge_quota = found
    [finding] = disruption.check_surge_quota(inventory)
    assert finding.status == Status.WARN and finding.message.startswith("quota not read: ")
    assert "pool gpu-l40s: 4 x g6e.12xlarge" in finding.message


def test_a_generation_already_up_needs_no_quota() -> None:
    nodes = _eks_nodes() + [_node(f"l40s-new-{i}", {labels.EKS_NODE_GROUP: "gpu-l40s-g2"}) for i in range(4)]
    assert surge_needs(_eks(), nodes) == ([], [])
    [finding] = disruption.check_surge_quota(_inventory(_eks(), nodes))
    assert finding.status == Status.PASS and "no pool relies on surge" in finding.message


# ---------------------------------------------------------------- AKS: Azure Resource Manager, bearer token


class _Token:
    def get_token(self, *scopes: str, **_: Any) -> AccessToken:
        assert scopes == ("https://management.azure.com/.default",)
        return AccessToken("arm-token", 4102444800)


def _azure(family_limit: float, cores_limit: float = 1000) -> Answer:
    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        if headers.get("authorization") != "Bearer arm-token":
            return 401, b'{"error":{"code":"InvalidAuthenticationToken"}}'
        parts = urlsplit(path)
        assert parts.path.startswith("/subscriptions/sub-1/providers/Microsoft.Compute/")
        if parts.path.endswith("/skus"):
            assert parse_qs(parts.query)["$filter"] == ["location eq 'westeurope'"]
            return 200, json.dumps({"value": [
                {"resourceType": "disks", "name": "Premium_LRS"},
                {"resourceType": "virtualMachines", "name": "Standard_ND96isr_H100_v5",
                 "family": "standardNDSH100v5Family", "capabilities": [{"name": "vCPUs", "value": "96"}]}]}).encode()
        assert parts.path.endswith("/locations/westeurope/usages")
        if "page=2" in parts.query:
            return 200, json.dumps({"value": [{"name": {"value": "cores", "localizedValue": "Total Regional vCPUs"},
                                               "currentValue": 400, "limit": cores_limit}]}).encode()
        host = headers["host"]
        return 200, json.dumps({"value": [
            {"name": {"value": "standardNDSH100v5Family", "localizedValue": "Standard NDSH100v5 Family vCPUs"},
             "currentValue": 384, "limit": family_limit}],
            "nextLink": f"http://{host}{parts.path}?api-version=2023-09-01&page=2"}).encode()

    return answer


def _aks() -> FleetSpec:
    return spec_from_config(aks_image_owned())


def _aks_nodes() -> list[dict[str, Any]]:
    """gpuh100 runs generation 1 whole (4 nodes); generation 2 is not up: four 96-vCPU nodes arrive."""
    return [_node(f"aks-gpuh100g1-{i}", {labels.AKS_AGENT_POOL: "gpuh100g1", labels.TOPOLOGY_REGION: "westeurope"},
                  "azure:///subscriptions/sub-1/resourceGroups/mc_rg/providers/Microsoft.Compute/"
                  f"virtualMachineScaleSets/aks-gpuh100g1/virtualMachines/{i}") for i in range(4)]


def _azure_reader(url: str) -> AzureQuotas:
    return AzureQuotas(token=_Token(), endpoint=url)


def test_aks_surge_beyond_the_family_quota_fails(cloud: Any) -> None:
    url, _ = cloud(_azure(family_limit=512))
    family, regional = read_surge_quota(_aks(), _aks_nodes(), _azure_reader(url)).judged
    assert family.ok is False
    assert family.subject == "Azure quota Standard NDSH100v5 Family vCPUs (standardNDSH100v5Family) in westeurope"
    assert "384 of 512 vCPUs in use, 128 free; surge needs 384" in family.message
    assert "pool gpuh100: 4 x Standard_ND96isr_H100_v5 (96 vCPUs), generation 2" in family.message
    assert regional.ok is True and "(cores)" in regional.subject and "600 free" in regional.message


def test_aks_surge_beyond_the_regional_quota_fails(cloud: Any) -> None:
    url, _ = cloud(_azure(family_limit=2000, cores_limit=700))
    family, regional = read_surge_quota(_aks(), _aks_nodes(), _azure_reader(url)).judged
    assert family.ok is True and regional.ok is False and "300 free; surge needs 384" in regional.message


def test_aks_refused_token_and_unknown_place_are_not_read(cloud: Any) -> None:
    url, _ = cloud(_azure(family_limit=2000))

    class _Other(_Token):
        def get_token(self, *scopes: str, **_: Any) -> AccessToken:
            return AccessToken("another", 4102444800)

    refused = AzureQuotas(token=_Other(), endpoint=url)
    found = read_surge_quota(_aks(), _aks_nodes(), refused)
    assert found.judged == () and found.not_read is not None and "HTTP 401" in found.not_read
    assert "Microsoft.Compute/locations/usages/read" in found.not_read
    nowhere = [_node(n["metadata"]["name"], {labels.AKS_AGENT_POOL: "gpuh100g1"}) for n in _aks_nodes()]
    unplaced = read_surge_quota(_aks(), nowhere, _azure_reader(url))
    assert unplaced.not_read is not None and "subscription" in unplaced.not_read


def test_operator_owned_pools_rely_on_no_surge() -> None:
    spec = spec_from_config(stack_config("prod"))
    assert surge_needs(spec, _aks_nodes()) == ([], [])
    [finding] = disruption.check_surge_quota(_inventory(spec, []))
    assert finding.status == Status.PASS


def test_without_a_reader_the_needed_surge_is_a_warning() -> None:
    [finding] = disruption.check_surge_quota(_inventory(_aks(), _aks_nodes()))
    assert finding.status == Status.WARN and "no cloud identity was given" in finding.message


def _inventory(spec: FleetSpec, nodes: list[dict[str, Any]]) -> Inventory:
    return Inventory(spec=spec, nodes=nodes, pool_nodes=nodes, gpu_nodes=nodes, pods=[], deployments=[], pdbs=[],
                     operator_daemonsets=[], cluster_policies=None, nvidia_drivers=None)


def test_surge_quota_gates_the_fleet_train() -> None:
    from checks.fleet import GATING_CHECKS

    assert "surge-quota" in GATING_CHECKS  # fleet advance brings no stack up whose surge does not fit


# ---------------------------------------------------------------- a rolling update's surge: another Kubernetes version


def _kubelet(node: dict[str, Any], version: str, zone: str = "") -> dict[str, Any]:
    node["status"] = {"nodeInfo": {"kubeletVersion": version}}
    if zone:
        node["metadata"]["labels"][labels.TOPOLOGY_ZONE] = zone
    return node


def test_an_aks_kubernetes_upgrade_surges_max_surge_on_every_pool_even_operator_owned() -> None:
    spec = spec_from_config(stack_config("prod"))  # operator-owned, kubernetesVersion 1.33.5
    pools = {p.name: p for p in spec.nodePools}
    nodes = [_kubelet(_node(f"aks-{name}-{i}", {labels.AKS_AGENT_POOL: name}), "v1.32.7")
             for name in pools for i in range(2)]
    needs, _ = surge_needs(spec, nodes)
    assert {n.pool for n in needs} == set(pools)
    for need in needs:
        pool = pools[need.pool]
        assert pool.aks is not None and need.size == pool.aks.vmSize
        assert need.why.startswith(f"Kubernetes 1.32.7 -> 1.33.5: AKS surges maxSurge {pool.aks.maxSurge}")
    assert surge_needs(spec, [_kubelet(n, "v1.33.5") for n in nodes]) == ([], [])


@pytest.mark.parametrize(("max_surge", "nodes", "added"), [("1", 8, 1), ("3", 8, 3), ("33%", 8, 3), ("10%", 4, 1),
                                                           ("100%", 4, 4)])
def test_aks_max_surge_is_a_count_or_a_share_of_the_pool_rounded_up(max_surge: str, nodes: int, added: int) -> None:
    from gpu_knowledge.cloud_quotas import aks_surge_nodes

    assert aks_surge_nodes(max_surge, nodes) == added


def test_an_eks_version_update_launches_twice_the_zones_first_but_not_on_a_capacity_block() -> None:
    nodes = [_kubelet(n, "v1.32.9-eks-113cf36", zone=f"us-east-1{'abc'[i % 3]}")
             for i, n in enumerate(_eks_nodes())]
    needs, _ = surge_needs(_eks(), nodes)
    rolling = {n.pool: n.nodes for n in needs if n.why.startswith("Kubernetes 1.32.9 -> 1.33")}
    # Each node group launches 2 x 3 zones at once: gpu-a10g has one live generation, gpu-l40s two (each its own
    # node group); gpu-h100 is a Capacity Block (its reservation, not a quota).
    assert rolling == {"gpu-a10g": 6, "gpu-l40s": 12}
