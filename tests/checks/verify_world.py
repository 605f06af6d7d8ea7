"""The world `gpu-rollout verify` looks at, for its tests: a canary cluster after its upgrade (the fake API,
seeded by tests/fakekube/fixtures.py and moved the way the operator and the validation job move it), model
servers behind the API server's pod proxy, Prometheus behind its service proxy, and the DCGM, vLLM and
kube-state-metrics history a real Prometheus is backfilled with.

The cluster: an example canary stack's pools (by default the AKS canary: three H100 NVL nodes, one A100 and one
T4) upgraded from 570.195.03 to 580.173.02 one node at a time, the last one ``soak_minutes`` ago (operator-owned:
upgrade-done written by the operator then and the driver pod recreated on the new image; image-owned: the newest
generation's nodes, where the canary model's pods moved), the validation job's passing result on each node, a
DCGM Exporter pod on every GPU node, and two old-driver nodes serving the same model (``app: llm-chat, track:
stable``), which the canary compares against (``serving.baselineMatchLabels: {app: llm-chat}``): by default
like for like (H100 NVL, one GPU per pod, outside the stack's pools); for an example stack as it is, the prod
stack's serving pool, which is not, so the model is compared with its own pods before the upgrade.

The proxies: :class:`ProxyKube` answers ``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>`` the way the
API server does, by forwarding to the pod (here: the loopback server registered for it), and 503 "error trying
to reach service" when nothing listens there; and ``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/<path>``
by forwarding the request as it came (a form-encoded POST) to the service's loopback backend and passing its
answer back as it is.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

import yaml

from fleetspec.load import load_stack_file, read_stack_file, spec_from_config
from fleetspec.model import DriverOwner, FleetSpec, NodePool
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import (OPERATOR_MANAGER, finish_upgrade, generation_nodes, gpu_node, model_container,
                                     move_node, pod, seed)
from tests.fakekube.server import ApiError, FakeKube, Passthrough
from tests.prometheus.server import History
from workload import result as job_result

OLD, NEW = "570.195.03", "580.173.02"
SOAK_MINUTES = 40  # the last canary node finished its upgrade this long ago
STEP = 30.0  # seconds between backfilled samples in the last hour
SOAK_STEP = 300.0  # seconds between samples before the last hour
HOUR = 3600.0
REQUESTS_PER_SECOND = 2.0
TOKENS_PER_REQUEST = 100
# vLLM's e2e latency histogram buckets and the share of requests in each: p95 1.75 s.
BUCKETS = ("0.5", "1.0", "1.5", "2.0", "2.5", "5.0", "+Inf")
NORMAL = (0.2, 0.5, 0.2, 0.1, 0.0, 0.0, 0.0)
SLOWER = (0.0, 0.2, 0.5, 0.2, 0.1, 0.0, 0.0)  # one bucket up: p95 2.25 s (+29 %), mean latency +50 %
MEAN_LATENCY = {NORMAL: 1.0, SLOWER: 1.5}
PROMETHEUS_SERVICE = ("monitoring", "prometheus-k8s:9090")  # the Service the stacks' validation.prometheus names
OLD_EXPORTER_IP = "10.244.99.9"  # the DCGM Exporter pod a replaced_exporter node had before
BEFORE_HASH = "5c4b3a"  # the canary model's ReplicaSet before the upgrade recreated its pods


class ProxyKube(FakeKube):
    """The fake API plus the pod and service proxy subresources."""

    def __init__(self) -> None:
        super().__init__()
        self.backends: dict[tuple[str, str], str] = {}  # (namespace, pod) -> base URL of what listens in it
        self.proxied: list[tuple[str, str, str, int, str]] = []  # (method, namespace, pod, port, path)
        self.services: dict[tuple[str, str], str] = {}  # (namespace, "name:port") -> base URL of its backend
        self.service_proxied: list[tuple[str, str, str, str, dict[str, str]]] = []  # (method, ns, svc, path, form)
        self.deny_service_proxy = False  # the identity has no RBAC for services/proxy

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any, content_type: str,
               user_agent: str = "") -> Any:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if len(parts) >= 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[6] == "proxy":
            if parts[4] == "pods":
                return self._proxy(method, parts[3], parts[5], "/".join(parts[7:]), body)
            if parts[4] == "services":
                return self._service(method, parts[3], parts[5], "/".join(parts[7:]), body, content_type)
        return super().handle(method, path, query, body, content_type, user_agent)

    def _service(self, method: str, namespace: str, target: str, rest: str, body: Any, content_type: str) -> Any:
        with self.lock:
            self.counts["service-proxy"] += 1
        form = dict(parse_qsl(body)) if isinstance(body, str) else {}
        self.service_proxied.append((method, namespace, target, rest, form))
        if self.deny_service_proxy:
            raise ApiError(403, "Forbidden", f'services "{target}" is forbidden: User "ci" cannot create resource '
                           f'"services/proxy" in API group "" in the namespace "{namespace}"')
        base = self.services.get((namespace, target))
        if base is None:
            raise ApiError(404, "NotFound", f'services "{target.partition(":")[0]}" not found')
        data = body.encode() if isinstance(body, str) else None
        request = urllib.request.Request(f"{base}/{rest}", data=data, method=method,
                                         headers={"Content-Type": content_type} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
                return Passthrough(response.status, response.read(), response.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as error:  # Prometheus refused the query: its answer, passed on
            return Passthrough(error.code, error.read(), error.headers.get("Content-Type", ""))
        except OSError:
            raise ApiError(503, "ServiceUnavailable", "error trying to reach service: no endpoints available for "
                           f"service {target}") from None

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


def write_stack(directory: Path, *, validation: dict[str, Any] | None = None, model: dict[str, Any] | None = None,
                **serving: Any) -> Path:
    """The example canary stack, its model compared against pods of the same model on old-driver nodes, with
    ``serving`` settings and ``validation`` and ``model`` keys added."""
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.canary.yaml").read_text(encoding="utf-8"))
    declared = doc["config"]["gpu-driver-upgrade:models"][0]
    declared["serving"] = {**declared.get("serving", {}), "baselineMatchLabels": {"app": "llm-chat"}, **serving}
    declared.update(model or {})
    # Where Prometheus is, each test says: --prometheus, or validation.prometheus given here.
    doc["config"]["gpu-driver-upgrade:validation"].pop("prometheus", None)
    doc["config"]["gpu-driver-upgrade:validation"].update(validation or {})
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
    exporter_ip: dict[str, str] = field(default_factory=dict)  # GPU node -> its DCGM Exporter pod's IP
    pod_node: dict[str, str] = field(default_factory=dict)  # model pod -> its node
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def canary_nodes(self) -> list[str]:
        return sorted(self.finished)

    @property
    def soak_start(self) -> float:
        return max(self.finished.values())

    @property
    def before_pods(self) -> list[str]:
        """The canary model's pods before the upgrade recreated them (gone from the cluster, kept in Prometheus)."""
        return [p.replace("-7d9f8c-", f"-{BEFORE_HASH}-") for p in self.canary_pods]


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
          soak_minutes: float = SOAK_MINUTES, like_for_like: bool | None = None, **serving: Any) -> World:
    """Seed ``fake`` with the canary cluster after its upgrade and pods of the model on old-driver nodes.

    The stack is ``stack_file`` (an example canary stack as it is), else the AKS example canary written to
    ``directory`` with ``serving`` added. Its canary nodes finished their upgrade one every 5 minutes, the
    last one ``soak_minutes`` before ``now``. The old-driver pods run on nodes like the canary model's
    (``like_for_like``, the default without ``stack_file``), else on the prod stack's serving pool."""
    now = time.time() if now is None else now
    like_for_like = stack_file is None if like_for_like is None else like_for_like
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
    old_nodes, old_pods = _old_driver_pods(fake, spec, prod, now, like_for_like)
    world = World(fake, spec, stack_file, now, finished, pool_of, canary_pods, old_nodes, old_pods)
    exporter = spec.gpuOperator.dcgmExporterVersion or "4.2.3-4.1.3"  # the one the stack declares, where it does
    for index, node in enumerate(sorted(n["metadata"]["name"] for n in fake.objects("nodes")
                                        if n["metadata"]["labels"].get("nvidia.com/gpu.present") == "true")):
        ip = f"10.244.{index // 250}.{index % 250 + 2}"
        fake.add(pod(f"nvidia-dcgm-exporter-{index:05d}", spec.gpuOperator.namespace, node,
                     {"app": "nvidia-dcgm-exporter"}, [{"name": "nvidia-dcgm-exporter",
                                                         "image": f"nvcr.io/nvidia/k8s/dcgm-exporter:{exporter}"}],
                     owner=("DaemonSet", "nvidia-dcgm-exporter")) | {"status": {
                         "phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}})
        world.exporter_ip[node] = ip
    world.pod_node = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in fake.objects("pods")
                      if p["metadata"]["namespace"] == "inference"}
    fake.reset_counts()
    return world


def _old_driver_pods(fake: ProxyKube, spec: FleetSpec, prod: FleetSpec, now: float, like_for_like: bool
                     ) -> tuple[list[str], list[str]]:
    """Two old-driver nodes, each serving one pod of the model as prod labels it (``app: llm-chat, track: stable``):
    like the canary model's (its pool's GPU product, one node per GPU per pod, outside the stack's pools), or the
    prod stack's serving pool's nodes and pods as that stack declares them."""
    canary_model = next(m for m in spec.models if m.matchLabels.get("track") == "canary")
    if like_for_like:
        pool = spec.pool(canary_model.nodePools[0]).model_copy(update={"name": "nvlserving", "role": "serving"})
        container = model_container(canary_model)
        generation = None
    else:
        pool = _serving_pool(prod, {"app": "llm-chat", "track": "stable"})
        container = model_container(next(m for m in prod.models if m.matchLabels.get("track") == "stable"))
        generation = min(pool.live_generations, key=lambda g: g.id) if pool.live_generations else None
    old_nodes, old_pods = [], []
    for index in range(2):
        node = fake.add(gpu_node(prod, pool, index, generation))["metadata"]["name"]
        if prod.driver.owner == DriverOwner.OPERATOR:
            fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}}},
                        manager=OPERATOR_MANAGER, at=now - 5 * HOUR)
        old_nodes.append(node)
        name = f"llm-chat-7d9f8c-{index:03d}"
        fake.add(pod(name, "inference", node, {"app": "llm-chat", "track": "stable"},
                     [{**container, "image": "vllm/vllm-openai:v0.10.2"}], owner=("ReplicaSet", "llm-chat-7d9f8c")))
        old_pods.append(name)
    return old_nodes, old_pods


