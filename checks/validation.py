"""Runbook section 5 ("Validate the canary"), run by `gpu-rollout verify` on the stack's upgraded nodes:
``driver-version``, ``gpu-count``, ``operator-validator``, ``model-answers``, ``latency-throughput``,
``no-new-xid``, ``dcgm-metrics``, ``validation-job``.

:func:`gather` is the one read: a LIST of nodes (the identity check refuses another cluster first), one of
the operator's pods, one or two per declared model, one question to each model pod on an upgraded node
through the API server's pod proxy, and a few Prometheus queries. The checks registered below are pure
functions over what it gathered, each giving ``pass``, ``fail`` or ``inconclusive`` per subject with the
evidence it read. Missing evidence (an empty query, no result from the validation job yet, no Prometheus
given) is ``inconclusive``, never a pass. Nothing here writes to the cluster.

The upgraded nodes are the nodes of every pool the stack releases (a held pool's nodes do not move), each
with its pool's target driver: the canary pool and released prod pools on ``driver.version``; an
image-owned pool with generations on the newest live generation's driver, whose nodes are the ones checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from checks import kube as k
from checks.errors import AccessDeniedError, ClusterError
from checks.hold import read_hold
from checks.identity import ClusterIdentity, identify_cluster, read_records, refuse_if_refuted
from checks.inventory import pool_nodes_of
from checks.nodestate import NoNodesError, node_driver_version, upgrade_state
from checks.objects import Obj, labels_of, annotations_of, meta, name_of, namespaced_name, spec_of, status_of
from checks.progress import epoch, label_written_at, model_selector, pod_ready
from checks.prometheus import Prometheus, PrometheusError, Sample, Series, finite, regex_union
from checks.metadata import VALIDATION, check
from checks.results import Finding, failed, few, inconclusive, passed
from spec import attestation, gpu_products, labels, manifests
from spec.model import DriverOwner, FleetSpec, Model, NodePool, ServingEngine
from spec.base import percent_of
from workload import result as job_result

VERB = "verify"
VALIDATOR_LABEL = ("app", "nvidia-operator-validator")  # the operator validator's pods (reference 5)
# Xids logged when processes are killed, as the upgrade's pod deletion does: expected, not a driver fault.
# Source: NVIDIA's Xid catalog (Ampere and newer), via shared/reference/gpu-operator.md section 7: 45
# PREEMPTIVE_REMOVAL ("logged on app abort (Ctrl-C, reset, kill)"), 43 RESETCHANNEL_VERIF_ERROR (an app
# fault; "the GPU stays healthy").
EXPECTED_XIDS = {43: "RESETCHANNEL_VERIF_ERROR: a killed process's channel", 45: "PREEMPTIVE_REMOVAL: a killed process"}
DCGM_NODE_LABELS = ("Hostname", "hostname")  # the node, as dcgm-exporter spells it (older and current releases)
DCGM_SERIES = "DCGM_FI_DEV_GPU_UTIL"  # in dcgm-exporter's default counters; carries DCGM_FI_DRIVER_VERSION
DCGM_DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"
MIN_WINDOW, MAX_WINDOW, DEFAULT_WINDOW = 300, 3600, 1800  # seconds of history the latency comparison reads
DEFAULT_PROMPT = "Say hello."
TEST_MAX_TOKENS = 8
DEFAULT_PORTS = {ServingEngine.VLLM: 8000, ServingEngine.TGI: 80, ServingEngine.TRITON: 8000}

# The engines' default PromQL (docs/validation.md); {namespace}, {pods} and {window} are filled in. The pod
# and namespace labels are those the Prometheus Operator's PodMonitor/ServiceMonitor scrape puts on series.
_SELECTOR = '{namespace="{namespace}",pod=~"{pods}"}'
DEFAULT_QUERIES: dict[ServingEngine, dict[str, str]] = {
    ServingEngine.VLLM: {
        "p95LatencySeconds": "histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
                             + _SELECTOR + "[{window}])))",
        "tokensPerSecond": "sum(rate(vllm:generation_tokens_total" + _SELECTOR + "[{window}])) / "
                           "sum(rate(vllm:e2e_request_latency_seconds_sum" + _SELECTOR + "[{window}]))",
    },
    ServingEngine.TGI: {
        "p95LatencySeconds": "histogram_quantile(0.95, sum by (le) (rate(tgi_request_duration_bucket"
                             + _SELECTOR + "[{window}])))",
        "tokensPerSecond": "sum(rate(tgi_request_generated_tokens_sum" + _SELECTOR + "[{window}])) / "
                           "sum(rate(tgi_request_duration_sum" + _SELECTOR + "[{window}]))",
    },
    ServingEngine.TRITON: {
        # Triton's latency summary (--metrics-config summary_latencies=true), microseconds.
        "p95LatencySeconds": 'avg(avg_over_time(nv_inference_request_summary_us{quantile="0.95",'
                             'namespace="{namespace}",pod=~"{pods}"}[{window}])) / 1e6',
        # Triton's core metrics count inferences, not tokens: inferences per second of request time.
        "tokensPerSecond": "sum(rate(nv_inference_count" + _SELECTOR + "[{window}])) / "
                           "(sum(rate(nv_inference_request_duration_us" + _SELECTOR + "[{window}])) / 1e6)",
    },
}
# Requests a model's pods served over a window, per engine: whether a canary pool served model traffic during
# the soak (the attestation binds it). A counter each engine exports by default; {namespace}, {pods}, {window}.
REQUESTS_QUERIES: dict[ServingEngine, str] = {
    ServingEngine.VLLM: "sum(increase(vllm:e2e_request_latency_seconds_count" + _SELECTOR + "[{window}]))",
    ServingEngine.TGI: "sum(increase(tgi_request_duration_count" + _SELECTOR + "[{window}]))",
    ServingEngine.TRITON: "sum(increase(nv_inference_request_success" + _SELECTOR + "[{window}]))",
}


# ---------------------------------------------------------------- what gather reads


@dataclass(frozen=True)
class UpgradedNode:
    node: Obj
    pool: NodePool
    target: str  # the driver the node must run now

    @property
    def name(self) -> str:
        return name_of(self.node)


@dataclass(frozen=True)
class Query:
    """One PromQL query and what came back: samples or series, or why nothing did."""

    expr: str
    samples: list[Sample] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Probe:
    """What asking one model pod on an upgraded node gave."""

    model: str  # namespace/name of the declared model
    pod: str  # namespace/name
    node: str
    ready: bool
    outcome: str  # answered | failed | not-ready | denied | unknown-engine
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """A model's p95 latency and tokens per second on new-driver pods against old-driver ones."""

    model: Model
    engine: ServingEngine | None
    new_pods: list[str]
    old_pods: list[str]
    window: str
    queries: dict[str, Query] = field(default_factory=dict)  # "<metric> new|old" -> query
    reason: str | None = None  # why nothing was compared


