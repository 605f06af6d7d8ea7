"""The world `gpu-rollout verify` looks at, for its tests: a canary cluster right after its upgrade (the fake
API, seeded by tests/fakekube/fixtures.py and moved the way the operator and the validation job move it), model
servers behind the API server's pod proxy, and an hour of DCGM and vLLM history for a real Prometheus.

The cluster: an example canary stack's pools (by default the AKS canary: three H100 NVL nodes, one A100 and one
T4) upgraded from 570.195.03 to 580.173.02 one node at a time, the last one ``SOAK_MINUTES`` ago (operator-owned:
upgrade-done written by the operator then and the driver pod recreated on the new image; image-owned: the newest
generation's nodes, where the canary model's pods moved), the validation job's passing result on each node, and
two nodes of the prod pool still on the old driver serving the same model (``app: llm-chat, track: stable``),
which the canary compares against (``serving.baselineMatchLabels: {app: llm-chat}``).

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

from spec.load import load_stack_file, read_stack_file, spec_from_config
from spec.model import DriverOwner, FleetSpec, NodePool
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import (OPERATOR_MANAGER, finish_upgrade, generation_nodes, gpu_node, move_node, pod,
                                     seed)
from tests.fakekube.server import ApiError, FakeKube
from tests.prometheus.server import History
from workload import result as job_result

OLD, NEW = "570.195.03", "580.173.02"
SOAK_MINUTES = 40  # the last canary node finished its upgrade this long ago
STEP = 30.0  # seconds between backfilled samples
SOAK_STEP = 300.0  # seconds between DCGM samples of a soak before the last hour
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
    """The example canary stack, its model compared against the prod pods of the same model (as the example
    declares), with ``serving`` settings added."""
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.canary.yaml").read_text(encoding="utf-8"))
    model = doc["config"]["gpu-driver-upgrade:models"][0]
    model["serving"] = {**model.get("serving", {}), "baselineMatchLabels": {"app": "llm-chat"}, **serving}
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
    pool_of: dict[str, NodePool]  # canary node -> its pool
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


def write_result(fake: FakeKube, spec: FleetSpec, node: str, at: float, *, failed_check: str | None = None,
                 pool: str = "gpucanary") -> None:
    """The validation job's result on ``node`` of ``pool`` for the new driver, as the job patches it
    (workload.result), the job started a minute after ``at``."""
    checks = [job_result.Check(c, job_result.PASS, "ok") for c in job_result.CHECKS]
    if failed_check:
        checks = [job_result.Check(c.id, job_result.FAIL, "12.0 tokens/s, below 40") if c.id == failed_check else c
                  for c in checks]
    assert spec.validation is not None
    result = job_result.Result(
        node=node, pool=pool, stage="canary", cluster=spec.cluster.name, targetDriver=NEW,
        image=spec.validation.image, model=spec.validation.model, program="sha256:" + "ab" * 32,
        startedAt=_iso(at + 60), finishedAt=_iso(at + 300), durationSeconds=240.0, checks=checks,
        measurements={"tokensPerSecond": 182.5, "timeToFirstTokenSeconds": 0.041})
    fake.update("nodes", node, job_result.node_patch(result), manager="gpu-validation", at=at + 300)


def promoted_from(canary: str) -> FleetSpec:
    """The example prod stack promoted from the example stack ``canary`` (its ``promotion.canaryStack``)."""
    for path in sorted(PROJECT_DIR.glob("Pulumi.*.yaml")):
        spec = spec_from_config(read_stack_file(path), source=str(path))
        if spec.promotion is not None and spec.promotion.canaryStack.rsplit("/", 1)[-1] == canary:
            return spec
    raise LookupError(f"no example prod stack names {canary} as its canary")


def _upgrade_operator_node(fake: ProxyKube, spec: FleetSpec, node: str, done: float) -> None:
    """The operator upgraded ``node``: its states up to upgrade-done (at ``done``), its driver pod on the new image."""
    for state in ("upgrade-required", "cordon-required", "pod-restart-required", "validation-required"):
        move_node(fake, node, state, done - 600, event=False)
    finish_upgrade(fake, node, NEW, at=done)
    for driver_pod in fake.objects("pods"):
        if (driver_pod["metadata"]["namespace"] == spec.gpuOperator.namespace and driver_pod["spec"]["nodeName"] == node
                and driver_pod["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver"):
            image = driver_pod["spec"]["containers"][0]["image"].replace(OLD, NEW)
            fake.update("pods", driver_pod["metadata"]["name"], {"spec": {"containers": [
                {**driver_pod["spec"]["containers"][0], "image": image}]}}, spec.gpuOperator.namespace)


def _upgraded_nodes(fake: ProxyKube, spec: FleetSpec, pool: NodePool, seeded: list[str]) -> list[str]:
    """The nodes of ``pool`` the upgrade moves: all of them, or an image-owned pool's newest generation's."""
    newest = pool.newest_generation
    if spec.driver.owner == DriverOwner.IMAGE and newest is not None:
        return generation_nodes(fake, pool.name, newest.id)
    return sorted(seeded)


def build(fake: ProxyKube, directory: Path, now: float | None = None, *, stack_file: Path | None = None,
          soak_minutes: float = SOAK_MINUTES, **serving: Any) -> World:
    """Seed ``fake`` with the canary cluster after its upgrade and the prod pods on the old driver.

    The stack is ``stack_file`` (an example canary stack as it is), else the AKS example canary written to
    ``directory`` with ``serving`` added. Its canary nodes finished their upgrade one every 5 minutes, the
    last one ``soak_minutes`` before ``now``."""
    now = time.time() if now is None else now
    stack_file = write_stack(directory, **serving) if stack_file is None else stack_file
    spec = load_stack_file(stack_file)
    seeded = seed(fake, spec)
    image_owned = spec.driver.owner == DriverOwner.IMAGE
    upgraded = [(node, pool) for pool in spec.nodePools if pool.role == "canary"
                for node in _upgraded_nodes(fake, spec, pool, seeded[pool.name])]
    finished, pool_of = {}, {}
    for index, (node, pool) in enumerate(upgraded):
        done = now - soak_minutes * 60 - (len(upgraded) - 1 - index) * 300  # one node every 5 minutes
        if image_owned:
            write_result(fake, spec, node, done - 60, pool=pool.name)  # no operator upgrade: the job's start
        else:
            _upgrade_operator_node(fake, spec, node, done)
            write_result(fake, spec, node, done, pool=pool.name)
        finished[node], pool_of[node] = done, pool
    canary_pods = sorted(p["metadata"]["name"] for p in fake.objects("pods")
                         if p["metadata"]["labels"].get("track") == "canary")
    if image_owned:  # the old generation was drained: the canary model's pods run on the new one
        for index, name in enumerate(canary_pods):
            pool_nodes = [n for n, p in upgraded if p.name in _model_pools(spec, name)]
            fake.update("pods", name, {"spec": {"nodeName": pool_nodes[index % len(pool_nodes)]}}, "inference")

    prod = promoted_from(stack_file.stem.removeprefix("Pulumi."))
    pool = _serving_pool(prod, {"app": "llm-chat", "track": "stable"})
    oldest = min(pool.live_generations, key=lambda g: g.id) if pool.live_generations else None
    old_nodes, old_pods = [], []
    for index in range(2):
        node = fake.add(gpu_node(prod, pool, index, oldest))["metadata"]["name"]
        if prod.driver.owner == DriverOwner.OPERATOR:
            fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}}},
                        manager=OPERATOR_MANAGER, at=now - 5 * HOUR)
        old_nodes.append(node)
        name = f"llm-chat-7d9f8c-{index:03d}"
        fake.add(pod(name, "inference", node, {"app": "llm-chat", "track": "stable"},
                     [{"name": "server", "image": "vllm/vllm-openai:v0.10.2"}], owner=("ReplicaSet", "llm-chat-7d9f8c")))
        old_pods.append(name)
    fake.reset_counts()
    return World(fake, spec, stack_file, now, finished, pool_of, canary_pods, old_nodes, old_pods)


def _model_pools(spec: FleetSpec, pod_name: str) -> list[str]:
    """The pools of the model whose pod this is (seeded pods are named ``<model>-7d9f8c-<n>``)."""
    return next(m.nodePools for m in spec.models if pod_name.startswith(f"{m.name}-7d9f8c-"))


def _serving_pool(prod: FleetSpec, match: dict[str, str]) -> NodePool:
    """The prod pool serving the model of these labels: where the old-driver pods the canary compares with run."""
    model = next(m for m in prod.models if m.matchLabels == match)
    return prod.pool(model.nodePools[0])


# ---------------------------------------------------------------- the history Prometheus holds


def _dcgm(history: History, node: str, driver: str, at: float, xid: float, product: str = "NVIDIA-H100-NVL") -> None:
    base = {"gpu": "0", "UUID": f"GPU-{abs(hash(node)) % 10**8:08d}", "device": "nvidia0",
            "modelName": product.replace("-", " "), "Hostname": node, "DCGM_FI_DRIVER_VERSION": driver}
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
    """An hour up to now (for a soak of days, DCGM every SOAK_STEP back to before the first canary node's upgrade
    as well): DCGM for every GPU node (the canary's on the old driver until its upgrade finished,
    then on the new one; a 45 while its pods were deleted, a 43 after), vLLM for the old pods all hour and for
    the canary pods since the soak started; ``slower`` makes the canary pods slower, ``xid_on`` gives that node
    ``xid`` after its upgrade, ``lost_driver_on`` makes DCGM report the old driver on that node still."""
    out = History()
    start, end = world.now - HOUR, world.now - 15
    # A soak longer than the hour: DCGM every SOAK_STEP from before the first node's upgrade up to the hour.
    first = min(world.finished.values()) - 1200
    at = first
    while at < start:
        for node, done in world.finished.items():
            product = world.pool_of[node].gpuProduct
            if at < done - 900 or at >= done:
                _dcgm(out, node, NEW if at >= done and node != lost_driver_on else OLD, at,
                      43.0 if at >= done + 300 else 0.0, product)
        for node in world.old_nodes:
            _dcgm(out, node, OLD, at, 0.0)
        at += SOAK_STEP
    steps = int((end - start) // STEP)
    for i in range(steps + 1):
        at = start + i * STEP
        for node, done in world.finished.items():
            if at < done - 900:  # the old driver, until its driver pod was deleted
                _dcgm(out, node, OLD, at, 45.0 if at >= done - 1080 else 0.0, world.pool_of[node].gpuProduct)
            elif at >= done:
                value = 0.0
                if at >= done + 300:
                    value = 43.0
                if node == xid_on and at >= done + 600:
                    value = float(xid)
                _dcgm(out, node, OLD if node == lost_driver_on else NEW, at, value, world.pool_of[node].gpuProduct)
        for node in world.old_nodes:
            _dcgm(out, node, OLD, at, 0.0)
        for pod_name in world.old_pods:
            _vllm(out, pod_name, at, i, NORMAL)
        if at >= world.soak_start:
            for pod_name in world.canary_pods:
                _vllm(out, pod_name, at, i - int((world.soak_start - start) // STEP), SLOWER if slower else NORMAL)
    return out
