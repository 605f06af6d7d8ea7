"""A model's service-level objectives during a rollout, for `gpu-rollout watch`: per model with ``models[].slo``
and per pool the rollout moves that the model runs on, its error rate and p95 latency on its pods there, read from
Prometheus through the same access as `verify` (``validation.prometheus``, or ``--prometheus``).

A figure is computed every minute over the last five minutes (or the whole ``for`` where that is shorter) from the
engine's additive parts (:mod:`checks.serving`: errors over attempts, the p95 of the summed latency histogram),
across the last ``for``; the objective is **breached** when every one of those figures is above it and they cover
the whole ``for`` (a gap is no breach: missing data never pauses a rollout, and never passes for a breach
either: the reading says it is missing). A breach is a trigger naming the model, the pool and the figure, which
pauses the rollout as ``upgrade-failed`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checks.objects import Obj, name_of, spec_of
from checks.progress import Trigger, model_key
from checks.prometheus import Prometheus, PrometheusError, split_query
from checks.serving import ENGINE_PARTS, Parts, engine_of, figures, fill
from fleetspec.membership import Membership
from fleetspec.model import FleetSpec, Model
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
    objective: float
    sustained: int  # seconds
    pods: list[str]
    figures: list[tuple[float, float]] = field(default_factory=list)  # (time, figure)
    expected: int = 0  # figures that cover the whole span
    error: str | None = None

    @property
    def breached(self) -> bool:
        return (self.error is None and len(self.figures) >= self.expected > 0
                and all(value > self.objective for _, value in self.figures))

    @property
    def latest(self) -> float | None:
        return self.figures[-1][1] if self.figures else None

    def show(self, value: float | None) -> str:
        if value is None:
            return "no data"
        return f"{value:.2%}" if self.metric == "errorRate" else f"{value:.3g}s"

    def describe(self) -> str:
        what = "error rate" if self.metric == "errorRate" else "p95 latency"
        span = f"{self.sustained // 60}m" if self.sustained % 60 == 0 else f"{self.sustained}s"
        if self.breached:
            low = min(value for _, value in self.figures)
            return (f"model {self.model} on pool {self.pool}: {what} {self.show(self.latest)} (at least "
                    f"{self.show(low)} all along) above its objective {self.show(self.objective)} for {span} "
                    "(models[].slo)")
        return f"model {self.model} on pool {self.pool}: {what} {self.show(self.latest)}, objective " \
               f"{self.show(self.objective)} over {span}" + (f" ({self.error})" if self.error else "")

    def trigger(self) -> Trigger:
        return Trigger(TriggerKind.SLO_BREACH, f"{self.model}@{self.pool}", self.describe())

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "pool": self.pool, "metric": self.metric, "objective": self.objective,
                "forSeconds": self.sustained, "latest": self.latest, "breached": self.breached,
                "figures": len(self.figures), "expected": self.expected, "pods": self.pods, "error": self.error}


def _objectives(model: Model) -> list[tuple[str, float]]:
    slo = model.slo
    if slo is None:
        return []
    out = []
    if slo.error_rate is not None:
        out.append(("errorRate", slo.error_rate))
    if slo.p95LatencySeconds is not None:
        out.append(("p95LatencySeconds", slo.p95LatencySeconds))
    return out


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
                        found = by_time.setdefault(round(at, 3), Parts())
                        if part == "histogram":
                            bound = float(series.labels.get("le", "nan"))
                            found.histogram[bound] = found.histogram.get(bound, 0.0) + value
                        else:
                            found.values[part] = found.values.get(part, 0.0) + value
        except PrometheusError as exc:
            reading.error = str(exc)
            return
    for at in sorted(by_time):
        figure = figures(by_time[at], parts).get(reading.metric)
        if figure is not None:
            reading.figures.append((at, figure))


def read_slos(prometheus: Prometheus, spec: FleetSpec, pods: dict[str, list[Obj]], pool_nodes: dict[str, set[str]],
              now: float) -> list[SloReading]:
    """Each objective of each model on each pool being upgraded (one the rollout moves) that it runs on."""
    readings = []
    for model in spec.models:
        for metric, objective in _objectives(model):
            assert model.slo is not None
            for pool in model.nodePools:
                if not spec.pool_target(spec.pool(pool)).moves:
                    continue
                on_pool = sorted(name_of(p) for p in pods.get(model_key(model), [])
                                 if spec_of(p).get("nodeName") in pool_nodes.get(pool, set()))
                reading = SloReading(model_key(model), pool, metric, objective, model.slo.sustained_seconds, on_pool)
                if on_pool:
                    _read(prometheus, model, on_pool, reading, now)
                else:
                    reading.error = "no pod of the model runs on the pool"
                readings.append(reading)
    return readings


def slo_of(prometheus: Prometheus | None, spec: FleetSpec, pods: dict[str, list[Obj]],
           nodes: list[tuple[Obj, Membership]], now: float) -> list[SloReading]:
    """The models' objectives on the pools being upgraded, for a watch poll that listed ``nodes`` (with their
    pools) and the models' ``pods``; none without Prometheus or an SLO."""
    if prometheus is None or not any(m.slo is not None for m in spec.models):
        return []
    pool_nodes: dict[str, set[str]] = {}
    for node, membership in nodes:
        pool_nodes.setdefault(membership.pool.name, set()).add(name_of(node))
    return read_slos(prometheus, spec, pods, pool_nodes, now)