def _model_pools(spec: FleetSpec, pod_name: str) -> list[str]:
    """The pools of the model whose pod this is (seeded pods are named ``<model>-7d9f8c-<n>``)."""
    return next(m.nodePools for m in spec.models if pod_name.startswith(f"{m.name}-7d9f8c-"))


def _serving_pool(prod: FleetSpec, match: dict[str, str]) -> NodePool:
    """The prod pool serving the model of these labels: where the old-driver pods the canary compares with run."""
    model = next(m for m in prod.models if m.matchLabels == match)
    return prod.pool(model.nodePools[0])


# ---------------------------------------------------------------- the history Prometheus holds


Shares = tuple[float, ...]


@dataclass
class Soak:
    """What happens during the soak, beyond a clean upgrade (times are epoch seconds)."""

    slower: Callable[[float], bool] = lambda at: False  # when the canary pods answer one bucket slower
    errors: Callable[[float], float] = lambda at: 0.0  # the canary pods' share of failed requests at a time
    xids: Sequence[tuple[str, float, int]] = ()  # (node, when, Xid): DCGM's last Xid becomes it then
    restarts: Sequence[tuple[str, float, bool]] = ()  # (pod, when, OOM-killed): a container restart
    lost_driver_on: str | None = None  # DCGM reports the old driver on this node still
    layout: str = "embedded"  # embedded | node-label | exporter-pod: how DCGM series name their node
    driver_label: bool = True  # DCGM series carry DCGM_FI_DRIVER_VERSION (dcp-metrics-included.csv)
    xid_count: bool = False  # the exporter exports DCGM_EXP_XID_ERRORS_COUNT too
    err_code: bool = True  # the Xid gauge carries its value as an err_code label too (dcgm-exporter 4)
    kube_state_metrics: bool = True  # kube-state-metrics is scraped (where the model's pods ran, restarts)
    gpus: int | None = None  # GPUs per node DCGM reports (each its own series); None: as its pool declares
    dcgm_gap: tuple[float, float] | None = None  # no DCGM sample of a canary GPU from, until (the exporter broken)
    # (node, when): the node's DCGM Exporter pod was replaced then; before it, another pod (another IP) was scraped
    replaced_exporter: tuple[str, float] | None = None
    exporter_info: bool = True  # kube-state-metrics' kube_pod_info covers the operator's exporter pods


