"""What Prometheus showed over the soak, for `gpu-rollout verify`: read by :func:`checks.verify_read.gather` into
the facts of :mod:`checks.verify_facts`, at scrape resolution, never sampled at a coarse step.

- *Xids*: per node from its own upgrade's end, every change of ``DCGM_FI_DEV_XID_ERRORS`` (a gauge holding the
  last Xid, so a 79 overwritten by a 43 within the hour must be caught between two looks) or, where the exporter
  exports it, every rise of ``DCGM_EXP_XID_ERRORS_COUNT``. The window is looked at hour by hour with
  ``changes()`` and ``max_over_time()`` over ranges that overlap (every raw sample and its predecessor are in
  one); only the hours in which a series changed or appeared are read sample by sample, so a week of a large
  canary stays small.
- *Latency, tokens/s and error rate*: the engine's additive parts (:mod:`checks.serving`) per bucket
  (``validation.bucketMinutes``) for the model's new-driver pods and its like-for-like baseline, one range query
  per part whose step and range are both the bucket (every sample counts once), the last, shorter bucket by an
  instant query.
- *Restarts and OOM kills* of the model's pods on upgraded nodes, per bucket, from kube-state-metrics where it
  is scraped, else from the pods' own status (what that misses is named).
- *Coverage*: per GPU of each upgraded node, the buckets DCGM samples arrived in (``count_over_time`` per bucket),
  which `dcgm-metrics` and `no-new-xid` judge against ``validation.minJudgedFraction``; DCGM Exporter pods replaced
  during the soak are traced to their nodes through kube-state-metrics' ``kube_pod_info``, else the gap is named.
- *DCGM series* of each node now, with their driver label, matched to nodes in both exporter deployments: the
  ``Hostname`` label is the node where the exporter embeds the host engine; with the operator's standalone
  ``nvidia-dcgm`` it names that host engine instead, and the node comes from a ``kubernetes_node``/``node`` label
  (relabelling), else from the exporter pod the series was scraped from (``instance`` or ``pod``).

Every query is split into several when its node or pod regex would pass the client's size limit
(:func:`checks.prometheus.split_query`); parts add up. A query Prometheus does not answer is kept as the reason
the check it feeds is inconclusive, never raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from checks.objects import Obj, gpu_request, labels_of, meta, name_of, spec_of, status_of
from checks.progress import pod_ready
from checks.prometheus import Prometheus, PrometheusError, Series, escape_label, escape_regex, finite, split_query
from checks.serving import ENGINE_PARTS, METRICS, PART_METRIC, EngineParts, Figures, Parts, engine_of, figures, fill
from checks.verify_facts import (DCGM_DRIVER_LABEL, DCGM_SERIES, DCGM_XID, DCGM_XID_COUNT, KSM_INFO, KSM_RESTARTS,
                                 KSM_TERMINATED, NO_PROMETHEUS, Baseline,
                                 BucketFigures, Comparison, DcgmCoverage, DcgmNode, NodeXids, Restart, Restarts, UpgradedNode,
                                 VerifyFacts, Window, XidEvent)
from gpu_knowledge import gpu_products, labels
from fleetspec.model import FleetSpec, Model, ServingEngine, UpgradePolicy

# The labels that can name the node a DCGM series is about: Hostname (dcgm-exporter; hostname in newer
# templates) where the exporter embeds the host engine, kubernetes_node/node where a relabelling adds it.
DCGM_NODE_LABELS = ("Hostname", "hostname", "kubernetes_node", "node")
XID_STEP = 3600.0  # the Xid series are looked at an hour at a time...
XID_OVERLAP = 600.0  # ...over ranges 10 minutes longer: each raw sample's predecessor is in the same range
# The window before an upgrade ends before the first node's pods could have been drained: the upgrade policy's own
# bounds on waiting for jobs, deleting GPU pods and draining, and a margin for the driver's restart and validation.
BEFORE_MARGIN = 3600.0
UNBOUNDED_STEP = 86400.0  # a step whose timeout is 0 (waits forever) is taken as lasting at most a day, said so
BEFORE_SPAN = 86400.0  # and lasts a day: a whole daily cycle of traffic


# ---------------------------------------------------------------- the model's pods


def before_guard(spec: FleetSpec) -> tuple[float, str]:
    """How long before the first node finished its upgrade the window before it must end, and why: the
    ``waitForCompletion`` (when it waits for pods), ``podDeletion`` and ``drain`` (when enabled) timeouts of the
    policy that bounds them longest (the stack's, or a pool's own: ``FleetSpec.upgrade_policy``), and a margin;
    a step with no timeout (0) counts as a day, and the reason says so."""
    candidates = [(spec.gpuOperator.upgradePolicy, "")]
    if spec.per_pool_upgrade_policies:
        candidates += [(spec.upgrade_policy(pool), f" (pool {pool.name}'s own upgradePolicy)") for pool in spec.nodePools]
    policy, whose = max(candidates, key=lambda candidate: _guard_steps(candidate[0]))  # the first of the longest
    seconds = _guard_steps(policy)
    hours, minutes = divmod(round(seconds) // 60, 60)
    return seconds, (f"ends {hours} h {minutes:02d} min before the first node finished its upgrade: "
                     f"{' + '.join(_guard_parts(policy))}{whose} + a {BEFORE_MARGIN / 3600:g} h margin, so no pod "
                     "drained for the upgrade is in it")


def _guard_timeouts(policy: UpgradePolicy) -> list[tuple[str, int]]:
    steps = [("podDeletion", policy.podDeletion.timeoutSeconds)]
    if policy.waitForCompletion.podSelector:
        steps.insert(0, ("waitForCompletion", policy.waitForCompletion.timeoutSeconds))
    if policy.drain.enable:
        steps.append(("drain", policy.drain.timeoutSeconds))
    return steps


def _guard_steps(policy: UpgradePolicy) -> float:
    return BEFORE_MARGIN + sum(float(t) if t else UNBOUNDED_STEP for _, t in _guard_timeouts(policy))


def _guard_parts(policy: UpgradePolicy) -> list[str]:
    return [f"{name}.timeoutSeconds {t}" if t else f"{name}.timeoutSeconds 0 (no bound: taken as a day)"
            for name, t in _guard_timeouts(policy)]


def baseline_selector(model: Model) -> str:
    chosen = model.serving.baselineMatchLabels or model.matchLabels
    return ",".join(f"{key}={value}" for key, value in sorted(chosen.items()))


def pod_pattern(pods: list[Obj]) -> str | None:
    """A regex of the names the pods' controllers give their pods, past and future: a ReplicaSet's Deployment
    ``<deployment>-<hash>-<suffix>``, a StatefulSet's ``<name>-<ordinal>``, a pod of no controller its own name.
    So the model's pods before the upgrade, deleted since, are found by name."""
    alternatives = set()
    for pod in pods:
        owner = next((o for o in meta(pod).get("ownerReferences") or [] if o.get("controller")), None)
        kind, owner_name = (owner or {}).get("kind"), str((owner or {}).get("name") or "")
        if kind == "ReplicaSet" and "-" in owner_name:
            alternatives.add(escape_regex(owner_name.rsplit("-", 1)[0]) + "-[a-z0-9]+-[a-z0-9]+")
        elif kind == "StatefulSet" and owner_name:
            alternatives.add(escape_regex(owner_name) + "-[0-9]+")
        else:
            alternatives.add(escape_regex(name_of(pod)))
    return "|".join(sorted(alternatives)) or None