@dataclass
class VerifyFacts:
    spec: FleetSpec
    now: float
    identity: ClusterIdentity
    nodes: list[UpgradedNode]
    operator_pods: dict[str, list[Obj]]  # node -> the operator's pods on it
    finished_at: dict[str, float | None]  # node -> when its upgrade finished (soak start of that node)
    probes: list[Probe]
    comparisons: list[Comparison]
    prometheus: str | None  # its URL; None: not given
    dcgm: Query | None = None
    xid: Query | None = None
    # pool -> (model, its pods on the pool's upgraded nodes, requests they served during the soak)
    traffic: dict[str, list[tuple[Model, list[str], Query | None]]] = field(default_factory=dict)

    @property
    def soak_start(self) -> float | None:
        """When the last upgraded node finished: the canary as a whole is upgraded from then on."""
        times = [self.finished_at.get(n.name) for n in self.nodes]
        return None if not times or any(t is None for t in times) else max(t for t in times if t is not None)


# ---------------------------------------------------------------- which nodes, which driver


def upgraded_nodes(spec: FleetSpec, nodes: list[Obj]) -> list[UpgradedNode]:
    found = []
    for node, membership in pool_nodes_of(spec, nodes):
        pool = membership.pool
        target = spec.pool_target(pool)
        if not target.moves:
            continue
        if target.generation is not None and (membership.generation is None or membership.generation.id != target.generation):
            continue  # an older generation's node: it leaves with its generation, it is not upgraded
        found.append(UpgradedNode(node, pool, target.driver))
    return found


def upgrade_finished_at(node: Obj, target: str) -> float | None:
    """When the node's upgrade finished: the operator's write of ``upgrade-done`` (the managedFields time of the
    state label), else when the validation job started on it for ``target`` (the job starts only on an
    upgraded node); None when the cluster shows neither."""
    if upgrade_state(node) == labels.UPGRADE_DONE:
        written = label_written_at(node, labels.UPGRADE_STATE)
        if written is not None:
            return written
    parsed, _ = validation_result(node, target)
    return epoch(parsed.startedAt) if parsed is not None else None


def validation_result(node: Obj, target: str) -> tuple[job_result.Result | None, str | None]:
    """The job's result on ``node`` for ``target`` (parsed by the job's own reader), or why there is none."""
    text = annotations_of(node).get(job_result.result_annotation(target))
    if text is None:
        return None, None
    try:
        return job_result.parse_result(text), None
    except ValueError as exc:
        return None, f"annotation {job_result.result_annotation(target)} is not a valid result: {exc}"


# ---------------------------------------------------------------- models


def engine_of(model: Model) -> ServingEngine | None:
    """The declared engine, else the one the image names (vllm/vllm-openai, .../text-generation-inference,
    nvcr.io/nvidia/tritonserver)."""
    if model.serving.engine is not None:
        return model.serving.engine
    repository = model.image.split("@", 1)[0].lower()
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]  # the tag, not a registry's port
    if "vllm" in repository:
        return ServingEngine.VLLM
    if "text-generation-inference" in repository or "/tgi" in repository:
        return ServingEngine.TGI
    if "triton" in repository:
        return ServingEngine.TRITON
    return None


def _running_on(pods: list[Obj], node_names: set[str]) -> list[Obj]:
    return [p for p in pods if spec_of(p).get("nodeName") in node_names and not meta(p).get("deletionTimestamp")]


class _Asker:
    """Requests to a pod through the API server's pod proxy (``pods/<name>:<port>/proxy/<path>``), with the
    adapter's bounds, retries and error mapping."""

    def __init__(self, kube: k.Kube) -> None:
        self.kube = kube

    def __call__(self, pod: Obj, port: int, path: str, body: Any = None) -> Any:
        return self.kube.proxy(meta(pod).get("namespace") or "default", name_of(pod), port, path, body)


Ask = Callable[[Obj, int, str, Any], Any]


