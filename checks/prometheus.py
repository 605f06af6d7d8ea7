"""A small client of Prometheus's HTTP query API (``/api/v1/query``, ``/api/v1/query_range``) for `verify` and
`watch`, reached directly at a URL (with the credential, tenant and CA bundle ``validation.prometheus`` names:
:mod:`cloud_credentials` makes the headers) or through the API server's service proxy (over http or https).

Queries go by POST, form-encoded (the API accepts both), so a long label regex never meets a proxy's URL limit;
a query over many nodes or pods is split by the caller into queries within :attr:`Prometheus.max_query_bytes`
(:func:`split_query`), each answering for its share. Directly, over urllib3 (the HTTP library the Kubernetes
client, and so :mod:`checks.kube`, already runs on and pins): every request is bounded (a per-request timeout, a
capped number of attempts) and retried with backoff on connection errors, 429 and 5xx. Through a Service
(``validation.prometheus: namespace/name:port``), :meth:`checks.kube.Kube.service_proxy` makes the request with
the stack's own cluster credentials and its bounds and retries. Anything else is a :class:`PrometheusError`
naming the query. Results come back as plain samples (labels and a float), so a check never sees Prometheus's
JSON. An empty result is an empty list: the caller decides what "no data" means (for `verify`, inconclusive,
never a pass).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3

from checks import kube as k
from checks.errors import ClusterError
from cloud_credentials.credentials import (AwsSigV4, AzureToken, BearerEnv, BearerFile, BearerToken, Credential,
                                           CredentialError)
from fleetspec.observability import (PrometheusAccess, PrometheusAuth, PrometheusService, PrometheusSettings,
                                     PrometheusUrl, parse_prometheus, prometheus_access)

# The longest query sent in one request (its PromQL, in bytes): a regex of thousands of node or pod names is
# split into several queries below it (POST bodies have no URL limit, but Prometheus parses what it is sent).
MAX_QUERY_BYTES = 32_000


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


class Transport(Protocol):
    """Where a query goes: ``post`` answers the API document's ``data`` or raises PrometheusError."""

    where: str

    def post(self, path: str, form: list[tuple[str, str]], expr: str) -> dict[str, Any]: ...


def _data(document: Any, where: str, expr: str, status: int | str) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise PrometheusError(f"{where}: query {expr!r}: the answer is not a JSON object")
    if document.get("status") != "success":
        raise PrometheusError(f"{where}: query {expr!r}: {document.get('errorType', 'error')}: "
                              f"{document.get('error', f'HTTP {status}')}")
    return dict(document.get("data") or {})


NO_CREDENTIAL_FIX = ("it asks for a credential and none was sent: give validation.prometheus as an object with "
                     "'auth' (docs/validation.md, \"Reaching Prometheus\")")


class DirectTransport:
    """POSTs to a URL this machine reaches, with its own bounded retries, the ``credential``'s headers on each
    request (made anew for each: a token may rotate, a signature covers the body and the time), the ``tenant``
    as ``X-Scope-OrgID``, and the server's certificate checked against ``ca_file`` where given."""

    def __init__(self, url: str, *, timeout: float = 20.0, attempts: int = 3, backoff: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep, credential: Credential | None = None,
                 tenant: str | None = None, ca_file: str | None = None) -> None:
        self.where = url.rstrip("/")
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep
        self._credential = credential
        self._tenant = tenant
        self._ca_file = ca_file
        tls: dict[str, Any] = {"ca_certs": ca_file, "cert_reqs": "CERT_REQUIRED"} if ca_file else {}
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout), **tls)

    def _headers(self, url: str, body: bytes, expr: str) -> dict[str, str]:
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self._tenant:
            headers["X-Scope-OrgID"] = self._tenant
        if self._credential is not None:
            try:
                headers.update(self._credential.headers("POST", url, body))
            except CredentialError as exc:
                raise PrometheusError(f"{self.where}: query {expr!r}: {exc}") from None
        return headers

    def _refused(self, status: int, expr: str) -> PrometheusError:
        if self._credential is None:
            return PrometheusError(f"{self.where}: query {expr!r}: HTTP {status}: {NO_CREDENTIAL_FIX}")
        tenant = f" (tenant {self._tenant})" if self._tenant else ""
        return PrometheusError(f"{self.where}: query {expr!r}: HTTP {status}: {self._credential.what} was refused"
                               f"{tenant}: {self._credential.fix}")

    def post(self, path: str, form: list[tuple[str, str]], expr: str) -> dict[str, Any]:
        last = ""
        url = self.where + path
        body = urlencode(form).encode()
        for attempt in range(self._attempts):
            if attempt:
                self._sleep(self._backoff * 2 ** (attempt - 1))
            try:
                response = self._http.request("POST", url, body=body, headers=self._headers(url, body, expr))
            except urllib3.exceptions.SSLError as exc:  # not a passing fault: retrying cannot help
                fix = (f"the CA bundle {self._ca_file} does not sign it" if self._ca_file else
                       "set validation.prometheus.caFile to the CA bundle that signs it")
                raise PrometheusError(f"{self.where}: query {expr!r}: the server's TLS certificate is not trusted "
                                      f"({fix}): {' '.join(str(exc).split())[:200]}") from None
            except urllib3.exceptions.HTTPError as exc:  # refused, reset, timed out
                last = f"{type(exc).__name__}: {exc}"
                continue
            if response.status in (401, 403):
                raise self._refused(response.status, expr)
            if response.status == 429 or response.status >= 500:
                last = f"HTTP {response.status}"
                continue
            try:
                document = json.loads(response.data or b"{}")
            except ValueError:
                raise PrometheusError(f"{self.where}: query {expr!r}: HTTP {response.status}, not JSON: is this "
                                      "Prometheus's URL?") from None
            return _data(document, self.where, expr, response.status)
        raise PrometheusError(f"{self.where}: query {expr!r}: no answer after {self._attempts} attempt(s) ({last})")