# ---------------------------------------------------------------- reading


@dataclass
class Reader:
    """Queries with their failures kept: a failed query is a reason, never an exception out of gather."""

    prometheus: Prometheus
    errors: list[str] = field(default_factory=list)

    def split(self, values: list[str], render: Callable[[str], str]) -> list[str]:
        return split_query(values, render, self.prometheus.max_query_bytes)

    def instant(self, expr: str, at: float) -> list[tuple[dict[str, str], float]] | None:
        try:
            return [(s.labels, v) for s in self.prometheus.query(expr, at=at) if (v := finite(s.value)) is not None]
        except PrometheusError as exc:
            self.errors.append(str(exc))
            return None

    def range(self, expr: str, start: float, end: float, step: float) -> list[Series] | None:
        try:
            return self.prometheus.query_range(expr, start, end, step)
        except PrometheusError as exc:
            self.errors.append(str(exc))
            return None

    def samples(self, expr: str, at: float) -> list[Series] | None:
        try:
            return self.prometheus.query_samples(expr, at)
        except PrometheusError as exc:
            self.errors.append(str(exc))
            return None


def _per_bucket(reader: Reader, exprs: Callable[[str], list[str]], window: Window
                ) -> dict[int, list[tuple[dict[str, str], float]]] | None:
    """Bucket index -> the (labels, value) the expressions give over that bucket: the whole buckets from one range
    query each (the step and ``{window}`` both a bucket), the last, shorter one from an instant query at the end.
    ``exprs(window)`` is the query for a span (split into several parts where it is long). None on a failure."""
    out: dict[int, list[tuple[dict[str, str], float]]] = {}
    buckets = window.buckets()
    if window.full:
        first, last = window.start + window.bucket, window.start + window.full * window.bucket
        for expr in exprs(f"{int(window.bucket)}s"):
            series = reader.range(expr, first, last, window.bucket)
            if series is None:
                return None
            for one in series:
                for at, value in one.points:
                    index = round((at - window.start) / window.bucket)
                    if 1 <= index <= window.full and (v := finite(value)) is not None:
                        out.setdefault(index, []).append((one.labels, v))
    if buckets and buckets[-1].index > window.full:
        rest = buckets[-1]
        for expr in exprs(f"{int(rest.end - rest.start)}s"):
            samples = reader.instant(expr, rest.end)
            if samples is None:
                return None
            out.setdefault(rest.index, []).extend(samples)
    return out