def ask_model(ask: Ask, model: Model, pod: Obj, prompt: str) -> tuple[str, str, dict[str, Any]]:
    """(outcome, detail, evidence) of one test request to ``pod``: greedy, a few tokens."""
    engine = engine_of(model)
    if engine is None:
        return ("unknown-engine", f"cannot tell the serving engine of image {model.image}: set "
                f"models[{model.name}].serving.engine (vllm, tgi or triton)", {"image": model.image})
    port = model.serving.port or DEFAULT_PORTS[engine]
    evidence: dict[str, Any] = {"engine": engine.value, "port": port}
    if engine == ServingEngine.VLLM:
        served = model.serving.servedModel
        if served is None:
            listed = ask(pod, port, "v1/models", None)
            names = [str(m.get("id")) for m in (listed.get("data") or []) if isinstance(m, dict) and m.get("id")]
            if not names:
                return "failed", "GET /v1/models lists no model", {**evidence, "models": listed}
            served = names[0]
        answer = ask(pod, port, "v1/completions", {"model": served, "prompt": prompt, "max_tokens": TEST_MAX_TOKENS,
                                                   "temperature": 0})
        choices = answer.get("choices") or []
        text = choices[0].get("text") if choices and isinstance(choices[0], dict) else None
        tokens = (answer.get("usage") or {}).get("completion_tokens")
        evidence.update(request="POST /v1/completions", servedModel=served, completionTokens=tokens)
        if not isinstance(text, str) or not text.strip():
            return "failed", f"POST /v1/completions for {served} gave no text", evidence
        return "answered", f"POST /v1/completions for {served}: {len(text)} characters", evidence
    if engine == ServingEngine.TGI:
        answer = ask(pod, port, "generate", {"inputs": prompt, "parameters": {"max_new_tokens": TEST_MAX_TOKENS}})
        text = answer.get("generated_text")
        evidence.update(request="POST /generate")
        if not isinstance(text, str) or not text.strip():
            return "failed", "POST /generate gave no generated_text", evidence
        return "answered", f"POST /generate: {len(text)} characters", evidence
    ask(pod, port, "v2/health/ready", None)  # Triton: 200 when every model is ready, else an error
    served = model.serving.servedModel
    if served is None:
        evidence.update(request="GET /v2/health/ready")
        return "answered", "GET /v2/health/ready: ready (set serving.servedModel to send a generate request)", evidence
    answer = ask(pod, port, f"v2/models/{served}/generate",
                 {"text_input": prompt, "parameters": {"max_tokens": TEST_MAX_TOKENS}})
    text = answer.get("text_output")
    evidence.update(request=f"POST /v2/models/{served}/generate")
    if not isinstance(text, str) or not text.strip():
        return "failed", f"POST /v2/models/{served}/generate gave no text_output", evidence
    return "answered", f"POST /v2/models/{served}/generate: {len(text)} characters", evidence


def _probe(ask: Ask, model: Model, pod: Obj, prompt: str) -> Probe:
    key = f"{model.namespace}/{model.name}"
    node = str(spec_of(pod).get("nodeName"))
    if not pod_ready(pod):
        phase = status_of(pod).get("phase", "unknown")
        return Probe(key, namespaced_name(pod), node, False, "not-ready", f"pod is not Ready (phase {phase})",
                     {"phase": phase})
    try:
        outcome, detail, evidence = ask_model(ask, model, pod, prompt)
    except AccessDeniedError as exc:
        return Probe(key, namespaced_name(pod), node, True, "denied", str(exc))
    except (ClusterError, AttributeError, TypeError) as exc:  # no answer, an error, or not the engine's JSON
        return Probe(key, namespaced_name(pod), node, True, "failed", f"no answer: {exc}")
    return Probe(key, namespaced_name(pod), node, True, outcome, detail, evidence)


def window_of(seconds: float | None) -> str:
    """The history the comparison reads: the soak so far, at least 5 and at most 60 minutes."""
    span = DEFAULT_WINDOW if seconds is None else int(min(MAX_WINDOW, max(MIN_WINDOW, seconds)))
    return f"{span}s"


def fill(template: str, namespace: str, pods: list[str], window: str) -> str:
    return (template.replace("{namespace}", namespace).replace("{pods}", regex_union(pods))
            .replace("{window}", window))


def _instant(prometheus: Prometheus, expr: str, now: float) -> Query:
    try:
        return Query(expr, samples=prometheus.query(expr, at=now))
    except PrometheusError as exc:
        return Query(expr, error=str(exc))


def compare(prometheus: Prometheus | None, model: Model, new: list[Obj], old: list[Obj], window: str,
            now: float) -> Comparison:
    engine = engine_of(model)
    new_pods = sorted(name_of(p) for p in new)
    old_pods = sorted(name_of(p) for p in old)
    comparison = Comparison(model, engine, new_pods, old_pods, window)
    if prometheus is None:
        return Comparison(model, engine, new_pods, old_pods, window, reason="no Prometheus: pass --prometheus URL")
    if not new_pods:
        return Comparison(model, engine, new_pods, old_pods, window,
                          reason="no Ready pod of the model runs on an upgraded node")
    if not old_pods:
        return Comparison(model, engine, new_pods, old_pods, window, reason=(
            "no Ready pod of the model runs on an old-driver node to compare with (the pods matching "
            f"{_baseline_selector(model)} in namespace {model.namespace}; serving.baselineMatchLabels names them)"))
    queries = {}
    for metric in ("p95LatencySeconds", "tokensPerSecond"):
        template = getattr(model.serving.queries, metric) or (DEFAULT_QUERIES[engine][metric] if engine else None)
        if template is None:
            return Comparison(model, engine, new_pods, old_pods, window, reason=(
                f"no query for {metric}: the engine of image {model.image} is not known; set serving.engine or "
                f"serving.queries.{metric}"))
        for side, pods in (("new", new_pods), ("old", old_pods)):
            queries[f"{metric} {side}"] = _instant(prometheus, fill(template, model.namespace, pods, window), now)
    comparison.queries.update(queries)
    return comparison


