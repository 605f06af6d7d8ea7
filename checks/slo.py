"""A model's service-level objectives during a rollout, for `gpu-rollout watch`: per model and per pool the rollout
moves that the model runs on, its error rate and p95 latency on its pods there, read from Prometheus through the same
access as `verify` (``validation.prometheus``, or ``--prometheus``).

The objectives are the model's ``models[].slo``; a model without one is watched relative to its own **baseline**: its
figures over the same hour a day before (``fleetspec.model.DEFAULT_SLO_*``), from its own pods then (found by the
names their controller gives them, :func:`checks.soak_metrics.pod_pattern`), breached above that error rate plus one
percentage point or above one and a half times that p95, for ten minutes. A model that served nothing then has no
baseline: the reading says so and names ``models[].slo`` (preflight's ``model-metrics`` asks for what reading needs).

A figure is computed every minute over the last five minutes (or the whole ``for`` where that is shorter) from the
engine's additive parts (:mod:`checks.serving`: errors over attempts, the p95 of the summed latency histogram),
across the last ``for``; the objective is **breached** when every one of those figures is above it and they cover
the whole ``for``. A breach is a trigger (``slo-breach``) naming the model, the pool and the figure, which pauses the
rollout as ``upgrade-failed`` does. **No data** for the whole ``for`` (Prometheus holds no series of the model's pods
there) pauses it too (``slo-no-data``): a rollout is not watched blind. A model whose pods are there but served
nothing (its series there, no request) is no gap: nothing to judge, nothing missing. A query Prometheus does not
answer is the reading's error, named on every poll; once the watch (or the guard) has seen it unanswered for as long
as the SLO's ``for``, poll after poll (:func:`unanswered_since`), that is a gap too (``slo-no-data``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checks.objects import Obj, name_of, spec_of
from checks.progress import StateTracker, Trigger, model_key
from checks.prometheus import Prometheus, PrometheusError, finite, split_query
from checks.serving import ENGINE_PARTS, EngineParts, Parts, engine_of, figures, fill
from checks.soak_metrics import pod_pattern
from fleetspec.membership import Membership
from fleetspec.model import (DEFAULT_SLO_BASELINE_OFFSET_SECONDS, DEFAULT_SLO_BASELINE_SPAN_SECONDS,
                             DEFAULT_SLO_ERROR_RATE_MARGIN, DEFAULT_SLO_FOR, DEFAULT_SLO_P95_FACTOR, FleetSpec, Model)
from fleetspec.observability import duration_seconds
from vocabulary.triggers import TriggerKind

SLO_STEP = 60.0  # a figure every minute...
SLO_SPAN = 300.0  # ...over the five minutes before it
_PARTS = {"errorRate": ("errors", "attempts"), "p95LatencySeconds": ("histogram", "quantile_sum", "quantile_count")}


@dataclass
class SloReading:
    """One objective of one model on one pool over the last ``sustained`` seconds."""

    model: str  # namespace/name
    pool: str
    metric: str  # errorRate | p95LatencySeconds
    objective: float | None  # None: relative to the baseline, not known (yet)
    sustained: int  # seconds
    pods: list[str]
    figures: list[tuple[float, float]] = field(default_factory=list)  # (time, figure)
    expected: int = 0  # figures that cover the whole span
    error: str | None = None
    baseline: float | None = None  # no models[].slo: the model's own figure a day before
    default: bool = False  # no models[].slo: the objective is relative to the baseline
    no_data: bool = False  # Prometheus holds no series of the pods over the whole span
    unanswered: bool = False  # Prometheus did not answer this reading (``error`` says how)
    unanswered_for: float | None = None  # seconds this watch has seen it unanswered, poll after poll

    @property
    def breached(self) -> bool:
        objective = self.objective
        return (self.error is None and objective is not None and len(self.figures) >= self.expected > 0
                and all(value > objective for _, value in self.figures))

    @property
    def latest(self) -> float | None:
        return self.figures[-1][1] if self.figures else None

    def show(self, value: float | None) -> str:
        if value is None:
            return "no data"
        return f"{value:.2%}" if self.metric == "errorRate" else f"{value:.3g}s"

    @property
    def what(self) -> str:
        return "error rate" if self.metric == "errorRate" else "p95 latency"

    @property
    def span(self) -> str:
        return f"{self.sustained // 60}m" if self.sustained % 60 == 0 else f"{self.sustained}s"

    def _source(self) -> str:
        """Where the objective comes from, in words."""
        if not self.default:
            return "models[].slo"
        if self.baseline is None:
            return "no models[].slo: relative to its baseline, which it lacks"
        how = (f"plus {DEFAULT_SLO_ERROR_RATE_MARGIN:.0%} point" if self.metric == "errorRate"
               else f"times {DEFAULT_SLO_P95_FACTOR:g}")
        return f"no models[].slo: its own {self.show(self.baseline)} a day before {how}"

    def describe(self) -> str:
        if self.no_data and self.unanswered_for is not None:
            return (f"model {self.model} on pool {self.pool}: no {self.what} figure for "
                    f"{self.unanswered_for / 60:.0f} min, the SLO's {self.span} and more: Prometheus has not answered "
                    f"({self.error}): no data is no sign of health")
        if self.no_data:
            return (f"model {self.model} on pool {self.pool}: no {self.what} figure for {self.span} (Prometheus holds "
                    "no series of its pods there): no data is no sign of health")
        if self.breached:
            low = min(value for _, value in self.figures)
            return (f"model {self.model} on pool {self.pool}: {self.what} {self.show(self.latest)} (at least "
                    f"{self.show(low)} all along) above its objective {self.show(self.objective)} for {self.span} "
                    f"({self._source()})")
        objective = self.show(self.objective) if self.objective is not None else "not known"
        return (f"model {self.model} on pool {self.pool}: {self.what} {self.show(self.latest)}, objective "
                f"{objective} over {self.span} ({self._source()})" + (f" ({self.error})" if self.error else ""))

    @property
    def triggered(self) -> bool:
        return self.breached or self.no_data

    def trigger(self) -> Trigger:
        kind = TriggerKind.SLO_NO_DATA if self.no_data else TriggerKind.SLO_BREACH
        return Trigger(kind, f"{self.model}@{self.pool}", self.describe())

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "pool": self.pool, "metric": self.metric, "objective": self.objective,
                "forSeconds": self.sustained, "latest": self.latest, "breached": self.breached,
                "noData": self.no_data, "default": self.default, "baseline": self.baseline,
                "figures": len(self.figures), "expected": self.expected, "pods": self.pods, "error": self.error}


def _objectives(model: Model) -> list[tuple[str, float | None, int]]:
    """(metric, objective, seconds) of the model's SLO; without one, both figures relative to its baseline."""
    slo = model.slo
    if slo is None:
        seconds = duration_seconds(DEFAULT_SLO_FOR)
        return [("errorRate", None, seconds), ("p95LatencySeconds", None, seconds)]
    out: list[tuple[str, float | None, int]] = []
    if slo.error_rate is not None:
        out.append(("errorRate", slo.error_rate, slo.sustained_seconds))
    if slo.p95LatencySeconds is not None:
        out.append(("p95LatencySeconds", slo.p95LatencySeconds, slo.sustained_seconds))
    return out