def _parts(engine: EngineParts, reader: Reader, model: Model, pods: list[str] | str, window: Window,
           queries: dict[str, str], side: str) -> dict[int, Parts] | None:
    """The engine's parts for ``pods`` (a list of names, split as needed; or one regex) in each bucket."""
    by_bucket: dict[int, Parts] = {}
    for part, template in engine.templates().items():
        def exprs(span: str, template: str = template) -> list[str]:
            def render(regex: str) -> str:
                return fill(template, model.namespace, regex, span)
            return [render(pods)] if isinstance(pods, str) else reader.split(pods, render)
        if part in ("histogram", "requests"):
            queries.setdefault(f"{'p95LatencySeconds' if part == 'histogram' else 'requests'} {side}",
                               exprs(f"{int(window.bucket)}s")[0])
        found = _per_bucket(reader, exprs, window)
        if found is None:
            reader.errors[-1] = f"{PART_METRIC[part]} {side}: {reader.errors[-1]}"
            return None
        for index, samples in found.items():
            parts = by_bucket.setdefault(index, Parts())
            for labels_, value in samples:
                if part == "histogram":
                    bound = float(labels_.get("le", "nan"))
                    parts.histogram[bound] = parts.histogram.get(bound, 0.0) + value
                else:
                    parts.values[part] = parts.values.get(part, 0.0) + value
    return by_bucket


def _span_parts(engine: EngineParts, reader: Reader, model: Model, pattern: str, start: float, end: float
                ) -> Parts | None:
    """The engine's parts for the pods ``pattern`` matches over one span (the window before the upgrade)."""
    total = Parts()
    for part, template in engine.templates().items():
        samples = reader.instant(fill(template, model.namespace, pattern, f"{int(end - start)}s"), end)
        if samples is None:
            return None
        for labels_, value in samples:
            if part == "histogram":
                bound = float(labels_.get("le", "nan"))
                total.histogram[bound] = total.histogram.get(bound, 0.0) + value
            else:
                total.values[part] = total.values.get(part, 0.0) + value
    return total


def _custom(reader: Reader, model: Model, template: str, pods: list[str] | str, window: Window | None,
            span: tuple[float, float] | None = None) -> dict[int, float] | None:
    """A declared query (``serving.queries.<metric>``) per bucket, or over ``span`` (index 0): one number each."""
    regex = pods if isinstance(pods, str) else "|".join(escape_regex(p) for p in sorted(set(pods)))
    if span is not None:
        found = reader.instant(fill(template, model.namespace, regex, f"{int(span[1] - span[0])}s"), span[1])
        return None if found is None else {0: found[0][1]} if len(found) == 1 else {}
    assert window is not None
    samples = _per_bucket(reader, lambda w: [fill(template, model.namespace, regex, w)], window)
    if samples is None:
        return None
    return {index: values[0][1] for index, values in samples.items() if len(values) == 1}


def _side(engine: EngineParts, reader: Reader, model: Model, pods: list[str] | str, window: Window,
          queries: dict[str, str], side: str) -> tuple[dict[int, Figures], Figures] | None:
    """Per bucket and over the whole window, what one side showed (custom queries replace the engine's figure)."""
    by_bucket = _parts(engine, reader, model, pods, window, queries, side)
    if by_bucket is None:
        return None
    whole = Parts()
    for parts in by_bucket.values():
        whole.add(parts)
    per = {index: figures(parts, engine) for index, parts in by_bucket.items()}
    total = figures(whole, engine)
    for metric in METRICS:
        template = getattr(model.serving.queries, metric)
        if template is None:
            continue
        queries[f"{metric} {side}"] = fill(template, model.namespace, pods if isinstance(pods, str) else
                                           "|".join(escape_regex(p) for p in sorted(set(pods))), f"{int(window.bucket)}s")
        values = _custom(reader, model, template, pods, window)
        whole_value = _custom(reader, model, template, pods, None, (window.start, window.end))
        if values is None or whole_value is None:
            return None
        per = {index: _replace(per.get(index, Figures()), metric, values.get(index)) for index in
               set(per) | set(values)}
        total = _replace(total, metric, whole_value.get(0))
    return per, total


def _replace(found: Figures, metric: str, value: float | None) -> Figures:
    return Figures(**{**{m: found.get(m) for m in ("requests", *METRICS)}, metric: value})


def _before_figures(engine: EngineParts, reader: Reader, model: Model, baseline: Baseline,
                    queries: dict[str, str]) -> Figures | None:
    assert baseline.start is not None and baseline.end is not None
    pattern = baseline.pods[0]
    parts = _span_parts(engine, reader, model, pattern, baseline.start, baseline.end)
    if parts is None:
        return None
    found = figures(parts, engine)
    queries.setdefault("p95LatencySeconds old", fill(engine.histogram or engine.quantile_sum or engine.requests,
                                                     model.namespace, pattern, f"{int(baseline.end - baseline.start)}s"))
    for metric in METRICS:
        template = getattr(model.serving.queries, metric)
        if template is not None:
            value = _custom(reader, model, template, pattern, None, (baseline.start, baseline.end))
            if value is None:
                return None
            found = _replace(found, metric, value.get(0))
    return found


# ---------------------------------------------------------------- the comparison's sides


