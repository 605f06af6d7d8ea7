"""A small client of Prometheus's HTTP query API (``/api/v1/query``, ``/api/v1/query_range``) for `verify`.

Over urllib3, the HTTP library the Kubernetes client (and so :mod:`checks.kube`) already runs on and pins:
no second HTTP stack for two GET endpoints. Every request is bounded (a per-request timeout, a capped
number of attempts) and retried with backoff on connection errors, 429 and 5xx; anything else is a
:class:`PrometheusError` naming the query. Results come back as plain samples (labels and a float), so a
check never sees Prometheus's JSON. An empty result is an empty list: the caller decides what "no data"
means (for `verify`, inconclusive, never a pass).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import urllib3


class PrometheusError(Exception):
    """Prometheus could not answer a query (unreachable, refused, a bad query): one line naming it."""


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels and value (NaN possible: ``histogram_quantile`` of nothing)."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]] = field(default_factory=list)


def finite(value: float) -> float | None:
    """The value, or None where it is NaN or infinite (no data, as far as a check is concerned)."""
    return value if math.isfinite(value) else None


class Prometheus:
    """Instant and range queries against one Prometheus (or a compatible API: Thanos, Mimir, VictoriaMetrics)."""

    def __init__(self, url: str, *, timeout: float = 20.0, attempts: int = 3, backoff: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"--prometheus {url!r} is not an http(s) URL such as http://prometheus:9090")
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout))

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query evaluated at ``at`` (unix seconds; default now): its vector or scalar as samples."""
        fields = {"query": expr}
        if at is not None:
            fields["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", fields, expr)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return [Sample({}, _number(result[1], expr))]
        if kind != "vector" or not isinstance(result, list):
            raise PrometheusError(f"query {expr!r}: expected a vector, Prometheus answered {kind!r}")
        return [Sample(dict(item.get("metric") or {}), _number((item.get("value") or [0, "NaN"])[1], expr))
                for item in result]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """A range query from ``start`` to ``end`` (unix seconds) every ``step`` seconds."""
        fields = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{max(step, 1.0):.3f}"}
        data = self._get("/api/v1/query_range", fields, expr)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise PrometheusError(f"query {expr!r}: expected a matrix, Prometheus answered {data.get('resultType')!r}")
        return [Series(dict(item.get("metric") or {}),
                       [(float(t), _number(v, expr)) for t, v in item.get("values") or []]) for item in result]

    def _get(self, path: str, fields: dict[str, str], expr: str) -> dict[str, Any]:
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                self._sleep(self._backoff * 2 ** (attempt - 1))
            try:
                response = self._http.request("GET", self.url + path, fields=fields)
            except urllib3.exceptions.HTTPError as exc:  # refused, reset, timed out
                last = f"{type(exc).__name__}: {exc}"
                continue
            if response.status == 429 or response.status >= 500:
                last = f"HTTP {response.status}"
                continue
            try:
                document = json.loads(response.data or b"{}")
            except ValueError:
                raise PrometheusError(f"{self.url}: query {expr!r}: HTTP {response.status}, not JSON: is this "
                                      "Prometheus's URL?") from None
            if not isinstance(document, dict):
                raise PrometheusError(f"{self.url}: query {expr!r}: the answer is not a JSON object")
            if document.get("status") != "success":
                raise PrometheusError(f"{self.url}: query {expr!r}: {document.get('errorType', 'error')}: "
                                      f"{document.get('error', f'HTTP {response.status}')}")
            return dict(document.get("data") or {})
        raise PrometheusError(f"{self.url}: query {expr!r}: no answer after {self._attempts} attempt(s) ({last})")


def _number(text: Any, expr: str) -> float:
    try:
        return float(text)  # Prometheus sends "NaN", "+Inf", "-Inf" as strings too
    except (TypeError, ValueError):
        raise PrometheusError(f"query {expr!r}: {text!r} is not a number") from None


def regex_union(values: list[str]) -> str:
    """A PromQL regex matching exactly these values (anchored by PromQL), for ``label=~"..."``."""
    specials = set("\\.+*?()|[]{}^$")
    escaped = ["".join("\\\\" + c if c in specials else c for c in value) for value in sorted(set(values))]
    return "|".join(e.replace('"', '\\"') for e in escaped)