def ticks(start: float, end: float, coarse: float, fine: float = STEP) -> list[float]:
    """Sample times from ``start`` to just before ``end``: every ``coarse`` seconds up to the last hour, every
    ``fine`` seconds in it."""
    out, at = [], start
    while at < end - HOUR:
        out.append(at)
        at += coarse
    at = max(at, end - HOUR) if out else start
    while at <= end - 15:
        out.append(at)
        at += fine
    return out


def _dcgm_labels(world: World, node: str, product: str, soak: Soak, gpu: int = 0) -> dict[str, str]:
    base = {"gpu": str(gpu), "UUID": f"GPU-{sum(map(ord, node)) % 10**8:08d}-{gpu}", "device": f"nvidia{gpu}",
            "modelName": product.replace("-", " "), "Hostname": node}
    if node in world.exporter_ip:  # the scrape target: the exporter pod on the node
        base["instance"] = f"{world.exporter_ip[node]}:9400"
    if soak.layout == "node-label":  # standalone nvidia-dcgm; a relabelling adds the node
        base.update(Hostname="nvidia-dcgm", kubernetes_node=node)
    elif soak.layout == "exporter-pod":  # standalone nvidia-dcgm; only the scrape target tells the node
        base.update(Hostname="nvidia-dcgm")
    return base


