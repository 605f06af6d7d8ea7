"""What a model server's engine is, and how its figures come out of Prometheus: p95 latency, tokens per second,
error rate and requests over a span of time, for `verify` (the soak in buckets) and `watch` (a model's SLO).

Every engine's figures are built from **additive parts**: sums of ``increase()`` of its counters over the span
(requests, request seconds, tokens, errors, attempts) and, for latency, the increase of each histogram bucket
(vLLM, TGI) or the sum and count of the per-pod p95 a summary reports (Triton). Parts add up: over any set of
pods (a query split in several, each for a share of the pods) and over consecutive spans (the buckets of a soak
make the whole soak), and the figures are computed from the sums (:func:`figures`): the p95 from the summed
histogram as ``histogram_quantile`` computes it, tokens per second as tokens over request seconds, the error rate
as errors over attempts. Nothing here reads anything: templates and arithmetic.

Templates carry ``{namespace}``, ``{pods}`` (a regex of pod names) and ``{window}`` (a span, ``3600s``); the
``namespace`` and ``pod`` labels are those the Prometheus Operator's PodMonitor/ServiceMonitor put on series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fleetspec import serving
from fleetspec.model import Model, ServingEngine

DEFAULT_PORTS = {ServingEngine.VLLM: 8000, ServingEngine.TGI: 80, ServingEngine.TRITON: 8000,
                 ServingEngine.SGLANG: 30000}
METRICS = ("p95LatencySeconds", "tokensPerSecond", "errorRate")  # what verify compares, as queries name them
# The figure each part feeds, for messages.
PART_METRIC = {"histogram": "p95LatencySeconds", "quantile_sum": "p95LatencySeconds",
               "quantile_count": "p95LatencySeconds", "busy": "tokensPerSecond", "tokens": "tokensPerSecond",
               "errors": "errorRate", "attempts": "errorRate", "requests": "requests"}

_SELECTOR = 'namespace="{namespace}",pod=~"{pods}"'


def _increase(metric: str, extra: str = "", by: str = "") -> str:
    selector = _SELECTOR + (f",{extra}" if extra else "")
    return f"sum{f' by ({by})' if by else ''} (increase({metric}{{{selector}}}[{{window}}]))"


@dataclass(frozen=True)
class EngineParts:
    """An engine's additive parts, as PromQL templates; absent parts are None."""

    requests: str  # requests served (also what "served traffic" counts)
    busy: str  # request seconds (times ``busy_scale``)
    tokens: str  # tokens generated (Triton: inferences)
    errors: str | None  # failed requests
    attempts: str | None  # every request, failed or not (with ``attempts_succeeded``: those that did not fail)
    histogram: str | None = None  # ``sum by (le)`` of the latency histogram's buckets, seconds
    quantile_sum: str | None = None  # a summary's p95 summed over pods (times ``busy_scale``)
    quantile_count: str | None = None  # how many pods that sum adds
    busy_scale: float = 1.0
    # The engine counts the requests that failed and those that did not apart (two counters: an increase() of both at
    # once loses their names and cannot be summed), so the attempts are those two parts added.
    attempts_succeeded: bool = False
    counters: tuple[str, ...] = field(default=())  # the counters it reads, for messages

    def templates(self) -> dict[str, str]:
        """Part name -> template, for the parts the engine has."""
        names = ("histogram", "quantile_sum", "quantile_count", "busy", "tokens", "errors", "attempts", "requests")
        return {name: value for name in names if (value := getattr(self, name)) is not None}


