"""The world `gpu-rollout verify` looks at, for its tests: a canary cluster right after its upgrade (the fake
API, seeded by tests/fakekube/fixtures.py and moved the way the operator and the validation job move it), model
servers behind the API server's pod proxy, and an hour of DCGM and vLLM history for a real Prometheus.

The cluster: the example canary stack's pool (three H100 NVL nodes) upgraded from 570.195.03 to 580.173.02
one node at a time, the last one ``SOAK_MINUTES`` ago (upgrade-done written by the operator then, the driver
pod recreated on the new image, the validation job's passing result on each node), and two nodes of the prod
pool still on the old driver serving the same model (``app: llm-chat, track: stable``), which the canary
compares against (``serving.baselineMatchLabels: {app: llm-chat}``).

The pod proxy: :class:`ProxyKube` answers ``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>`` the way
the API server does, by forwarding to the pod (here: the loopback server registered for it), and 503
"error trying to reach service" when nothing listens there.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from spec.load import load_stack_file
from spec.model import FleetSpec
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import OPERATOR_MANAGER, finish_upgrade, gpu_node, move_node, pod, seed
from tests.fakekube.server import ApiError, FakeKube
from tests.prometheus.server import History
from workload import result as job_result

OLD, NEW = "570.195.03", "580.173.02"
SOAK_MINUTES = 40  # the last canary node finished its upgrade this long ago
STEP = 30.0  # seconds between backfilled samples
HOUR = 3600.0
REQUESTS_PER_STEP = 60
TOKENS_PER_REQUEST = 100
# vLLM's e2e latency histogram buckets and the share of requests in each: p95 1.75 s.
BUCKETS = ("0.5", "1.0", "1.5", "2.0", "2.5", "5.0", "+Inf")
NORMAL = (0.2, 0.5, 0.2, 0.1, 0.0, 0.0, 0.0)
SLOWER = (0.0, 0.2, 0.5, 0.2, 0.1, 0.0, 0.0)  # one bucket up: p95 2.25 s (+29 %), mean latency +50 %
MEAN_LATENCY = {NORMAL: 1.0, SLOWER: 1.5}


class ProxyKube(FakeKube):
    """The fake API plus the pod proxy subresource."""

    def __init__(self) -> None:
        super().__init__()
        self.backends: dict[tuple[str, str], str] = {}  # (namespace, pod) -> base URL of what listens in it
        self.proxied: list[tuple[str, str, str, int, str]] = []  # (method, namespace, pod, port, path)

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any, content_type: str,
               user_agent: str = "") -> Any:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if len(parts) >= 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and parts[6] == "proxy":
            return self._proxy(method, parts[3], parts[5], "/".join(parts[7:]), body)
        return super().handle(method, path, query, body, content_type, user_agent)

    def _proxy(self, method: str, namespace: str, target: str, rest: str, body: Any) -> Any:
        name, _, port = target.partition(":")
        with self.lock:
            self.counts["proxy"] += 1
            if (namespace, name) not in self.store["pods"]:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
        self.proxied.append((method, namespace, name, int(port or 80), rest))
        base = self.backends.get((namespace, name))
        reach = f"error trying to reach service: dial tcp 10.244.1.7:{port}: connect: connection refused"
        if base is None:
            raise ApiError(503, "ServiceUnavailable", reach)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{base}/{rest}", data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, "Proxied", error.read().decode(errors="replace")[:200]) from None
        except OSError:
            raise ApiError(503, "ServiceUnavailable", reach) from None
        return json.loads(raw) if raw else {}


# ---------------------------------------------------------------- the stack and the project


def write_stack(directory: Path, **serving: Any) -> Path:
    """The example canary stack, its model compared against the prod pods of the same model."""
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.canary.yaml").read_text(encoding="utf-8"))
    model = doc["config"]["gpu-driver-upgrade:models"][0]
    model["serving"] = {"baselineMatchLabels": {"app": "llm-chat"}, **serving}
    path = directory / "Pulumi.canary.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def git_project(directory: Path) -> str:
    """A project folder that is a git checkout with one commit; returns the commit."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(directory), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "canary"]):
        subprocess.run(["git", "-C", str(directory), *args], check=True, env=env, capture_output=True, timeout=30)
    return subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True, timeout=30).stdout.strip()


# ---------------------------------------------------------------- the cluster


@dataclass
class World:
    fake: ProxyKube
    spec: FleetSpec
    stack_file: Path
    now: float
    finished: dict[str, float]  # canary node -> when its upgrade finished
    canary_pods: list[str]  # the canary model's pods (namespace inference)
    old_nodes: list[str]
    old_pods: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def canary_nodes(self) -> list[str]:
        return sorted(self.finished)

    @property
    def soak_start(self) -> float:
        return max(self.finished.values())


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_result(fake: FakeKube, spec: FleetSpec, node: str, at: float, *, failed_check: str | None = None) -> None:
    """The validation job's result on ``node`` for the new driver, as the job patches it (workload.result)."""
    checks = [job_result.Check(c, job_result.PASS, "ok") for c in job_result.CHECKS]
    if failed_check:
        checks = [job_result.Check(c.id, job_result.FAIL, "12.0 tokens/s, below 40") if c.id == failed_check else c
                  for c in checks]
    assert spec.validation is not None
    result = job_result.Result(
        node=node, pool="gpucanary", stage="canary", cluster=spec.cluster.name, targetDriver=NEW,
        image=spec.validation.image, model=spec.validation.model, program="sha256:" + "ab" * 32,
        startedAt=_iso(at + 60), finishedAt=_iso(at + 300), durationSeconds=240.0, checks=checks,
        measurements={"tokensPerSecond": 182.5, "timeToFirstTokenSeconds": 0.041})
    fake.update("nodes", node, job_result.node_patch(result), manager="gpu-validation", at=at + 300)