@dataclass(frozen=True)
class _Placement:
    """Where the model's pods ran during the window, from kube-state-metrics (pod -> node); empty without it."""

    nodes: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def placement(reader: Reader | None, model: Model, pattern: str | None, window: Window | None) -> _Placement:
    if reader is None or pattern is None or window is None:
        return _Placement()
    expr = (f'max by (pod, node) (max_over_time({KSM_INFO}{{namespace="{model.namespace}",pod=~"{pattern}"}}'
            f"[{int(window.end - window.start)}s]))")
    found = reader.instant(expr, window.end)
    if found is None:
        return _Placement(error=reader.errors[-1])
    return _Placement({labels_["pod"]: labels_.get("node", "") for labels_, _ in found if labels_.get("pod")})


def _product_of(node: Obj | None) -> str | None:
    product = labels_of(node).get(labels.GPU_PRODUCT) if node is not None else None
    return gpu_products.base_product(product) if product else None


def comparisons(reader: Reader | None, spec: FleetSpec, model: Model, new: list[Obj], candidates: list[Obj],
                 nodes_by_name: dict[str, Obj], upgraded: dict[str, UpgradedNode], old_nodes: set[str],
                 window: Window | None, first_finished: float | None, pattern: str | None,
                 placement: _Placement) -> list[Comparison]:
    """One comparison per GPU product and GPUs per pod among the model's Ready pods on upgraded nodes."""
    engine = engine_of(model)
    groups: dict[tuple[str | None, int], list[Obj]] = {}
    for pod in new:
        node = nodes_by_name.get(str(spec_of(pod).get("nodeName")))
        groups.setdefault((_product_of(node), gpu_request(spec_of(pod).get("containers") or [])), []).append(pod)
    if not groups:
        return [Comparison(model, engine, None, None, [], reason="no Ready pod of the model runs on an upgraded node")]
    out = []
    for (product, gpus), pods in sorted(groups.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        comparison = Comparison(model, engine, product, gpus, sorted(name_of(p) for p in pods))
        out.append(comparison)
        old = [p for p in candidates if spec_of(p).get("nodeName") in old_nodes and pod_ready(p)]
        like = [p for p in old if _product_of(nodes_by_name.get(str(spec_of(p).get("nodeName")))) == product
                and gpu_request(spec_of(p).get("containers") or []) == gpus]
        comparison.excluded = [
            f"{name_of(p)} ({_product_of(nodes_by_name.get(str(spec_of(p).get('nodeName')))) or 'unknown product'}, "
            f"{gpu_request(spec_of(p).get('containers') or [])} GPU(s) per pod)" for p in old if p not in like]
        if reader is None:
            comparison.reason = NO_PROMETHEUS
            continue
        if window is None or first_finished is None:
            comparison.reason = ("when the canary's upgrade finished is not known (no upgrade-done write, no "
                                 "validation result), so the soak has no start")
            continue
        if not window.buckets():
            comparison.reason = f"the soak has lasted {window.end - window.start:.0f}s: no bucket to judge yet"
            continue
        if engine is None and any(getattr(model.serving.queries, m) is None for m in METRICS):
            missing = [m for m in METRICS if getattr(model.serving.queries, m) is None]
            comparison.reason = (f"no query for {', '.join(missing)}: the engine of image {model.image} is not known; "
                                 "set serving.engine or serving.queries." + missing[0])
            continue
        what = f"{product or 'an unknown GPU product'} with {gpus} GPU(s) per pod"
        if like:
            comparison.baseline = Baseline("old-driver pods", sorted(name_of(p) for p in like),
                                           f"the Ready pods matching {baseline_selector(model)} on old-driver nodes "
                                           f"of {what}, over the same buckets")
        elif pattern is not None and _before_is_like(spec, model, upgraded, product, placement):
            guard, why = before_guard(spec)
            end = first_finished - guard
            comparison.baseline = Baseline(
                "before the upgrade", [pattern],
                f"the model's own pods ({pattern}) over a day before the canary's first node was drained for its "
                f"upgrade (the same {what}: no old-driver pod of it runs now)", end - BEFORE_SPAN, end, why)
        else:
            unlike = f"; left out as not like for like: {', '.join(comparison.excluded)}" if comparison.excluded else ""
            comparison.reason = (f"no like-for-like baseline: no Ready pod matching {baseline_selector(model)} "
                                 f"in namespace {model.namespace} runs on an old-driver node of {what}{unlike}, and "
                                 "the model's pods before the upgrade ran on pools of another GPU product; never "
                                 "compared across products (serving.baselineMatchLabels names the pods to compare)")
            continue
        _read_comparison(reader, comparison, placement, upgraded, nodes_by_name, window)
    return out


def _before_is_like(spec: FleetSpec, model: Model, upgraded: dict[str, UpgradedNode], product: str | None,
                    placement: _Placement) -> bool:
    """Whether the model's pods before the upgrade ran on nodes like the new-driver pods': on nodes that were
    upgraded since (kube-state-metrics shows where they ran), else every pool of the model is a moved pool of
    that GPU product."""
    if placement.nodes:
        return any(node in upgraded for node in placement.nodes.values())
    moved = {n.pool.name for n in upgraded.values()}
    return all(name in moved and gpu_products.base_product(spec.pool(name).gpuProduct) == product
               for name in model.nodePools)


def _read_comparison(reader: Reader, comparison: Comparison, placement: _Placement,
                     upgraded: dict[str, UpgradedNode], nodes_by_name: dict[str, Obj], window: Window) -> None:
    model, engine_kind, baseline = comparison.model, comparison.engine, comparison.baseline
    assert baseline is not None
    engine = ENGINE_PARTS[engine_kind] if engine_kind is not None else ENGINE_PARTS[ServingEngine.VLLM]
    # The new side: the Ready pods on upgraded nodes now, and those kube-state-metrics saw there during the window.
    new = set(comparison.new_pods) | {pod for pod, node in placement.nodes.items() if node in upgraded
                                      and _product_of(nodes_by_name.get(node)) == comparison.product}
    comparison.new_pods = sorted(new)
    mark = len(reader.errors)
    new_side = _side(engine, reader, model, comparison.new_pods, window, comparison.queries, "new")
    if baseline.kind == "old-driver pods":
        old_side = _side(engine, reader, model, baseline.pods, window, comparison.queries, "old")
    else:
        reference = _before_figures(engine, reader, model, baseline, comparison.queries)
        old_side = None if reference is None else ({b.index: reference for b in window.buckets()}, reference)
    comparison.errors = reader.errors[mark:]
    if new_side is None or old_side is None:
        return
    for bucket in window.buckets():
        comparison.buckets.append(BucketFigures(bucket, new_side[0].get(bucket.index, Figures()),
                                                old_side[0].get(bucket.index, Figures())))
    comparison.whole = (new_side[1], old_side[1])


# ---------------------------------------------------------------- restarts


def _at_bucket_ends(reader: Reader, expr: str, window: Window
                    ) -> dict[tuple[str, str], dict[int, float]] | None:
    """(pod, container) -> bucket index -> the counter's value at that bucket's end (index 0: the window's start).
    Differences of the counter's own values, never ``increase()``, whose extrapolation would turn 12 restarts
    into 13."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    series = reader.range(expr, window.start, window.start + window.full * window.bucket, window.bucket)
    if series is None:
        return None
    for one in series:
        for at, value in one.points:
            index = round((at - window.start) / window.bucket)
            out.setdefault((one.labels.get("pod", ""), one.labels.get("container", "")), {})[index] = value
    buckets = window.buckets()
    if buckets and buckets[-1].index > window.full:
        samples = reader.instant(expr, window.end)
        if samples is None:
            return None
        for labels_, value in samples:
            out.setdefault((labels_.get("pod", ""), labels_.get("container", "")), {})[buckets[-1].index] = value
    return out


def restarts(reader: Reader | None, model: Model, live: list[Obj], pattern: str | None, placement: _Placement,
              upgraded: set[str], window: Window | None) -> Restarts:
    on_upgraded = sorted(name_of(p) for p in live)
    if reader is not None and pattern is not None and window is not None and placement.nodes and window.buckets():
        pods = {pod: node for pod, node in placement.nodes.items() if node in upgraded}
        found = Restarts(model, "kube-state-metrics", sorted(set(pods) | set(on_upgraded)))
        selector = f'namespace="{model.namespace}",pod=~"{pattern}"'
        counts = _at_bucket_ends(reader, f"max by (pod, container) ({KSM_RESTARTS}{{{selector}}})", window)
        ooms = _per_bucket(reader, lambda w: [f'max by (pod, container) (max_over_time({KSM_TERMINATED}{{{selector},'
                                              f'reason="OOMKilled"}}[{w}]))'], window)
        if counts is None or ooms is None:
            found.error = reader.errors[-1]
            return found
        if not counts:
            found.missing.append(f"{KSM_RESTARTS} has no series for the model's pods ({pattern})")
        found.buckets = window.buckets()
        found.judged = {index for (pod, _), by_end in counts.items() if pod in pods for index in by_end if index > 0}
        buckets = {b.index: b for b in window.buckets()}
        oom_at = {(index, labels_.get("pod"), labels_.get("container")) for index, samples in ooms.items()
                  for labels_, value in samples if value >= 1}
        for (pod, container), by_end in sorted(counts.items()):
            previous = by_end.get(0, 0.0)  # its count when the soak started (0 for a pod started since)
            for index in sorted(i for i in by_end if i > 0):
                value = by_end[index]
                count = round(value - previous if value >= previous else value)  # lower: the pod's counter reset
                previous = value
                if count > 0 and pod in pods:
                    found.restarts.append(Restart(pod, container, pods[pod], buckets.get(index), count,
                                                  (index, pod, container) in oom_at))
        return found
    found = Restarts(model, "the pods' status", on_upgraded, buckets=window.buckets() if window else [])
    if reader is None:
        found.missing.append(NO_PROMETHEUS + ": read from the live pods' status instead")
    elif window is not None:
        found.missing.append(f"kube-state-metrics shows none of the model's pods ({KSM_INFO}): read from the live "
                             "pods' status, which misses pods replaced during the soak and cannot tell when a "
                             "restart happened")
    for live_pod in live:
        for status in status_of(live_pod).get("containerStatuses") or []:
            count = int(status.get("restartCount") or 0)
            if count:
                reason = ((status.get("lastState") or {}).get("terminated") or {}).get("reason")
                found.restarts.append(Restart(name_of(live_pod), str(status.get("name", "")),
                                              str(spec_of(live_pod).get("nodeName")), None, count,
                                              reason == "OOMKilled"))
    return found


# ---------------------------------------------------------------- DCGM: which series is which node's


@dataclass
class Exporters:
    """The operator's DCGM Exporter pods: by pod IP and by name, the node each runs on."""

    by_ip: dict[str, str] = field(default_factory=dict)
    by_pod: dict[str, str] = field(default_factory=dict)

    def node_of(self, labels_: dict[str, str], nodes: set[str]) -> tuple[str | None, str | None]:
        """(node, how) a series is about: a node label naming one of ``nodes``, else its exporter pod's node."""
        for key in DCGM_NODE_LABELS:
            if labels_.get(key) in nodes:
                return labels_[key], key
        host = labels_.get("instance", "").rsplit(":", 1)[0]
        if self.by_ip.get(host) in nodes:
            return self.by_ip[host], "instance (the exporter pod's node)"
        if self.by_pod.get(labels_.get("pod", "")) in nodes:
            return self.by_pod[labels_["pod"]], "pod (the exporter pod's node)"
        return None, None

    def selector_of(self, labels_: dict[str, str], node: str) -> str:
        """A label matcher selecting ``node``'s series the way this series of it was told to be the node's."""
        _, how = self.node_of(labels_, {node})
        if how in DCGM_NODE_LABELS:
            return f'{how}="{escape_label(node)}"'
        key = "instance" if how and how.startswith("instance") else "pod"
        return f'{key}="{escape_label(labels_.get(key, ""))}"'


def _dcgm_exprs(reader: Reader, nodes: list[str], exporters: Exporters, fn: Callable[[str], str],
                by_exporter: set[str] | None = None) -> list[str]:
    """Queries ``fn(selector)`` selecting the series of ``nodes`` in either exporter deployment: by the node labels,
    and, for the nodes of ``by_exporter`` (default: all), by the exporter pods on them (their IPs in ``instance``,
    their names in ``pod``)."""
    exprs = reader.split(nodes, lambda r: " or ".join(fn(f'{label}=~"{r}"') for label in DCGM_NODE_LABELS))
    return exprs + _exporter_exprs(reader, set(nodes) if by_exporter is None else by_exporter, exporters, fn)


def _exporter_exprs(reader: Reader, nodes: set[str], exporters: Exporters, fn: Callable[[str], str]) -> list[str]:
    ips = [ip for ip, node in exporters.by_ip.items() if node in nodes]
    pods = [pod for pod, node in exporters.by_pod.items() if node in nodes]
    return (reader.split(ips, lambda r: fn(f'instance=~"({r}):[0-9]+"'))
            + reader.split(pods, lambda r: fn(f'pod=~"{r}"')))


def _by_exporter(facts: VerifyFacts) -> set[str]:
    """The nodes whose DCGM series no node label names (the standalone host engine without a relabelling)."""
    return {name for name, reading in facts.dcgm.items() if reading.matched_by not in DCGM_NODE_LABELS}


def read_dcgm(reader: Reader, facts: VerifyFacts, exporters: Exporters) -> None:
    """Each node's DCGM series now, by driver label: by the node labels first, by its exporter pod where none names
    it; a series both select counts once."""
    names = [n.name for n in facts.nodes]
    wanted = set(names)
    by = ", ".join((*DCGM_NODE_LABELS, "instance", "pod", DCGM_DRIVER_LABEL))

    def count(sel: str) -> str:
        return f"count by ({by}) ({DCGM_SERIES}{{{sel}}})"

    facts.dcgm = {name: DcgmNode(name) for name in names}
    seen: set[tuple[tuple[str, str], ...]] = set()
    for exprs in (_dcgm_exprs(reader, names, exporters, count, set()), None):
        if exprs is None:  # the second pass: by exporter pod, for the nodes no node label named
            exprs = _exporter_exprs(reader, _by_exporter(facts), exporters, count)
        facts.dcgm_query = facts.dcgm_query or (exprs[0] if exprs else None)
        for expr in exprs:
            samples = reader.instant(expr, facts.now)
            if samples is None:
                facts.dcgm_error = reader.errors[-1]
                return
            for labels_, value in samples:
                node, how = exporters.node_of(labels_, wanted)
                if node is None or _key(labels_) in seen:
                    continue
                seen.add(_key(labels_))
                reading = facts.dcgm[node]
                reading.matched_by = reading.matched_by or how
                version = labels_.get(DCGM_DRIVER_LABEL, "")
                reading.drivers[version] = reading.drivers.get(version, 0) + int(value)


def trace_exporters(reader: Reader, facts: VerifyFacts, exporters: Exporters, namespace: str,
                    daemonsets: set[str]) -> None:
    """Add the DCGM Exporter pods of the past (replaced during the soak) to ``exporters``, from kube-state-metrics'
    ``kube_pod_info`` (pod, node, pod IP) over the soak, so their series still name a node; where it shows none,
    ``facts.exporter_history`` names the gap. The pods running now keep their own mapping."""
    since = min((t for t in facts.finished_at.values() if t is not None), default=None)
    if since is None:
        return
    owners = regex_of(sorted(daemonsets)) if daemonsets else "nvidia-dcgm-exporter.*"
    expr = (f'max by (pod, node, pod_ip) (max_over_time({KSM_INFO}{{namespace="{escape_label(namespace)}",'
            f'created_by_kind="DaemonSet",created_by_name=~"{owners}"}}[{max(300, int(facts.now - since))}s]))')
    found = reader.instant(expr, facts.now)
    if found is None:
        facts.exporter_history = f"exporter pods of the past not traced: {reader.errors[-1]}"
        return
    traced = 0
    for labels_, _ in found:
        pod, node, ip = labels_.get("pod", ""), labels_.get("node", ""), labels_.get("pod_ip", "")
        if not pod or not node or pod in exporters.by_pod:
            continue
        traced += 1
        exporters.by_pod[pod] = node
        if ip and ip not in exporters.by_ip:
            exporters.by_ip[ip] = node
    facts.exporter_history = (
        f"{traced} DCGM Exporter pod(s) of the past traced to their nodes through {KSM_INFO}" if found else
        f"{KSM_INFO} (kube-state-metrics) shows no pod of the exporter's DaemonSet ({owners}) in namespace "
        f"{namespace}: series scraped from exporter pods replaced during the soak name no node unless a node label "
        "(Hostname, kubernetes_node, node) does")


def regex_of(values: list[str]) -> str:
    return "|".join(escape_regex(v) for v in values)


def read_coverage(reader: Reader, facts: VerifyFacts, exporters: Exporters) -> None:
    """Per GPU of each upgraded node, the soak's buckets DCGM samples arrived in: ``count_over_time`` of
    DCGM_SERIES per bucket (every raw sample counts once), by node and ``gpu``."""
    window = facts.window
    if window is None:
        return
    buckets = window.buckets()
    facts.coverage = {n.name: DcgmCoverage(n.name, [str(i) for i in range(n.pool.gpusPerNode)], buckets)
                      for n in facts.nodes}
    if not buckets:
        return
    names = sorted(facts.coverage)
    wanted = set(names)
    by = ", ".join((*DCGM_NODE_LABELS, "instance", "pod", "gpu"))

    def exprs(span: str) -> list[str]:
        return _dcgm_exprs(reader, names, exporters,
                           lambda sel: f"sum by ({by}) (count_over_time({DCGM_SERIES}{{{sel}}}[{span}]))",
                           _by_exporter(facts))

    facts.coverage_query = exprs(f"{int(window.bucket)}s")[0]
    found = _per_bucket(reader, exprs, window)
    if found is None:
        facts.coverage_error = reader.errors[-1]
        return
    for index, samples in found.items():
        for labels_, value in samples:
            node, _ = exporters.node_of(labels_, wanted)
            if node is None or value <= 0:
                continue
            reading, gpu = facts.coverage[node], labels_.get("gpu", "")
            if gpu not in reading.gpus:
                reading.gpus.append(gpu)
            reading.seen.setdefault(gpu, set()).add(index)


# ---------------------------------------------------------------- Xids, every one


def _key(labels_: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels_.items()))