def served_requests(prometheus: Prometheus | None, model: Model, pods: list[str], soak_start: float | None,
                    now: float) -> Query | None:
    """The requests ``pods`` served from the soak's start to now (``REQUESTS_QUERIES``); None without Prometheus,
    a known engine or a soak start."""
    engine = engine_of(model)
    if prometheus is None or engine is None or soak_start is None:
        return None
    window = f"{max(MIN_WINDOW, int(now - soak_start))}s"
    return _instant(prometheus, fill(REQUESTS_QUERIES[engine], model.namespace, pods, window), now)


def _baseline_selector(model: Model) -> str:
    chosen = model.serving.baselineMatchLabels or model.matchLabels
    return ",".join(f"{key}={value}" for key, value in sorted(chosen.items()))


# ---------------------------------------------------------------- the one read


def _node_regex(nodes: list[UpgradedNode]) -> str:
    return regex_union([n.name for n in nodes])


def dcgm_query(nodes: list[UpgradedNode]) -> str:
    names = _node_regex(nodes)
    by = ", ".join((*DCGM_NODE_LABELS, DCGM_DRIVER_LABEL))
    selectors = " or ".join(f'{DCGM_SERIES}{{{label}=~"{names}"}}' for label in DCGM_NODE_LABELS)
    return f"count by ({by}) ({selectors})"


def xid_query(nodes: list[UpgradedNode]) -> str:
    names = _node_regex(nodes)
    by = ", ".join((*DCGM_NODE_LABELS, "gpu"))
    selectors = " or ".join(f'{DCGM_XID}{{{label}=~"{names}"}}' for label in DCGM_NODE_LABELS)
    return f"max by ({by}) ({selectors})"


def gather(kube: k.Kube, spec: FleetSpec, prometheus: Prometheus | None, now: float | None = None,
           ask: Ask | None = None) -> VerifyFacts:
    """Everything the checks judge, read once; another cluster raises WrongClusterError before anything else."""
    now = datetime.now(UTC).timestamp() if now is None else now
    all_nodes = kube.list(k.NODES)
    identity = identify_cluster(spec, read_records(kube), all_nodes)
    refuse_if_refuted(kube, identity)
    nodes = upgraded_nodes(spec, all_nodes)
    if not nodes:
        raise NoNodesError(f"no node of a released pool of the stack ({', '.join(p.name for p in spec.nodePools)}) "
                           f"was found on {kube.where}: the wrong cluster or --context?")
    names = {n.name for n in nodes}
    operator_pods: dict[str, list[Obj]] = {}
    for pod in kube.list(k.PODS, namespace=spec.gpuOperator.namespace):
        node = spec_of(pod).get("nodeName")
        if node in names:
            operator_pods.setdefault(node, []).append(pod)
    finished = {n.name: upgrade_finished_at(n.node, n.target) for n in nodes}
    facts = VerifyFacts(spec, now, identity, nodes, operator_pods, finished, [], [],
                        prometheus.url if prometheus else None)

    ask = ask or _Asker(kube)
    prompt = spec.validation.prompt if spec.validation else DEFAULT_PROMPT
    released = {n.pool.name for n in nodes}
    targets = {n.target for n in nodes}
    drivers = {name_of(n): node_driver_version(n) for n in all_nodes}
    soak = facts.soak_start
    window = window_of(None if soak is None else now - soak)
    old_nodes = {node for node, driver in drivers.items() if driver is not None and driver not in targets}
    for model in spec.models:
        if not released & set(model.nodePools):
            continue
        pods = kube.list(k.PODS, namespace=model.namespace, label_selector=model_selector(model))
        baseline = pods if model.serving.baselineMatchLabels is None else kube.list(
            k.PODS, namespace=model.namespace, label_selector=_baseline_selector(model))
        new = _running_on(pods, names)
        facts.probes += [_probe(ask, model, pod, prompt) for pod in sorted(new, key=name_of)]
        old = [p for p in _running_on(baseline, old_nodes) if pod_ready(p)]
        facts.comparisons.append(compare(prometheus, model, [p for p in new if pod_ready(p)], old, window, now))
        for pool in sorted(released & set(model.nodePools)):
            on_pool = sorted(name_of(p) for p in _running_on(pods, {n.name for n in nodes if n.pool.name == pool}))
            if on_pool:
                facts.traffic.setdefault(pool, []).append(
                    (model, on_pool, served_requests(prometheus, model, on_pool, soak, now)))

    if prometheus is not None:
        facts.dcgm = _instant(prometheus, dcgm_query(nodes), now)
        start = min((t for t in finished.values() if t is not None), default=None)
        if start is not None:
            expr = xid_query(nodes)
            step = max(15.0, (now - start) / 500)
            try:
                facts.xid = Query(expr, series=prometheus.query_range(expr, start, now, step))
            except PrometheusError as exc:
                facts.xid = Query(expr, error=str(exc))
    return facts


# ---------------------------------------------------------------- the checks (runbook section 5, in its order)


def _driver_pods(facts: VerifyFacts, node: str) -> list[Obj]:
    return [p for p in facts.operator_pods.get(node, [])
            if any(labels_of(p).get(key) == value for key, value in labels.DRIVER_POD_LABELS)]


def _image_tag(pod: Obj) -> str:
    containers = spec_of(pod).get("containers") or []
    images = [c.get("image", "") for c in containers if isinstance(c, dict)]
    driver = next((i for i in images if "/driver:" in i or i.startswith("driver:")), images[0] if images else "")
    return driver.rsplit(":", 1)[-1] if ":" in driver.rsplit("/", 1)[-1] else ""


