"""How the live verbs reach Prometheus, and the small grammars of the settings that judge its figures.

``validation.prometheus`` is either a URL of Prometheus's HTTP API (or a compatible one) reached directly, or an
in-cluster Service, ``namespace/name:port``, reached through the API server's service proxy
(``/api/v1/namespaces/<ns>/services/[https:]<name>:<port>/proxy/``) with the stack's own cluster credentials: a CI
runner that can reach the API server reaches Prometheus the same way, with no route into the cluster network. The
string is the short form; the object form (:class:`PrometheusSettings`) adds the credential a URL needs (a bearer
token from a file, an environment variable or the kubeconfig's identity; the Azure identity for Azure Monitor
managed Prometheus; AWS SigV4 for Amazon Managed Service for Prometheus), a tenant (``X-Scope-OrgID``: Mimir,
Cortex, Thanos), a CA bundle, and https through the service proxy. ``cloud_credentials`` turns the credential
into headers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from typing import Literal, Self

from pydantic import Discriminator, Field, Tag, WithJsonSchema, field_validator, model_validator

from fleetspec.base import DNS_LABEL, SpecModel, at

# A Service port: its number, or its name (an IANA service name: lowercase letters, digits and '-', at most 15).
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")
_DECIMAL_PERCENT = re.compile(r"^(\d{1,3})(\.\d{1,4})?%$")
_DURATION = re.compile(r"^(\d+)(s|m|h)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}

# The two grammars as field types, with the JSON Schema editors check them by (the field validators check the
# range too: decimal_percent, duration_seconds).
DecimalPercent = Annotated[str, WithJsonSchema({"type": "string", "pattern": _DECIMAL_PERCENT.pattern})]
Duration = Annotated[str, WithJsonSchema({"type": "string", "pattern": _DURATION.pattern})]


AuthType = Literal["bearer-file", "bearer-env", "kubeconfig", "azure", "aws-sigv4"]
_AUTH_KEYS: dict[str, tuple[str, ...]] = {"bearer-file": ("file",), "bearer-env": ("env",), "kubeconfig": (),
                                          "azure": (), "aws-sigv4": ("region",)}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")


class PrometheusAuth(SpecModel):
    """The credential a Prometheus URL asks for (docs/validation.md, "Reaching Prometheus")."""

    type: AuthType = Field(description="`bearer-file`: a token in `file`; `bearer-env`: a token in the environment "
                           "variable `env` (a CI secret); `kubeconfig`: the kubeconfig identity's token (a "
                           "kube-rbac-proxy in front of Prometheus); `azure`: the Azure identity in use, for Azure "
                           "Monitor managed Prometheus; `aws-sigv4`: AWS SigV4 (`aps`) in `region` with the "
                           "environment's AWS credentials, for Amazon Managed Service for Prometheus.",
                           examples=["azure"])
    file: str | None = Field(None, description="bearer-file: absolute path of the token file (read on every request).",
                             examples=["/var/run/secrets/prometheus/token"])
    env: str | None = Field(None, description="bearer-env: the environment variable holding the token.",
                            examples=["PROMETHEUS_TOKEN"])
    region: str | None = Field(None, description="aws-sigv4: the workspace's AWS region.", examples=["us-east-1"])

    @model_validator(mode="after")
    def _keys_of_its_type(self) -> Self:
        needed = _AUTH_KEYS[self.type]
        for key in ("file", "env", "region"):
            given = getattr(self, key) is not None
            if key in needed and not given:
                raise at((key,), f"auth type {self.type} needs '{key}'")
            if given and key not in needed:
                raise at((key,), f"'{key}' is not a setting of auth type {self.type}")
        if self.file is not None and (not self.file.startswith("/") or ".." in self.file.split("/")):
            raise at(("file",), f"'{self.file}' must be an absolute path without '..'")
        if self.env is not None and not _ENV_NAME.fullmatch(self.env):
            raise at(("env",), f"'{self.env}' is not an environment variable name")
        if self.region is not None and not _AWS_REGION.fullmatch(self.region):
            raise at(("region",), f"'{self.region}' is not an AWS region such as us-east-1")
        return self


class PrometheusSettings(SpecModel):
    """``validation.prometheus`` as an object: where Prometheus is and how to authenticate to it."""

    url: str | None = Field(None, description="Prometheus's HTTP API (or a compatible one: Azure Monitor workspace "
                            "query endpoint, Amazon Managed Service for Prometheus workspace, Mimir, Thanos) at a URL "
                            "this machine reaches. One of `url` and `service`.",
                            examples=["https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123456789abcdef"])
    service: str | None = Field(None, description="An in-cluster Service `namespace/name:port`, reached through the API "
                                "server's service proxy with the stack's cluster credentials.",
                                examples=["monitoring/prometheus-k8s:web"])
    scheme: Literal["http", "https"] = Field("http", description="service only: how the API server reaches the "
                                              "Service's port (`https` for a TLS port).", examples=["https"])
    auth: PrometheusAuth | None = Field(None, description="url only: the credential each query carries; none: no "
                                        "credential (the service proxy always uses the cluster's).")
    tenant: str | None = Field(None, min_length=1, description="Sent as `X-Scope-OrgID` (Mimir, Cortex, Thanos "
                               "receive).", examples=["gpu-fleet"])
    caFile: str | None = Field(None, description="url only: absolute path of the CA bundle that signs the server's "
                               "TLS certificate (default: the system's).", examples=["/etc/ssl/certs/prometheus-ca.pem"])

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not isinstance(parse_prometheus(value), PrometheusUrl):
            raise ValueError(f"'{value}' is not an http(s) URL such as https://prometheus.example.com")
        return value

    @field_validator("service")
    @classmethod
    def _service(cls, value: str | None) -> str | None:
        if value is not None and not isinstance(parse_prometheus(value), PrometheusService):
            raise ValueError(f"'{value}' is not a Service as namespace/name:port")
        return value

    @model_validator(mode="after")
    def _one_place(self) -> Self:
        if (self.url is None) == (self.service is None):
            raise ValueError("set exactly one of 'url' (reached directly) and 'service' (through the API server's "
                             "service proxy)")
        if self.service is not None:
            for key in ("auth", "caFile"):
                if getattr(self, key) is not None:
                    raise at((key,), f"'{key}' applies to a url: through the service proxy the API server "
                             "authenticates with the cluster's credentials and reaches the Service itself; give "
                             "'url' to reach Prometheus directly with a credential")
        elif self.scheme != "http":
            raise at(("scheme",), "'scheme' applies to a service; a url carries its own scheme")
        if self.caFile is not None and not self.caFile.startswith("/"):
            raise at(("caFile",), f"'{self.caFile}' must be an absolute path")
        return self


@dataclass(frozen=True)
class PrometheusUrl:
    """Prometheus's HTTP API at a URL this machine reaches (``http://prometheus.monitoring:9090``), with the
    credential, tenant and CA bundle it needs."""

    url: str
    auth: PrometheusAuth | None = None
    tenant: str | None = None
    ca_file: str | None = None

    def describe(self) -> str:
        return self.url


@dataclass(frozen=True)
class PrometheusService:
    """An in-cluster Prometheus Service, reached through the API server's service proxy."""

    namespace: str
    name: str
    port: str  # the port's number or name, as the service proxy takes it
    scheme: str = "http"
    tenant: str | None = None

    def describe(self) -> str:
        scheme = "https:" if self.scheme == "https" else ""
        return f"service {self.namespace}/{scheme}{self.name}:{self.port} (through the API server's service proxy)"


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


def _form(value: object) -> str:
    return "str" if isinstance(value, str) else "object"


# validation.prometheus: the short form (a string) or the object; an error names only the form given.
PrometheusDeclared = Annotated[Annotated[str, Tag("str")] | Annotated[PrometheusSettings, Tag("object")],
                               Discriminator(_form)]


def prometheus_access(value: str | PrometheusSettings) -> PrometheusAccess:
    """Where and how to reach the Prometheus ``validation.prometheus`` declares, in either form."""
    if isinstance(value, str):
        return parse_prometheus(value)
    if value.url is not None:
        return PrometheusUrl(value.url.strip().rstrip("/"), value.auth, value.tenant, value.caFile)
    found = parse_prometheus(value.service or "")
    assert isinstance(found, PrometheusService)
    return PrometheusService(found.namespace, found.name, found.port, value.scheme, value.tenant)


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