_Looks = dict[str, dict[tuple[tuple[str, str], ...], dict[float, tuple[float, float]]]]


def _xid_looks(reader: Reader, facts: VerifyFacts, exporters: Exporters, nodes: list[str], first: float
               ) -> tuple[_Looks, dict[tuple[tuple[str, str], ...], dict[str, str]]] | None:
    """Per source and series, each hourly look from ``first`` to now: (max over the look, changes in it)."""
    span = f"{int(XID_STEP + XID_OVERLAP)}s"
    looks: _Looks = {}
    labels_of_series: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for source, with_changes in ((DCGM_XID_COUNT, False), (DCGM_XID, True)):
        def over(function: str, source: str = source) -> Callable[[str], str]:
            return lambda sel: f"{function}({source}{{{sel}}}[{span}])"
        maxima = _dcgm_exprs(reader, nodes, exporters, over("max_over_time"), _by_exporter(facts))
        facts.xid_queries.append(maxima[0])
        seen = looks.setdefault(source, {})
        for kind, exprs in (("max", maxima), ("changes", _dcgm_exprs(reader, nodes, exporters, over("changes"),
                                                                     _by_exporter(facts))
                                              if with_changes else [])):
            for expr in exprs:
                series = reader.range(expr, first, facts.now, XID_STEP)
                if series is None:
                    facts.xid_error = reader.errors[-1]
                    return None
                for one in series:
                    key = _key(one.labels)
                    labels_of_series[key] = one.labels
                    for at, value in one.points:
                        entry = seen.setdefault(key, {}).get(round(at, 3), (0.0, 0.0))
                        seen[key][round(at, 3)] = (value, entry[1]) if kind == "max" else (entry[0], value)
    return looks, labels_of_series