@check("driver-version", VALIDATION)
def check_driver_version(facts: VerifyFacts) -> list[Finding]:
    """GFD's driver label and, where the operator owns the driver, the node's driver pod agree with the target."""
    findings = []
    operator_owned = facts.spec.driver.owner == DriverOwner.OPERATOR
    for node in facts.nodes:
        reported = node_driver_version(node.node)
        state = upgrade_state(node.node)
        evidence: dict[str, Any] = {"target": node.target, "gfd": reported, "upgradeState": state or None}
        problems = []
        if reported is None:
            problems.append(f"GFD reports no driver version ({labels.GFD_DRIVER_VERSION})")
        elif not job_result.driver_matches(node.target, reported):
            problems.append(f"GFD reports {reported}")
        if operator_owned:
            if state != labels.UPGRADE_DONE:
                problems.append(f"upgrade state is {state or 'unset'}, not {labels.UPGRADE_DONE}")
            pods = _driver_pods(facts, node.name)
            evidence["driverPods"] = [{"pod": namespaced_name(p), "tag": _image_tag(p), "ready": pod_ready(p)}
                                      for p in pods]
            if not pods:
                problems.append("no driver pod runs on it")
            for pod in pods:
                tag = _image_tag(pod)
                if not job_result.driver_matches(node.target, tag.split("-", 1)[0]):
                    problems.append(f"driver pod {name_of(pod)} runs image tag {tag or 'unknown'}")
                elif not pod_ready(pod):
                    problems.append(f"driver pod {name_of(pod)} is not Ready")
        if problems:
            findings.append(failed(node.name, f"target {node.target}: " + "; ".join(problems), evidence))
        else:
            how = " (GFD label and driver pod)" if operator_owned else " (GFD label)"
            findings.append(passed(node.name, f"runs {node.target}{how}", evidence))
    return findings


@check("gpu-count", VALIDATION)
def check_gpu_count(facts: VerifyFacts) -> list[Finding]:
    """Allocatable nvidia.com/gpu equals what the pool declares: no GPU lost in the upgrade."""
    findings = []
    for node in facts.nodes:
        status = status_of(node.node)
        allocatable = (status.get("allocatable") or {}).get(labels.GPU_RESOURCE)
        evidence = {"allocatable": allocatable, "capacity": (status.get("capacity") or {}).get(labels.GPU_RESOURCE),
                    "gfdCount": labels_of(node.node).get(labels.GPU_COUNT), "declared": node.pool.gpusPerNode}
        try:
            count = int(str(allocatable))
        except ValueError:
            findings.append(failed(node.name, f"advertises no allocatable {labels.GPU_RESOURCE} (pool "
                                   f"{node.pool.name} declares {node.pool.gpusPerNode})", evidence))
            continue
        if count != node.pool.gpusPerNode:
            findings.append(failed(node.name, f"allocatable {labels.GPU_RESOURCE} is {count}, pool {node.pool.name} "
                                   f"declares {node.pool.gpusPerNode}", evidence))
        else:
            findings.append(passed(node.name, f"{count} allocatable GPU(s), as pool {node.pool.name} declares",
                                   evidence))
    return findings


@check("operator-validator", VALIDATION)
def check_operator_validator(facts: VerifyFacts) -> list[Finding]:
    """The operator's validator pod (app=nvidia-operator-validator) is Running and Ready on the node."""
    findings = []
    key, value = VALIDATOR_LABEL
    for node in facts.nodes:
        pods = [p for p in facts.operator_pods.get(node.name, []) if labels_of(p).get(key) == value]
        evidence = {"pods": [{"pod": namespaced_name(p), "phase": status_of(p).get("phase"), "ready": pod_ready(p)}
                             for p in pods]}
        if not pods:
            findings.append(failed(node.name, f"no {key}={value} pod in namespace {facts.spec.gpuOperator.namespace}",
                                   evidence))
        elif not all(pod_ready(p) for p in pods):
            waiting = [name_of(p) for p in pods if not pod_ready(p)]
            findings.append(failed(node.name, f"validator not Ready: {few(waiting)}", evidence))
        else:
            findings.append(passed(node.name, f"validator Ready: {few([name_of(p) for p in pods])}", evidence))
    return findings


@check("model-answers", VALIDATION)
def check_model_answers(facts: VerifyFacts) -> list[Finding]:
    """Each model pod on an upgraded node is Ready and answers a test request through the pod proxy."""
    if not facts.probes:
        models = [f"{m.namespace}/{m.name}" for m in facts.spec.models]
        return [inconclusive("models", "no pod of a declared model runs on an upgraded node, so none could be asked"
                             + (f" (declared: {few(models)})" if models else " (the stack declares no model)"),
                             {"models": models})]
    findings = []
    for probe in facts.probes:
        evidence = {"model": probe.model, "node": probe.node, **probe.evidence}
        subject = probe.pod
        if probe.outcome == "answered":
            findings.append(passed(subject, f"on {probe.node}: {probe.detail}", evidence))
        elif probe.outcome in ("denied", "unknown-engine"):
            findings.append(inconclusive(subject, f"on {probe.node}: could not ask: {probe.detail}", evidence))
        else:
            findings.append(failed(subject, f"on {probe.node}: {probe.detail}", evidence))
    return findings


def _value(query: Query | None) -> tuple[float | None, str | None]:
    """The one number a comparison query gives, or why there is none."""
    if query is None:
        return None, "not queried"
    if query.error:
        return None, query.error
    values = [finite(s.value) for s in query.samples]
    values = [v for v in values if v is not None]
    if not values:
        return None, f"empty result for {query.expr}"
    if len(values) > 1:
        return None, f"{len(values)} series for {query.expr}; a comparison query must give one number"
    return values[0], None