class ServiceTransport:
    """POSTs through the API server's service proxy to an in-cluster Service, with the cluster's credentials
    (the adapter bounds and retries the request)."""

    def __init__(self, kube: k.Kube, service: PrometheusService) -> None:
        self.kube = kube
        self.service = service
        self.where = service.describe()

    def post(self, path: str, form: list[tuple[str, str]], expr: str) -> dict[str, Any]:
        tenant = {"X-Scope-OrgID": self.service.tenant} if self.service.tenant else None
        try:
            document = self.kube.service_proxy(self.service.namespace, self.service.name, self.service.port,
                                               path, form, scheme=self.service.scheme, headers=tenant)
        except ClusterError as exc:  # 403 (services/proxy), 503 (no endpoint), a query Prometheus refused (400)
            raise PrometheusError(f"{self.where}: query {expr!r}: {exc}") from None
        return _data(document, self.where, expr, "200")


class Prometheus:
    """Instant and range queries against one Prometheus (or a compatible API: Thanos, Mimir, VictoriaMetrics)."""

    def __init__(self, url: str | None = None, *, transport: Transport | None = None, timeout: float = 20.0,
                 attempts: int = 3, backoff: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                 max_query_bytes: int = MAX_QUERY_BYTES) -> None:
        if transport is None:
            if url is None or not isinstance(parse_or_none(url), PrometheusUrl):
                raise ValueError(f"--prometheus {url!r} is not an http(s) URL such as http://prometheus:9090")
            transport = DirectTransport(url, timeout=timeout, attempts=attempts, backoff=backoff, sleep=sleep)
        self.transport = transport
        self.max_query_bytes = max_query_bytes
        self.requests = 0  # queries sent (a split query counts each part)

    @property
    def where(self) -> str:
        """The URL, or the Service and how it is reached: for messages and the evidence."""
        return self.transport.where

    @property
    def url(self) -> str:
        return self.transport.where

    def _post(self, path: str, form: list[tuple[str, str]], expr: str) -> dict[str, Any]:
        self.requests += 1
        return self.transport.post(path, form, expr)

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query evaluated at ``at`` (unix seconds; default now): its vector or scalar as samples."""
        form = [("query", expr)] + ([("time", f"{at:.3f}")] if at is not None else [])
        data = self._post("/api/v1/query", form, expr)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return [Sample({}, _number(result[1], expr))]
        if kind != "vector" or not isinstance(result, list):
            raise PrometheusError(f"query {expr!r}: expected a vector, Prometheus answered {kind!r}")
        return [Sample(dict(item.get("metric") or {}), _number((item.get("value") or [0, "NaN"])[1], expr))
                for item in result]

    def query_samples(self, expr: str, at: float) -> list[Series]:
        """An instant query of a range selector (``metric{...}[1h]``) at ``at``: every raw sample in the range,
        per series, as scraped (no evaluation step between them)."""
        data = self._post("/api/v1/query", [("query", expr), ("time", f"{at:.3f}")], expr)
        return _matrix(data, expr)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """A range query from ``start`` to ``end`` (unix seconds) every ``step`` seconds."""
        form = [("query", expr), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", f"{max(step, 1.0):.3f}")]
        return _matrix(self._post("/api/v1/query_range", form, expr), expr)


def parse_or_none(text: str) -> PrometheusAccess | None:
    try:
        return parse_prometheus(text)
    except ValueError:
        return None


def credential_for(auth: PrometheusAuth, kube: k.Kube) -> Credential:
    """The credential ``validation.prometheus.auth`` names (cloud_credentials makes its headers)."""
    if auth.type == "bearer-file":
        assert auth.file is not None
        return BearerFile(auth.file)
    if auth.type == "bearer-env":
        assert auth.env is not None
        return BearerEnv(auth.env)
    if auth.type == "azure":
        return AzureToken()
    if auth.type == "aws-sigv4":
        assert auth.region is not None
        return AwsSigV4(auth.region)
    return BearerToken(kube.bearer_token, f"the kubeconfig identity ({kube.where})",
                       "use a kubeconfig whose user has a token or a credentials plugin (not a client certificate), "
                       "with RBAC to the metrics kube-rbac-proxy guards; or auth type bearer-file/bearer-env")


def connect(access: PrometheusAccess, kube: k.Kube) -> Prometheus:
    """The client for ``access``: a URL directly (with its credential, tenant and CA bundle), a Service through
    ``kube``'s service proxy."""
    if isinstance(access, PrometheusService):
        return Prometheus(transport=ServiceTransport(kube, access))
    credential = credential_for(access.auth, kube) if access.auth is not None else None
    return Prometheus(transport=DirectTransport(access.url, credential=credential, tenant=access.tenant,
                                                ca_file=access.ca_file))


