"""A loopback fake of the two cloud APIs `init --from-cluster` reads: Azure Resource Manager's managed cluster and
agent pools, and the EKS API's cluster and managed node groups, answering GETs with what a team's cluster runs (the
documents' shapes as the APIs return them), and recording each request's path and headers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback_http import FakeHandler

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
GROUP, AKS_CLUSTER = "rg-team-a", "aks-team-a"
EKS_CLUSTER, REGION = "eks-team-a", "us-east-1"
ARM_BASE = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.ContainerService/"
            f"managedClusters/{AKS_CLUSTER}")


def agent_pool(name: str, vm_size: str, count: int, **properties: Any) -> dict[str, Any]:
    return {"id": f"{ARM_BASE}/agentPools/{name}", "name": name,
            "properties": {"count": count, "vmSize": vm_size, "mode": "User", "osSKU": "Ubuntu2204",
                           "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202511.10.0",
                           "upgradeSettings": {"maxSurge": "1"}, **properties}}


AGENT_POOLS = [
    {"id": f"{ARM_BASE}/agentPools/system", "name": "system",
     "properties": {"count": 3, "vmSize": "Standard_D4s_v5", "mode": "System"}},
    agent_pool("h100canary", "Standard_NC40ads_H100_v5", 3, gpuProfile={"driver": "None"}),
    agent_pool("h100serve", "Standard_NC40ads_H100_v5", 6, gpuProfile={"driver": "None"},
               nodeLabels={"team": "search"}, availabilityZones=["1", "2"]),
    agent_pool("cpupool", "Standard_D8s_v5", 2),
]

NODE_GROUPS = {
    "gpu-h100-g1": {"nodegroupName": "gpu-h100-g1", "instanceTypes": ["p5.48xlarge"],
                    "amiType": "AL2023_x86_64_NVIDIA", "capacityType": "ON_DEMAND",
                    "releaseVersion": "1.33.5-20251120", "scalingConfig": {"desiredSize": 2, "minSize": 2,
                                                                          "maxSize": 3},
                    "updateConfig": {"maxUnavailable": 1}, "nodeRole": "arn:aws:iam::123456789012:role/gpu-nodes"},
    "gpu-a10g-g2": {"nodegroupName": "gpu-a10g-g2", "instanceTypes": ["g5.12xlarge"],
                    "amiType": "AL2023_x86_64_NVIDIA", "capacityType": "ON_DEMAND",
                    "releaseVersion": "1.33.5-20251120", "scalingConfig": {"desiredSize": 4},
                    "nodeRole": "arn:aws:iam::123456789012:role/gpu-nodes"},
    "general": {"nodegroupName": "general", "instanceTypes": ["m6i.large"], "scalingConfig": {"desiredSize": 2},
                "nodeRole": "arn:aws:iam::123456789012:role/gpu-nodes"},
}


@dataclass
class CloudApi:
    url: str
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    refuse: bool = False  # answer 403, as an API does to a credential it does not accept


def _answer(path: str, query: dict[str, list[str]]) -> Any:
    if path == ARM_BASE:
        return {"location": "westeurope", "properties": {"currentKubernetesVersion": "1.33.5"}}
    if path == f"{ARM_BASE}/agentPools":  # two pages, as ARM pages a long list
        if query.get("page") == ["2"]:
            return {"value": AGENT_POOLS[2:]}
        return {"value": AGENT_POOLS[:2], "nextLink": "NEXT?api-version=2024-09-01&page=2"}
    if path == f"/clusters/{EKS_CLUSTER}":
        return {"cluster": {"name": EKS_CLUSTER, "version": "1.33",
                            "resourcesVpcConfig": {"subnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0b1c2d3e4f5a60719"]}}}
    if path == f"/clusters/{EKS_CLUSTER}/node-groups":
        names = sorted(NODE_GROUPS)
        if query.get("nextToken") == ["t2"]:
            return {"nodegroups": names[2:]}
        return {"nodegroups": names[:2], "nextToken": "t2"}
    prefix = f"/clusters/{EKS_CLUSTER}/node-groups/"
    if path.startswith(prefix) and path[len(prefix):] in NODE_GROUPS:
        return {"nodegroup": NODE_GROUPS[path[len(prefix):]]}
    return None


@contextmanager
def serve() -> Iterator[CloudApi]:
    api = CloudApi("")

    class Handler(FakeHandler):
        def do_GET(self) -> None:  # noqa: N802 (the server's method name)
            parts = urlsplit(self.path)
            api.requests.append((self.path, dict(self.headers)))
            found = None if api.refuse else _answer(parts.path, parse_qs(parts.query))
            status = 403 if api.refuse else 200 if found is not None else 404
            if found is not None and "nextLink" in found:
                found["nextLink"] = f"{api.url}{ARM_BASE}/agentPools?api-version=2024-09-01&page=2"
            self.send_json(status, found if found is not None else {"error": "not found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