def _fraction(percent: str) -> float:
    value = percent_of(percent)
    return 0.0 if value is None else value / 100


@check("latency-throughput", VALIDATION)
def check_latency_throughput(facts: VerifyFacts) -> list[Finding]:
    """p95 latency and tokens per second of each model on new-driver pods against old-driver pods (Prometheus),
    within validation.tolerance (p95Latency higher, tokensPerSecond lower)."""
    tolerance = facts.spec.validation.tolerance if facts.spec.validation else None
    latency_tol = _fraction(tolerance.p95Latency if tolerance else "20%")
    tps_tol = _fraction(tolerance.tokensPerSecond if tolerance else "10%")
    if not facts.comparisons:
        return [inconclusive("models", "no declared model runs on a released pool: nothing to compare")]
    findings = []
    for comparison in facts.comparisons:
        subject = f"{comparison.model.namespace}/{comparison.model.name}"
        evidence: dict[str, Any] = {"engine": comparison.engine.value if comparison.engine else None,
                                    "newPods": comparison.new_pods, "oldPods": comparison.old_pods,
                                    "window": comparison.window,
                                    "tolerance": {"p95Latency": latency_tol, "tokensPerSecond": tps_tol}}
        if comparison.reason:
            findings.append(inconclusive(subject, comparison.reason, evidence))
            continue
        values: dict[str, float] = {}
        missing = []
        for key, query in comparison.queries.items():
            value, why = _value(query)
            evidence.setdefault("queries", {})[key] = {"query": query.expr, "value": value}
            if value is None:
                missing.append(f"{key}: {why}")
            else:
                values[key] = value
        if missing:
            findings.append(inconclusive(subject, "no data: " + "; ".join(missing), evidence))
            continue
        p95_new, p95_old = values["p95LatencySeconds new"], values["p95LatencySeconds old"]
        tps_new, tps_old = values["tokensPerSecond new"], values["tokensPerSecond old"]
        problems = []
        if p95_new > p95_old * (1 + latency_tol):
            problems.append(f"p95 latency {p95_new:.3g}s vs {p95_old:.3g}s on old-driver pods "
                            f"(more than {latency_tol:.0%} higher)")
        if tps_new < tps_old * (1 - tps_tol):
            problems.append(f"tokens/s {tps_new:.3g} vs {tps_old:.3g} on old-driver pods "
                            f"(more than {tps_tol:.0%} lower)")
        summary = (f"p95 {p95_new:.3g}s vs {p95_old:.3g}s, tokens/s {tps_new:.3g} vs {tps_old:.3g} "
                   f"(new vs old driver, last {comparison.window})")
        if problems:
            findings.append(failed(subject, "; ".join(problems), evidence))
        else:
            findings.append(passed(subject, summary, evidence))
    return findings


def _node_of(labels_: dict[str, str]) -> str | None:
    return next((labels_[key] for key in DCGM_NODE_LABELS if labels_.get(key)), None)