def _xid_timeline(world: World, node: str, soak: Soak) -> list[tuple[float, int]]:
    """(from when, the last Xid DCGM reports) for ``node``: a 45 while its pods were deleted, 0 once the new
    driver loaded, a 43 five minutes later, then the soak's own."""
    done = world.finished.get(node)
    timeline = [(-math.inf, 0)]
    if done is not None:
        timeline += [(done - 1080, 45), (done, 0), (done + 300, 43)]
    timeline += [(at, xid) for on, at, xid in soak.xids if on == node]
    return sorted(timeline)


def _dcgm(out: History, world: World, times: list[float], soak: Soak) -> None:
    gpu_nodes = [(n, world.pool_of[n].gpuProduct) for n in world.canary_nodes] + [
        (n, "NVIDIA-H100-NVL") for n in world.old_nodes]
    def gpus(node: str) -> int:
        pool = world.pool_of.get(node)
        return soak.gpus or (pool.gpusPerNode if pool is not None else 1)

    for node, product, gpu in [(n, p, g) for n, p in gpu_nodes for g in range(gpus(n))]:
        base = _dcgm_labels(world, node, product, soak, gpu)
        done = world.finished.get(node)
        timeline = _xid_timeline(world, node, soak)
        replaced = soak.replaced_exporter
        for at in times:
            if done is not None and done - 900 <= at < done:
                continue  # the driver pod and the exporter were down while the driver was replaced
            if done is not None and soak.dcgm_gap is not None and soak.dcgm_gap[0] <= at < soak.dcgm_gap[1]:
                continue
            if replaced is not None and replaced[0] == node and at < replaced[1]:
                base = {**base, "instance": f"{OLD_EXPORTER_IP}:9400"}
            elif node in world.exporter_ip:
                base = {**base, "instance": f"{world.exporter_ip[node]}:9400"}
            driver = NEW if done is not None and at >= done and node != soak.lost_driver_on else OLD
            labels = {**base, "DCGM_FI_DRIVER_VERSION": driver} if soak.driver_label else base
            xid = next(x for since, x in reversed(timeline) if since <= at)
            out.add("DCGM_FI_DEV_GPU_UTIL", labels, at, 63.0)
            out.add("DCGM_FI_DEV_XID_ERRORS", {**labels, "err_code": str(xid)} if soak.err_code else labels, at,
                    float(xid))
            if soak.xid_count:
                for since, value in timeline:
                    if value and since <= at < since + 300:  # the exporter counts an Xid for its 5-minute window
                        out.add("DCGM_EXP_XID_ERRORS_COUNT", {**labels, "xid": str(value)}, at, 1.0)