def _add(found: Parts, part: str, labels: dict[str, str], value: float) -> None:
    if part == "histogram":
        bound = float(labels.get("le", "nan"))
        found.histogram[bound] = found.histogram.get(bound, 0.0) + value
    else:
        found.values[part] = found.values.get(part, 0.0) + value


def _read(prometheus: Prometheus, model: Model, pods: list[str], reading: SloReading, now: float) -> None:
    engine = engine_of(model)
    if engine is None:
        reading.error = f"the engine of image {model.image} is not known: set serving.engine"
        return
    parts = ENGINE_PARTS[engine]
    span = min(SLO_SPAN, float(reading.sustained))
    start = now - reading.sustained + span
    reading.expected = int((now - start) // SLO_STEP) + 1
    by_time: dict[float, Parts] = {}
    for part, template in parts.templates().items():
        if part not in _PARTS[reading.metric]:
            continue
        def render(regex: str, template: str = template) -> str:
            return fill(template, model.namespace, regex, f"{int(span)}s")
        try:
            for expr in split_query(pods, render, prometheus.max_query_bytes):
                for series in prometheus.query_range(expr, start, now, SLO_STEP):
                    for at, value in series.points:
                        _add(by_time.setdefault(round(at, 3), Parts()), part, series.labels, value)
        except PrometheusError as exc:
            # Not a gap Prometheus shows: how long it has not answered, the watch's polls tell (unanswered_since).
            reading.error, reading.unanswered = str(exc), True
            return
    reading.no_data = not by_time
    for at in sorted(by_time):
        figure = figures(by_time[at], parts).get(reading.metric)
        if figure is not None:
            reading.figures.append((at, figure))


def _baseline(prometheus: Prometheus, engine: EngineParts, model: Model, pattern: str, metric: str,
              now: float) -> float | None:
    """The model's own figure over the baseline hour a day before ``now``; None where it served nothing then."""
    at = now - DEFAULT_SLO_BASELINE_OFFSET_SECONDS
    found = Parts()
    for part, template in engine.templates().items():
        if part not in _PARTS[metric]:
            continue
        expr = fill(template, model.namespace, pattern, f"{DEFAULT_SLO_BASELINE_SPAN_SECONDS}s")
        for sample in prometheus.query(expr, at):
            value = finite(sample.value)
            if value is not None:
                _add(found, part, sample.labels, value)
    return figures(found, engine).get(metric)


def _relative(prometheus: Prometheus, model: Model, all_pods: list[Obj], reading: SloReading, now: float) -> None:
    """A default objective from the model's baseline (after its figures were read, so a gap is told first)."""
    engine = engine_of(model)
    pattern = pod_pattern(all_pods)
    if engine is None or pattern is None or reading.no_data:
        return
    try:
        baseline = _baseline(prometheus, ENGINE_PARTS[engine], model, pattern, reading.metric, now)
    except PrometheusError as exc:
        reading.error, reading.unanswered = f"its baseline: {exc}", True
        return
    if baseline is None:
        reading.error = ("no baseline: the model's pods served nothing over the hour a day before; set "
                         "models[].slo")
        return
    reading.baseline = baseline
    reading.objective = (baseline + DEFAULT_SLO_ERROR_RATE_MARGIN if reading.metric == "errorRate"
                         else baseline * DEFAULT_SLO_P95_FACTOR)


def read_slos(prometheus: Prometheus, spec: FleetSpec, pods: dict[str, list[Obj]], pool_nodes: dict[str, set[str]],
              now: float) -> list[SloReading]:
    """Each objective of each model (its own, else relative to its baseline) on each pool being upgraded (one the
    rollout moves) that it runs on."""
    readings = []
    for model in spec.models:
        all_pods = pods.get(model_key(model), [])
        for metric, objective, seconds in _objectives(model):
            for pool in model.nodePools:
                if not spec.pool_target(spec.pool(pool)).moves:
                    continue
                on_pool = sorted(name_of(p) for p in all_pods if spec_of(p).get("nodeName") in pool_nodes.get(pool, set()))
                reading = SloReading(model_key(model), pool, metric, objective, seconds, on_pool,
                                     default=model.slo is None)
                if on_pool:
                    _read(prometheus, model, on_pool, reading, now)
                    if reading.default:
                        _relative(prometheus, model, all_pods, reading, now)
                else:
                    reading.error = "no pod of the model runs on the pool"
                readings.append(reading)
    return readings


def slo_of(prometheus: Prometheus | None, spec: FleetSpec, pods: dict[str, list[Obj]],
           nodes: list[tuple[Obj, Membership]], now: float) -> list[SloReading]:
    """The models' objectives on the pools being upgraded, for a watch poll that listed ``nodes`` (with their
    pools) and the models' ``pods``; none without Prometheus (preflight's ``model-metrics`` asks for one)."""
    if prometheus is None or not spec.models:
        return []
    pool_nodes: dict[str, set[str]] = {}
    for node, membership in nodes:
        pool_nodes.setdefault(membership.pool.name, set()).add(name_of(node))
    return read_slos(prometheus, spec, pods, pool_nodes, now)


def unanswered_since(readings: list[SloReading], tracker: StateTracker, now: float) -> None:
    """Mark each reading Prometheus has left unanswered since at least its ``for`` as no data: ``tracker`` holds,
    across polls, when this watch first saw it unanswered (an answer resets it)."""
    for reading in readings:
        key = f"slo/{reading.model}@{reading.pool}/{reading.metric}"
        since = tracker.since(key, "unanswered" if reading.unanswered else "answered", now)
        if reading.unanswered and now - since >= reading.sustained:
            reading.no_data, reading.unanswered_for = True, now - since