@check("no-new-xid", VALIDATION)
def check_no_new_xid(facts: VerifyFacts) -> list[Finding]:
    """DCGM_FI_DEV_XID_ERRORS since each node's upgrade finished: no Xid but those pod deletion causes."""
    if facts.prometheus is None:
        return [inconclusive(n.name, "no Prometheus: pass --prometheus URL") for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        since = facts.finished_at.get(node.name)
        if since is None or facts.xid is None:
            findings.append(inconclusive(node.name, "when the upgrade finished is not known (no upgrade-done "
                                         "write, no validation result), so 'since the upgrade' has no start"))
            continue
        if facts.xid.error:
            findings.append(inconclusive(node.name, facts.xid.error, {"query": facts.xid.expr}))
            continue
        series = [s for s in facts.xid.series if _node_of(s.labels) == node.name]
        points = [(t, v) for s in series for t, v in s.points if t >= since]
        started = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        evidence: dict[str, Any] = {"query": facts.xid.expr, "since": started, "series": len(series),
                                    "ignored": sorted(EXPECTED_XIDS)}
        if not points:
            findings.append(inconclusive(node.name, f"no {DCGM_XID} sample since {started}: DCGM Exporter does not "
                                         "report this node to Prometheus", evidence))
            continue
        seen: dict[int, float] = {}
        for t, v in points:
            if finite(v) is not None and int(v) != 0:
                seen.setdefault(int(v), t)
        unexpected = {x: t for x, t in seen.items() if x not in EXPECTED_XIDS}
        evidence["xids"] = [{"xid": x, "first": datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             "expected": x in EXPECTED_XIDS} for x, t in sorted(seen.items())]
        if unexpected:
            findings.append(failed(node.name, f"Xid {', '.join(str(x) for x in sorted(unexpected))} since the upgrade "
                                   f"finished ({started})", evidence))
        else:
            note = f" (ignored, expected during pod deletion: {', '.join(str(x) for x in sorted(seen))})" if seen else ""
            findings.append(passed(node.name, f"no new Xid since {started}{note}", evidence))
    return findings


@check("dcgm-metrics", VALIDATION)
def check_dcgm_metrics(facts: VerifyFacts) -> list[Finding]:
    """DCGM Exporter series arrive for the node (last 5 minutes) with DCGM_FI_DRIVER_VERSION the target."""
    if facts.prometheus is None or facts.dcgm is None:
        return [inconclusive(n.name, "no Prometheus: pass --prometheus URL") for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        evidence: dict[str, Any] = {"query": facts.dcgm.expr}
        if facts.dcgm.error:
            findings.append(inconclusive(node.name, facts.dcgm.error, evidence))
            continue
        drivers: dict[str, int] = {}
        for sample in facts.dcgm.samples:
            if _node_of(sample.labels) == node.name:
                version = sample.labels.get(DCGM_DRIVER_LABEL, "")
                drivers[version] = drivers.get(version, 0) + int(finite(sample.value) or 0)
        evidence["seriesByDriver"] = drivers
        matching = {v: n for v, n in drivers.items() if v and job_result.driver_matches(node.target, v)}
        if matching:
            findings.append(passed(node.name, f"{sum(matching.values())} {DCGM_SERIES} series with "
                                   f"{DCGM_DRIVER_LABEL}={node.target}", evidence))
        elif drivers:
            findings.append(failed(node.name, f"DCGM reports driver {', '.join(sorted(v or '(none)' for v in drivers))}"
                                   f", not {node.target}", evidence))
        else:
            findings.append(inconclusive(node.name, f"no {DCGM_SERIES} series for this node in the last 5 minutes",
                                         evidence))
    return findings


def result_identity_problem(result: job_result.Result, node: UpgradedNode, cluster: str) -> str | None:
    """Why ``result`` is not this node's validation on its target, or None: it must name the node, the cluster
    and the target driver, and the driver its own ``driver-version`` check saw must be that driver."""
    named = []
    if result.node != node.name:
        named.append(f"node {result.node}")
    if result.cluster != cluster:
        named.append(f"cluster {result.cluster}")
    if not job_result.driver_matches(node.target, result.targetDriver):
        named.append(f"driver {result.targetDriver}")
    if named:
        return f"the result names {', '.join(named)}, not this node's validation on {node.target} in {cluster}"
    seen = result.check("driver-version")
    reported = seen.evidence.get("reported") if seen is not None else None
    if isinstance(reported, str) and reported and not job_result.driver_matches(node.target, reported):
        return f"the result's driver-version check saw driver {reported}, not {node.target}"
    return None


@check("validation-job", VALIDATION)
def check_validation_job(facts: VerifyFacts) -> list[Finding]:
    """The validation job's result for the target driver passed on the node (workload.result, on the Node), it is
    that node's result on that driver, and no failed validation holds the node (checks/hold.py)."""
    if facts.spec.validation is None:
        return [failed(n.name, "the stack declares no validation job (the validation block)") for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        parsed, error = validation_result(node.node, node.target)
        key = job_result.result_annotation(node.target)
        hold = _hold_of(node.node)
        if error:
            findings.append(failed(node.name, error, {"annotation": key}))
            continue
        if parsed is None:
            if hold is not None:
                findings.append(failed(node.name, hold["message"], {"annotation": key, "hold": hold}))
            else:
                findings.append(inconclusive(node.name, f"no result for {node.target} yet (annotation {key}): the "
                                             "job has not finished on this node", {"annotation": key}))
            continue
        evidence: dict[str, Any] = {
            "annotation": key, "outcome": parsed.outcome, "startedAt": parsed.startedAt,
            "finishedAt": parsed.finishedAt, "program": parsed.program,
            "measurements": {k_: v for k_, v in parsed.measurements.items()
                             if isinstance(v, (int, float, str)) and not isinstance(v, bool)}}
        if hold is not None:
            evidence["hold"] = hold
        bad = [c for c in parsed.checks if c.status == job_result.FAIL]
        problem = result_identity_problem(parsed, node, facts.spec.cluster.name)
        if problem:
            findings.append(failed(node.name, problem, evidence))
        elif bad:
            findings.append(failed(node.name, "the job failed: " + "; ".join(f"{c.id}: {c.message}" for c in bad),
                                   evidence))
        elif hold is not None:  # validated again and passed, but nobody released the node yet
            findings.append(failed(node.name, f"the job passed at {parsed.finishedAt}, but the node is still "
                                   + hold["message"], evidence))
        else:
            findings.append(passed(node.name, f"the job passed at {parsed.finishedAt} "
                                   f"({len(parsed.checks)} checks)", evidence))
    return findings


def _hold_of(node: Obj) -> dict[str, Any] | None:
    """The failed validation holding ``node``, as evidence with a message; None when none does."""
    read = read_hold(node)
    if read is None:
        return None
    hold, unreadable = read
    why = hold.describe() if hold is not None else f"its hold record cannot be read ({unreadable})"
    return {"annotation": job_result.HOLD_ANNOTATION, "driver": hold.driver if hold else None,
            "checks": list(hold.checks) if hold else [], "at": hold.at if hold else None,
            "message": f"held by a failed validation ({why}): cordoned until a person releases it "
                       "(`gpu-rollout release-node`)"}


# ---------------------------------------------------------------- the attestation of a passing canary


def node_image_of(nodes: list[UpgradedNode], pool: NodePool) -> str | None:
    """The node image the pool's upgraded nodes run (AKS node-image label, EKS AMI release of the newest
    generation), where one is known and they all agree."""
    images = {labels_of(n.node).get(labels.AKS_NODE_IMAGE_VERSION) for n in nodes if n.pool.name == pool.name}
    if len(images) == 1 and None not in images:
        return images.pop()
    newest = pool.newest_generation
    return newest.image if newest is not None else None


def _one(pool: NodePool, what: str, values: set[str]) -> str:
    """The one value the pool's upgraded nodes agree on; AttestationError when they show none or several."""
    if len(values) != 1:
        shown = ", ".join(sorted(values)) or "none"
        raise attestation.AttestationError(f"pool {pool.name}: its upgraded nodes show {what} {shown}, not one value: "
                                           "what the canary ran cannot be attested")
    return values.pop()


def _gpus(node: Obj) -> str | None:
    """GPUs on the node: GFD's nvidia.com/gpu.count, else the device plugin's capacity where no MIG slices it."""
    value = labels_of(node).get(labels.GPU_COUNT)
    if value is None and not any(key.startswith(labels.MIG_RESOURCE_PREFIX) for key in status_of(node).get("capacity") or {}):
        value = (status_of(node).get("capacity") or {}).get(labels.GPU_RESOURCE)
    return str(value) if value is not None else None


def _mig_config(node: Obj) -> str:
    """The node's MIG layout (nvidia.com/mig.config); without the label, all-disabled unless MIG devices are
    advertised, which a layout nothing manages shows as ``unmanaged`` (equal to no declared layout)."""
    value = labels_of(node).get(labels.MIG_CONFIG)
    if value:
        return value
    advertised = any(key.startswith(labels.MIG_RESOURCE_PREFIX) for key in status_of(node).get("capacity") or {})
    return "unmanaged" if advertised else labels.MIG_CONFIG_DISABLED


def pool_traffic(facts: VerifyFacts, pool: NodePool) -> tuple[bool, str]:
    """Whether the pool served model traffic during the soak, and what showed it: a declared model whose pods
    on the pool's upgraded nodes answered verify's request and served requests Prometheus counted since the
    soak started."""
    seen = facts.traffic.get(pool.name, [])
    if not seen:
        return False, "no model of the stack runs on the pool's upgraded nodes"
    notes: list[str] = []
    served = False
    for model, pods, query in seen:
        answered = any(p.outcome == "answered" and p.pod.split("/", 1)[-1] in pods for p in facts.probes)
        total, problem = _value(query) if query is not None else (None, "no request counter for its engine")
        # Whether, not how many: the count moves with the moment verify asks, what the pool was does not.
        if total is None:
            seen_requests = f"requests not known ({problem})"
        else:
            seen_requests = "requests served" if total > 0 else "no request served"
        notes.append(f"{model.name} on {len(pods)} pod(s): {seen_requests} during the soak, "
                     + ("answered verify's request" if answered else "no answer to verify's request"))
        served = served or (answered and total is not None and total > 0)
    return served, "; ".join(notes)


def attested_pool(facts: VerifyFacts, pool: NodePool) -> attestation.AttestedPool:
    """What the pool's upgraded nodes are, as the cluster shows them (GFD labels, node info), for the attestation."""
    nodes = [n.node for n in facts.nodes if n.pool.name == pool.name]
    product = _one(pool, labels.GPU_PRODUCT, {gpu_products.base_product(v) for n in nodes
                                              if (v := labels_of(n).get(labels.GPU_PRODUCT))})
    count = _one(pool, labels.GPU_COUNT, {g for n in nodes if (g := _gpus(n)) is not None})
    gpus = int(count) if count.isdigit() else 0
    nvswitch = gpu_products.is_nvswitch_system(product, gpus)
    if nvswitch is None:  # a product the NVSwitch table does not know: the stack's word for it
        nvswitch = pool.nvswitch
    served, traffic = pool_traffic(facts, pool)
    kernels = {str(v) for n in nodes if (v := (status_of(n).get("nodeInfo") or {}).get("kernelVersion"))}
    images = {str(v) for n in nodes if (v := (status_of(n).get("nodeInfo") or {}).get("osImage"))}
    return attestation.AttestedPool.of(
        pool.name, product, node_image_of(facts.nodes, pool), gpus_per_node=gpus, nvswitch=nvswitch,
        fabric_manager=(cast(attestation.FabricManagerSource, manifests.fabric_manager_source(facts.spec, pool))
                        if nvswitch else None),
        mig_config=_one(pool, labels.MIG_CONFIG, {_mig_config(n) for n in nodes}),
        kernel=", ".join(sorted(kernels)) or None, os_image=", ".join(sorted(images)) or None,
        served_traffic=served, traffic=traffic,
    )


def driver_mode(spec: FleetSpec) -> attestation.DriverMode:
    """Who installed the driver on the canary: the node image, per-pool NVIDIADrivers or the ClusterPolicy."""
    if spec.driver.owner == DriverOwner.IMAGE:
        return "image"
    return "nvidiadriver" if spec.gpuOperator.useNvidiaDriverCrd else "clusterpolicy"


def attest(facts: VerifyFacts, results: list[Any], *, stack: str, git_commit: str,
           signing_key: Ed25519PrivateKey | None) -> attestation.Attestation:
    """The sealed, signed attestation of a passing verify (spec.attestation's format); AttestationError otherwise."""
    soak = facts.soak_start
    if soak is None:
        raise attestation.AttestationError("when the canary's upgrade finished is not known: no soak start")
    drivers = {n.target for n in facts.nodes}
    if len(drivers) != 1:
        raise attestation.AttestationError(f"the upgraded nodes run more than one target ({', '.join(sorted(drivers))})")
    pools = sorted({n.pool.name: n.pool for n in facts.nodes}.values(), key=lambda p: p.name)
    return attestation.seal(
        stack=stack,
        cluster=facts.spec.cluster.name,
        driver=drivers.pop(),
        operator_chart=facts.spec.gpuOperator.chartVersion,
        driver_mode=driver_mode(facts.spec),
        pools=[attested_pool(facts, p) for p in pools],
        checks=[attestation.AttestedCheck(id=r.id, status=r.status.value, subject=r.subject, message=r.message,
                                          evidence=r.evidence or {}) for r in results],
        soak_start=datetime.fromtimestamp(soak, UTC),
        soak_end=datetime.fromtimestamp(facts.now, UTC),
        git_commit=git_commit,
        signing_key=signing_key,
    )
