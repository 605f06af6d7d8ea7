"""The one read of `gpu-rollout verify`: the cluster, the model servers and Prometheus, into
:class:`checks.verify_facts.VerifyFacts`, which the checks of :mod:`checks.validation` judge without reading
anything. Nothing here writes to the cluster.

**Kubernetes.** A LIST of nodes (the cluster's identity is checked first: another cluster is refused before
anything else is read), one of the operator's namespace (its validator, driver and DCGM Exporter pods), one or
two per declared model. **Model servers.** One test request to each model pod on an upgraded node through the
API server's pod proxy. **Prometheus** (``validation.prometheus``: a URL, or a Service through the API server's
service proxy; ``--prometheus`` overrides it): the soak as a window from its start to now, at scrape resolution
(:mod:`checks.soak_metrics`).

The upgraded nodes are the nodes of every pool the stack releases (a held pool's nodes do not move), each with
its pool's target driver: the canary pool and released prod pools on ``driver.version``; an image-owned pool with
generations on the newest live generation's driver, whose nodes are the ones checked.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from checks import kube as k
from checks import soak_metrics as metrics
from checks.errors import AccessDeniedError, ClusterError
from checks.identity import identify_cluster, kube_system_uid, read_records, refuse_if_refuted
from checks.nodestate import NoNodesError, node_driver_version
from checks.objects import Obj, labels_of, meta, name_of, namespaced_name, spec_of, status_of
from checks.progress import model_selector, pod_ready
from checks.prometheus import Prometheus
from checks.serving import DEFAULT_PORTS, engine_of
from checks.verify_facts import Probe, VerifyFacts, Window, not_yet_upgraded, upgrade_finished_at, upgraded_nodes
from fleetspec.model import FleetSpec, Model, ServingEngine

EXPORTER_LABEL = ("app", "nvidia-dcgm-exporter")  # the operator's DCGM Exporter pods
DEFAULT_PROMPT = "Say hello."
TEST_MAX_TOKENS = 8


# ---------------------------------------------------------------- model servers


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
                f"models[{model.name}].serving.engine (vllm, tgi, triton or sglang)", {"image": model.image})
    port = model.serving.port or DEFAULT_PORTS[engine]
    evidence: dict[str, Any] = {"engine": engine.value, "port": port}
    if engine in (ServingEngine.VLLM, ServingEngine.SGLANG):  # both serve the OpenAI completions API
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


# ---------------------------------------------------------------- the one read


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
    exporters = metrics.Exporters()
    daemonsets: set[str] = set()  # the exporter's DaemonSets, whose pods of the past kube_pod_info names
    for pod in kube.list(k.PODS, namespace=spec.gpuOperator.namespace):
        node = spec_of(pod).get("nodeName")
        if node in names:
            operator_pods.setdefault(node, []).append(pod)
        if labels_of(pod).get(EXPORTER_LABEL[0]) == EXPORTER_LABEL[1]:
            daemonsets |= {str(o.get("name")) for o in meta(pod).get("ownerReferences") or []
                           if o.get("kind") == "DaemonSet" and o.get("name")}
        if labels_of(pod).get(EXPORTER_LABEL[0]) == EXPORTER_LABEL[1] and node:
            exporters.by_pod[name_of(pod)] = str(node)
            if status_of(pod).get("podIP"):
                exporters.by_ip[str(status_of(pod)["podIP"])] = str(node)
    finished = {n.name: upgrade_finished_at(n.node, n.target) for n in nodes}
    facts = VerifyFacts(spec, now, identity, nodes, operator_pods, finished, [], [],
                        prometheus.where if prometheus else None)
    facts.kube_system_uid = kube_system_uid(kube)
    facts.old_nodes = not_yet_upgraded(spec, all_nodes)
    soak = facts.soak_start
    bucket = float((spec.validation.bucketMinutes if spec.validation else 60) * 60)
    facts.window = Window(soak, now, bucket) if soak is not None else None
    reader = metrics.Reader(prometheus) if prometheus is not None else None

    ask = ask or _Asker(kube)
    prompt = spec.validation.prompt if spec.validation else DEFAULT_PROMPT
    released = {n.pool.name for n in nodes}
    targets = {n.target for n in nodes}
    nodes_by_name = {name_of(n): n for n in all_nodes}
    upgraded = {n.name: n for n in nodes}
    drivers = {name: node_driver_version(n) for name, n in nodes_by_name.items()}
    old_nodes = {node for node, driver in drivers.items() if driver is not None and driver not in targets}
    first_finished = min((t for t in finished.values() if t is not None), default=None)
    for model in spec.models:
        if not released & set(model.nodePools):
            continue
        pods = kube.list(k.PODS, namespace=model.namespace, label_selector=model_selector(model))
        candidates = pods if model.serving.baselineMatchLabels is None else kube.list(
            k.PODS, namespace=model.namespace, label_selector=metrics.baseline_selector(model))
        new = _running_on(pods, names)
        facts.probes += [_probe(ask, model, pod, prompt) for pod in sorted(new, key=name_of)]
        pattern = metrics.pod_pattern(pods)
        placement = metrics.placement(reader, model, pattern, facts.window)
        facts.comparisons += metrics.comparisons(reader, spec, model, [p for p in new if pod_ready(p)], candidates,
                                          nodes_by_name, upgraded, old_nodes, facts.window, first_finished, pattern,
                                          placement)
        facts.restarts.append(metrics.restarts(reader, model, new, pattern, placement, names, facts.window))
        for pool in sorted(released & set(model.nodePools)):
            on_pool = sorted(name_of(p) for p in _running_on(pods, {n.name for n in nodes if n.pool.name == pool}))
            if on_pool:
                facts.traffic.setdefault(pool, []).append((model, on_pool, *metrics.served_requests(reader, model, on_pool, soak, now)))

    if reader is not None:
        metrics.trace_exporters(reader, facts, exporters, spec.gpuOperator.namespace, daemonsets)
        metrics.read_dcgm(reader, facts, exporters)
        metrics.read_coverage(reader, facts, exporters)
        metrics.read_xids(reader, facts, exporters)
    return facts