def for_stack(declared: str | PrometheusSettings | None, kube: k.Kube, override: str | None = None
              ) -> Prometheus | None:
    """The Prometheus a live verb reads: ``override`` (``--prometheus URL``, no credential) where given, else the
    stack's ``validation.prometheus`` (a URL, or a Service reached through ``kube``'s service proxy, in its short
    or its object form); None without either."""
    if override:
        return Prometheus(override)
    return connect(prometheus_access(declared), kube) if declared else None


def _matrix(data: dict[str, Any], expr: str) -> list[Series]:
    result = data.get("result")
    if data.get("resultType") != "matrix" or not isinstance(result, list):
        raise PrometheusError(f"query {expr!r}: expected a matrix, Prometheus answered {data.get('resultType')!r}")
    return [Series(dict(item.get("metric") or {}),
                   [(float(t), _number(v, expr)) for t, v in item.get("values") or []]) for item in result]


def _number(text: Any, expr: str) -> float:
    try:
        return float(text)  # Prometheus sends "NaN", "+Inf", "-Inf" as strings too
    except (TypeError, ValueError):
        raise PrometheusError(f"query {expr!r}: {text!r} is not a number") from None


_SPECIALS = set("\\.+*?()|[]{}^$")


def escape_regex(value: str) -> str:
    """One value as a literal inside a PromQL regex string: regex specials escaped (a backslash doubled for the
    string), quotes escaped for the string."""
    return "".join("\\\\" + c if c in _SPECIALS else c for c in value).replace('"', '\\"')


def escape_label(value: str) -> str:
    """A value inside a PromQL string (``label="..."``)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def regex_union(values: Sequence[str]) -> str:
    """A PromQL regex matching exactly these values (anchored by PromQL), for ``label=~"..."``."""
    return "|".join(escape_regex(value) for value in sorted(set(values)))


def split_query(values: Sequence[str], render: Callable[[str], str], limit: int) -> list[str]:
    """``render(regex)`` over as few parts of ``values`` as keep each query within ``limit`` bytes; the parts
    together match every value once. Raises PrometheusError when one value alone would exceed it."""
    ordered = sorted(set(values))
    if not ordered:
        return []
    base, uses = len(render("").encode()), _uses(render)
    parts: list[list[str]] = [[]]
    size = base
    for value in ordered:
        cost = (len(escape_regex(value).encode()) + 1) * uses  # the value and its "|", wherever the regex is written
        if parts[-1] and size + cost > limit:
            parts.append([])
            size = base
        if size + cost > limit:
            raise PrometheusError(f"a query for {value!r} alone is longer than {limit} bytes: {render(value)[:200]}")
        parts[-1].append(value)
        size += cost
    return [render(regex_union(part)) for part in parts]


def _uses(render: Callable[[str], str]) -> int:
    """How many times ``render`` writes the regex it is given (an ``or`` of several selectors writes it more than
    once)."""
    marker = "\x00"
    return render(marker).count(marker)