# vLLM: its own request histogram and token counter; errors are the HTTP answers of its OpenAI API server
# (prometheus-fastapi-instrumentator: http_requests_total{handler, status="2xx|4xx|5xx"}), 5xx over every /v1 call.
# TGI: its request histogram, generated tokens, and tgi_request_failure over tgi_request_count. Triton: its
# summary's p95 (needs --metrics-config summary_latencies=true), inferences per second of request time (its core
# metrics count inferences, not tokens), failures over successes and failures (counted apart). SGLang (with --enable-metrics): its
# request histogram and token counter as vLLM's; it counts finished requests (sglang:num_requests_total) and aborted
# ones (sglang:num_aborted_requests_total) apart, so errors are the aborted over both.
ENGINE_PARTS: dict[ServingEngine, EngineParts] = {
    ServingEngine.VLLM: EngineParts(
        requests=_increase("vllm:e2e_request_latency_seconds_count"),
        busy=_increase("vllm:e2e_request_latency_seconds_sum"),
        tokens=_increase("vllm:generation_tokens_total"),
        errors=_increase("http_requests_total", 'handler=~"/v1/.*",status="5xx"'),
        attempts=_increase("http_requests_total", 'handler=~"/v1/.*"'),
        histogram=_increase("vllm:e2e_request_latency_seconds_bucket", by="le"),
        counters=("vllm:e2e_request_latency_seconds", "vllm:generation_tokens_total", "http_requests_total"),
    ),
    ServingEngine.TGI: EngineParts(
        requests=_increase("tgi_request_duration_count"),
        busy=_increase("tgi_request_duration_sum"),
        tokens=_increase("tgi_request_generated_tokens_sum"),
        errors=_increase("tgi_request_failure"),
        attempts=_increase("tgi_request_count"),
        histogram=_increase("tgi_request_duration_bucket", by="le"),
        counters=("tgi_request_duration", "tgi_request_generated_tokens", "tgi_request_failure", "tgi_request_count"),
    ),
    ServingEngine.TRITON: EngineParts(
        requests=_increase("nv_inference_request_success"),
        busy=_increase("nv_inference_request_duration_us"),
        tokens=_increase("nv_inference_count"),
        errors=_increase("nv_inference_request_failure"),
        attempts=_increase("nv_inference_request_success"),
        attempts_succeeded=True,
        quantile_sum='sum(avg_over_time(nv_inference_request_summary_us{quantile="0.95",' + _SELECTOR + "}[{window}]))",
        quantile_count='count(avg_over_time(nv_inference_request_summary_us{quantile="0.95",' + _SELECTOR
                       + "}[{window}]))",
        busy_scale=1e-6,
        counters=("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                  "nv_inference_request_duration_us", "nv_inference_request_summary_us"),
    ),
    ServingEngine.SGLANG: EngineParts(
        requests=_increase("sglang:e2e_request_latency_seconds_count"),
        busy=_increase("sglang:e2e_request_latency_seconds_sum"),
        tokens=_increase("sglang:generation_tokens_total"),
        errors=_increase("sglang:num_aborted_requests_total"),
        attempts=_increase("sglang:num_requests_total"),
        attempts_succeeded=True,
        histogram=_increase("sglang:e2e_request_latency_seconds_bucket", by="le"),
        counters=("sglang:e2e_request_latency_seconds", "sglang:generation_tokens_total", "sglang:num_requests_total",
                  "sglang:num_aborted_requests_total"),
    ),
}


def engine_of(model: Model) -> ServingEngine | None:
    """The declared engine, else the one the image names (``fleetspec.serving``: vllm/vllm-openai,
    .../text-generation-inference, nvcr.io/nvidia/tritonserver, lmsysorg/sglang)."""
    name = serving.engine_of_model(model)
    return None if name is None else ServingEngine(name)


def fill(template: str, namespace: str, pods: str, window: str) -> str:
    """``template`` for ``namespace``, the pods the regex ``pods`` matches, over ``window`` (``3600s``)."""
    return template.replace("{namespace}", namespace).replace("{pods}", pods).replace("{window}", window)


# ---------------------------------------------------------------- parts and the figures they give


@dataclass
class Parts:
    """The additive parts of one side over one span: scalars by part name, the histogram by upper bound."""

    values: dict[str, float] = field(default_factory=dict)
    histogram: dict[float, float] = field(default_factory=dict)

    def add(self, other: Parts) -> None:
        for key, value in other.values.items():
            self.values[key] = self.values.get(key, 0.0) + value
        for bound, count in other.histogram.items():
            self.histogram[bound] = self.histogram.get(bound, 0.0) + count


@dataclass(frozen=True)
class Figures:
    """What one side showed over one span; None where its series were absent."""

    requests: float | None = None
    p95LatencySeconds: float | None = None
    tokensPerSecond: float | None = None
    errorRate: float | None = None

    def get(self, metric: str) -> float | None:
        value: float | None = getattr(self, metric)
        return value

    def as_json(self) -> dict[str, Any]:
        return {key: None if value is None else round(value, 6) for key, value in (
            ("requests", self.requests), ("p95LatencySeconds", self.p95LatencySeconds),
            ("tokensPerSecond", self.tokensPerSecond), ("errorRate", self.errorRate))}


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile of cumulative bucket counts (upper bound -> count), interpolated linearly inside the bucket
    as Prometheus's ``histogram_quantile`` does; None without a +Inf bucket or observations."""
    ordered = sorted(buckets.items())
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    total = ordered[-1][1]
    if total <= 0 or len(ordered) < 2:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for index, (bound, count) in enumerate(ordered):
        if count >= rank:
            if math.isinf(bound):
                return ordered[index - 1][0]  # in the +Inf bucket: the highest finite bound
            if index == 0 and bound <= 0:
                return bound
            width = count - lower_count
            return bound if width <= 0 else lower_bound + (bound - lower_bound) * (rank - lower_count) / width
        lower_bound, lower_count = bound, count
    return ordered[-2][0]


def figures(parts: Parts, engine: EngineParts) -> Figures:
    """The figures of a side over a span from its summed parts."""
    values = parts.values
    requests = values.get("requests")
    if engine.histogram is not None:
        p95 = histogram_quantile(0.95, parts.histogram)
    else:
        count = values.get("quantile_count")
        p95 = values["quantile_sum"] / count * engine.busy_scale if count and "quantile_sum" in values else None
    busy, tokens = values.get("busy"), values.get("tokens")
    tps = tokens / (busy * engine.busy_scale) if busy and tokens is not None else None
    attempts, errors = values.get("attempts"), values.get("errors", 0.0)
    if engine.attempts_succeeded and attempts is not None:
        attempts += errors
    error_rate = errors / attempts if attempts else None
    return Figures(requests, p95, tps, error_rate)