def read_xids(reader: Reader, facts: VerifyFacts, exporters: Exporters) -> None:
    """Every Xid of each upgraded node since its own upgrade finished, into ``facts.xids``."""
    since = {n.name: facts.finished_at.get(n.name) for n in facts.nodes}
    facts.xids = {name: NodeXids(name, at) for name, at in since.items()}
    known = {name: at for name, at in since.items() if at is not None}
    if not known:
        return
    hours = max(1, int(-(-(facts.now - min(known.values())) // XID_STEP)))
    first = facts.now - hours * XID_STEP  # the first look ends before every node's upgrade finished: context only
    found = _xid_looks(reader, facts, exporters, sorted(known), first)
    if found is None:
        return
    looks, labels_of_series = found
    for source in (DCGM_XID_COUNT, DCGM_XID):  # the exporter's Xid count where it exports one for the node
        series_by_node: dict[str, list[tuple[tuple[str, str], ...]]] = {}
        for key in looks.get(source, {}):
            node, _ = exporters.node_of(labels_of_series[key], set(known))
            if node is not None:
                series_by_node.setdefault(node, []).append(key)
        for node, keys in series_by_node.items():
            reading = facts.xids[node]
            if reading.source is not None:
                continue
            reading.source, reading.series = source, len(keys)
            reading.events = _node_events(reader, facts, exporters, source, node,
                                          {key: looks[source][key] for key in keys}, known[node])
    for reading in facts.xids.values():
        reading.events.sort(key=lambda e: (e.at, e.gpu, e.xid))


STALE = 300.0  # Prometheus's staleness: a series silent longer than this has gone, and a sample after it is new


def _flagged(source: str, points: dict[float, tuple[float, float]], since: float) -> set[float]:
    """The hourly looks (by end) of one series worth reading sample by sample: it changed, appeared (even at 0:
    with a series per ``err_code``, the 0 series coming back means another Xid's series may come back after it,
    within the hour, unchanged in value), or (the exporter's count) counted an Xid; and the look after each, which
    overlaps it."""
    flagged = set()
    for at, (maximum, changed) in points.items():
        appeared = round(at - XID_STEP, 3) not in points
        if at >= since and (changed > 0 or appeared or (source == DCGM_XID_COUNT and maximum > 0)):
            flagged |= {at, round(at + XID_STEP, 3)}
    return flagged


def _node_events(reader: Reader, facts: VerifyFacts, exporters: Exporters, source: str, node: str,
                 series: dict[tuple[tuple[str, str], ...], dict[float, tuple[float, float]]], since: float
                 ) -> list[XidEvent]:
    """The Xids a node's GPUs logged after ``since``: every series of the node is read sample by sample over the
    looks any of them was flagged in, and a new value (the gauge), a rise (the count), or a series coming back
    after going stale with a non-zero value is an Xid at that sample's time."""
    looks = sorted(set().union(*(_flagged(source, points, since) for points in series.values())))
    events: dict[tuple[str, float], XidEvent] = {}
    span = f"{int(XID_STEP + XID_OVERLAP)}s"
    selectors = sorted({exporters.selector_of(dict(key), node) for key in series})
    for at in looks:
        if at > facts.now + 1:
            continue
        for expr in (f"{source}{{{selector}}}[{span}]" for selector in selectors):  # a range selector has no `or`
            raw = reader.samples(expr, at)
            if raw is None:
                facts.xid_error = reader.errors[-1]
                return []
            for one in raw:
                labels_ = {k_: v for k_, v in one.labels.items() if k_ != "__name__"}
                if exporters.node_of(labels_, {node})[0] != node:
                    continue
                # A series already there an hour before this look continues; one that was not appears in it.
                appeared = round(at - XID_STEP, 3) not in series.get(_key(labels_), {})
                # Its first sample here is new if it appeared in this look, or came long after the range began
                # (a series that was there would have been scraped within STALE of it).
                previous: tuple[float, float] | None = None
                begin = at - XID_STEP - XID_OVERLAP
                for t, value in one.points:
                    fresh = (t - (previous[0] if previous is not None else begin) > STALE
                             or previous is None and appeared)
                    if source == DCGM_XID_COUNT:
                        new = value > 0 and (fresh or previous is not None and value > previous[1])
                    else:
                        new = value != 0 and (fresh or previous is not None and value != previous[1])
                    if new and t >= since:
                        xid = int(labels_.get("xid", value)) if source == DCGM_XID_COUNT else int(value)
                        events[(labels_.get("gpu", "?"), t)] = XidEvent(node, labels_.get("gpu", "?"), xid, t, source)
                    previous = (t, value)
    return list(events.values())


def served_requests(reader: Reader | None, model: Model, pods: list[str], soak_start: float | None, now: float
            ) -> tuple[float | None, str | None]:
    """The requests ``pods`` served from the soak's start to now, or why that is not known."""
    engine = engine_of(model)
    if reader is None:
        return None, NO_PROMETHEUS
    if engine is None:
        return None, "no request counter for its engine"
    if soak_start is None:
        return None, "the soak has no start"
    window = f"{max(300, int(now - soak_start))}s"  # at least 5 minutes: a counter needs two samples
    total: float | None = None
    mark = len(reader.errors)
    for expr in reader.split(pods, lambda r: fill(ENGINE_PARTS[engine].requests, model.namespace, r, window)):
        found = reader.instant(expr, now)
        if found is None:
            return None, reader.errors[mark]
        for _, value in found:
            total = (total or 0.0) + value
    return total, None if total is not None else "no request counted (empty result)"
