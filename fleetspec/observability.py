"""How the live verbs reach Prometheus, and the small grammars of the settings that judge its figures.

``validation.prometheus`` is either a URL of Prometheus's HTTP API (or a compatible one) reached directly, or an
in-cluster Service, ``namespace/name:port``, reached through the API server's service proxy
(``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/``) with the stack's own cluster credentials: a CI runner
that can reach the API server reaches Prometheus the same way, with no route into the cluster network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import WithJsonSchema

from fleetspec.base import DNS_LABEL

# A Service port: its number, or its name (an IANA service name: lowercase letters, digits and '-', at most 15).
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")
_DECIMAL_PERCENT = re.compile(r"^(\d{1,3})(\.\d{1,4})?%$")
_DURATION = re.compile(r"^(\d+)(s|m|h)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}

# The two grammars as field types, with the JSON Schema editors check them by (the field validators check the
# range too: decimal_percent, duration_seconds).
DecimalPercent = Annotated[str, WithJsonSchema({"type": "string", "pattern": _DECIMAL_PERCENT.pattern})]
Duration = Annotated[str, WithJsonSchema({"type": "string", "pattern": _DURATION.pattern})]


@dataclass(frozen=True)
class PrometheusUrl:
    """Prometheus's HTTP API at a URL this machine reaches (``http://prometheus.monitoring:9090``)."""

    url: str

    def describe(self) -> str:
        return self.url


@dataclass(frozen=True)
class PrometheusService:
    """An in-cluster Prometheus Service, reached through the API server's service proxy."""

    namespace: str
    name: str
    port: str  # the port's number or name, as the service proxy takes it

    def describe(self) -> str:
        return f"service {self.namespace}/{self.name}:{self.port} (through the API server's service proxy)"


PrometheusAccess = PrometheusUrl | PrometheusService


def parse_prometheus(value: str) -> PrometheusAccess:
    """``http(s)://host[:port][/path]`` or ``namespace/name:port``; ValueError saying which form was meant."""
    text = value.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"'{value}' is not an http(s) URL such as http://prometheus.monitoring:9090")
        return PrometheusUrl(text.rstrip("/"))
    namespace, slash, rest = text.partition("/")
    name, colon, port = rest.partition(":")
    if not slash or not colon:
        raise ValueError(f"'{value}' is neither an http(s) URL nor a Service as namespace/name:port "
                         "(e.g. monitoring/prometheus-k8s:9090)")
    for what, part in (("namespace", namespace), ("Service name", name)):
        if not DNS_LABEL.fullmatch(part):
            raise ValueError(f"'{value}': {what} '{part}' is not a valid Kubernetes name")
    if port.isdigit():
        if not 0 < int(port) < 65536:
            raise ValueError(f"'{value}': port {port} is not between 1 and 65535")
    elif not _PORT_NAME.fullmatch(port) or not any(c.isalpha() for c in port):
        raise ValueError(f"'{value}': port '{port}' is neither a number nor a Service port name")
    return PrometheusService(namespace, name, port)


def decimal_percent(value: object) -> float:
    """The fraction of a percentage that may carry decimals (``"0.5%"`` -> 0.005), from 0% to 100%."""
    match = _DECIMAL_PERCENT.fullmatch(value) if isinstance(value, str) else None
    number = float(value[:-1]) if match and isinstance(value, str) else None
    if number is None or number > 100:
        raise ValueError(f"must be a percentage from 0% to 100%, such as '1%' or '0.5%', got {value!r}")
    return number / 100


def duration_seconds(value: object) -> int:
    """Seconds of a duration written as Prometheus writes a simple one: ``90s``, ``10m``, ``2h``."""
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"must be a duration such as '90s', '10m' or '1h', got {value!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