def _vllm(out: History, pod_name: str, node: str, times: list[float], slower: Callable[[float], bool],
          errors: Callable[[float], float]) -> None:
    """A vLLM pod serving REQUESTS_PER_SECOND from its first to its last sample time: its counters as scraped."""
    labels = {"namespace": "inference", "pod": pod_name, "model_name": "llm-chat"}
    http = {"namespace": "inference", "pod": pod_name, "handler": "/v1/completions", "method": "POST"}
    cumulative = [0.0] * len(BUCKETS)
    count = seconds = tokens = ok = failed = 0.0
    previous = None
    for at in times:
        if previous is not None:
            requests = REQUESTS_PER_SECOND * (at - previous)
            shares = SLOWER if slower(at) else NORMAL
            running = 0.0
            for index, share in enumerate(shares):
                running += share
                cumulative[index] += requests * min(running, 1.0)
            count += requests
            seconds += requests * MEAN_LATENCY[shares]
            tokens += requests * TOKENS_PER_REQUEST
            failed += requests * errors(at)
            ok += requests * (1 - errors(at))
        previous = at
        for bucket, value in zip(BUCKETS, cumulative, strict=True):
            out.add("vllm:e2e_request_latency_seconds_bucket", {**labels, "le": bucket}, at, round(value, 6))
        out.add("vllm:e2e_request_latency_seconds_sum", labels, at, round(seconds, 6))
        out.add("vllm:e2e_request_latency_seconds_count", labels, at, round(count, 6))
        out.add("vllm:generation_tokens_total", labels, at, round(tokens, 6))
        out.add("http_requests_total", {**http, "status": "2xx"}, at, round(ok, 6))
        out.add("http_requests_total", {**http, "status": "5xx"}, at, round(failed, 6))


def _kube_state(out: History, pod_name: str, node: str, times: list[float], restarts: list[tuple[float, bool]]
                ) -> None:
    """kube-state-metrics' series of one pod: where it runs, its container's restarts and why it last ended."""
    count, oom = 0, None
    pending = sorted(restarts)
    for at in times:
        while pending and pending[0][0] <= at:
            count, oom = count + 1, pending.pop(0)[1]
        out.add("kube_pod_info", {"namespace": "inference", "pod": pod_name, "node": node, "host_ip": "10.0.0.4",
                                  "created_by_kind": "ReplicaSet"}, at, 1.0)
        container = {"namespace": "inference", "pod": pod_name, "container": "server"}
        out.add("kube_pod_container_status_restarts_total", container, at, float(count))
        if oom is not None:
            for reason in ("OOMKilled", "Error"):
                out.add("kube_pod_container_status_last_terminated_reason", {**container, "reason": reason}, at,
                        1.0 if (reason == "OOMKilled") == oom else 0.0)