def build(fake: ProxyKube, directory: Path, now: float | None = None, **serving: Any) -> World:
    """Seed ``fake`` with the canary cluster after its upgrade and the prod pods on the old driver."""
    now = time.time() if now is None else now
    stack_file = write_stack(directory, **serving)
    spec = load_stack_file(stack_file)
    nodes = seed(fake, spec)["gpucanary"]
    namespace = spec.gpuOperator.namespace
    finished = {}
    for index, node in enumerate(sorted(nodes)):
        done = now - SOAK_MINUTES * 60 - (len(nodes) - 1 - index) * 300  # one node every 5 minutes
        for state in ("upgrade-required", "cordon-required", "pod-restart-required", "validation-required"):
            move_node(fake, node, state, done - 600, event=False)
        finish_upgrade(fake, node, NEW, at=done)
        for driver_pod in fake.objects("pods"):
            if (driver_pod["metadata"]["namespace"] == namespace and driver_pod["spec"]["nodeName"] == node
                    and driver_pod["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver"):
                image = driver_pod["spec"]["containers"][0]["image"].replace(OLD, NEW)
                fake.update("pods", driver_pod["metadata"]["name"], {"spec": {"containers": [
                    {**driver_pod["spec"]["containers"][0], "image": image}]}}, namespace)
        write_result(fake, spec, node, done)
        finished[node] = done
    canary_pods = sorted(p["metadata"]["name"] for p in fake.objects("pods")
                         if p["metadata"]["labels"].get("track") == "canary")

    prod = load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
    pool = prod.pool("gpuh100")
    old_nodes, old_pods = [], []
    for index in range(2):
        node = fake.add(gpu_node(prod, pool, index))["metadata"]["name"]
        fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}}},
                    manager=OPERATOR_MANAGER, at=now - 5 * HOUR)
        old_nodes.append(node)
        name = f"llm-chat-7d9f8c-{index:03d}"
        fake.add(pod(name, "inference", node, {"app": "llm-chat", "track": "stable"},
                     [{"name": "server", "image": "vllm/vllm-openai:v0.10.2"}], owner=("ReplicaSet", "llm-chat-7d9f8c")))
        old_pods.append(name)
    fake.reset_counts()
    return World(fake, spec, stack_file, now, finished, canary_pods, old_nodes, old_pods)


# ---------------------------------------------------------------- the history Prometheus holds


def _dcgm(history: History, node: str, driver: str, at: float, xid: float) -> None:
    base = {"gpu": "0", "UUID": f"GPU-{abs(hash(node)) % 10**8:08d}", "device": "nvidia0",
            "modelName": "NVIDIA H100 NVL", "Hostname": node, "DCGM_FI_DRIVER_VERSION": driver}
    history.add("DCGM_FI_DEV_GPU_UTIL", base, at, 63.0)
    history.add("DCGM_FI_DEV_XID_ERRORS", {**base, "err_code": str(int(xid))}, at, xid)


def _vllm(history: History, pod_name: str, at: float, step: int, shares: tuple[float, ...]) -> None:
    labels = {"namespace": "inference", "pod": pod_name, "model_name": "llm-chat"}
    requests = REQUESTS_PER_STEP * step
    cumulative = 0.0
    for bucket, share in zip(BUCKETS, shares, strict=True):
        cumulative += share
        history.add("vllm:e2e_request_latency_seconds_bucket", {**labels, "le": bucket}, at,
                    round(requests * min(cumulative, 1.0), 6))
    history.add("vllm:e2e_request_latency_seconds_sum", labels, at, requests * MEAN_LATENCY[shares])
    history.add("vllm:e2e_request_latency_seconds_count", labels, at, float(requests))
    history.add("vllm:generation_tokens_total", labels, at, float(requests * TOKENS_PER_REQUEST))


def history(world: World, *, slower: bool = False, xid_on: str | None = None, xid: int = 79,
            lost_driver_on: str | None = None) -> History:
    """An hour up to now: DCGM for every GPU node (the canary's on the old driver until its upgrade finished,
    then on the new one; a 45 while its pods were deleted, a 43 after), vLLM for the old pods all hour and for
    the canary pods since the soak started; ``slower`` makes the canary pods slower, ``xid_on`` gives that node
    ``xid`` after its upgrade, ``lost_driver_on`` makes DCGM report the old driver on that node still."""
    out = History()
    start, end = world.now - HOUR, world.now - 15
    steps = int((end - start) // STEP)
    for i in range(steps + 1):
        at = start + i * STEP
        for node, done in world.finished.items():
            if at < done - 900:  # the old driver, until its driver pod was deleted
                _dcgm(out, node, OLD, at, 45.0 if at >= done - 1080 else 0.0)
            elif at >= done:
                value = 0.0
                if at >= done + 300:
                    value = 43.0
                if node == xid_on and at >= done + 600:
                    value = float(xid)
                _dcgm(out, node, OLD if node == lost_driver_on else NEW, at, value)
        for node in world.old_nodes:
            _dcgm(out, node, OLD, at, 0.0)
        for pod_name in world.old_pods:
            _vllm(out, pod_name, at, i, NORMAL)
        if at >= world.soak_start:
            for pod_name in world.canary_pods:
                _vllm(out, pod_name, at, i - int((world.soak_start - start) // STEP), SLOWER if slower else NORMAL)
    return out