def history(world: World, *, slower: bool = False, xid_on: str | None = None, xid: int = 79,
            lost_driver_on: str | None = None, soak: Soak | None = None, coarse: float = SOAK_STEP,
            dcgm_coarse: float | None = None) -> History:
    """What Prometheus scraped of ``world``: DCGM for every GPU node from a day before the first canary node's
    upgrade (the canary's on the old driver until its upgrade finished, then on the new one; a 45 while its
    pods were deleted, a 43 after), vLLM for the old-driver pods all along, for the canary model's pods before
    the upgrade (deleted 20 minutes before the first node finished) and for its new pods since the soak started;
    every ``coarse`` seconds (DCGM every ``dcgm_coarse``), every 30 s in the last hour. ``slower`` makes the
    canary pods slower all soak, ``xid_on`` gives that node ``xid`` ten minutes after its upgrade,
    ``lost_driver_on`` makes DCGM report the old driver on that node still; ``soak`` says the rest."""
    soak = soak or Soak()
    if slower:
        soak.slower = lambda at: True
    if xid_on is not None:
        soak.xids = [*soak.xids, (xid_on, world.finished[xid_on] + 600, xid)]
    if lost_driver_on is not None:
        soak.lost_driver_on = lost_driver_on
    out = History()
    first = min(world.finished.values())
    start = min(world.now - HOUR, first - 28 * HOUR)  # the day before the upgrade, which a baseline may read
    _dcgm(out, world, ticks(start, world.now, dcgm_coarse or coarse), soak)
    times = ticks(start, world.now, coarse)
    for pod_name in world.old_pods:
        _vllm(out, pod_name, world.pod_node[pod_name], times, lambda at: False, lambda at: 0.0)
    for pod_name in world.before_pods:  # deleted by the upgrade of their node, the first one
        _vllm(out, pod_name, "", [t for t in times if t < first - 1200], lambda at: False, lambda at: 0.0)
    for pod_name in world.canary_pods:
        own = [t for t in times if t >= world.soak_start]
        _vllm(out, pod_name, world.pod_node[pod_name], own, soak.slower, soak.errors)
        if soak.kube_state_metrics:
            _kube_state(out, pod_name, world.pod_node[pod_name], own,
                        [(at, oom) for name, at, oom in soak.restarts if name == pod_name])
    if soak.kube_state_metrics:
        for pod_name in world.old_pods:
            _kube_state(out, pod_name, world.pod_node[pod_name], times, [])
        if soak.exporter_info:
            _exporter_info(out, world, times, soak)
    return out


def _exporter_info(out: History, world: World, times: list[float], soak: Soak) -> None:
    """kube_pod_info of the operator's DCGM Exporter pods: those running now, and the one a replaced_exporter node
    had before (gone from the cluster, kept in Prometheus)."""
    namespace = world.spec.gpuOperator.namespace
    pods = [(p["metadata"]["name"], p["spec"]["nodeName"], p["status"].get("podIP", ""), 0.0)
            for p in world.fake.objects("pods") if p["metadata"].get("namespace") == namespace
            and p["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter"]
    if soak.replaced_exporter is not None:
        node, when = soak.replaced_exporter
        pods.append(("nvidia-dcgm-exporter-old00", node, OLD_EXPORTER_IP, -when))  # until ``when``
    for name, node, ip, bound in pods:
        labels = {"namespace": namespace, "pod": name, "node": node, "pod_ip": ip, "created_by_kind": "DaemonSet",
                  "created_by_name": "nvidia-dcgm-exporter"}
        for at in times:
            if bound >= 0 and (soak.replaced_exporter is None or soak.replaced_exporter[0] != node
                               or at >= soak.replaced_exporter[1]) or bound < 0 and at < -bound:
                out.add("kube_pod_info", labels, at, 1.0)
