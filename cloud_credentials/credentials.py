"""Credentials for HTTP APIs, one request at a time: each gives the headers that authenticate a request, and names
itself and its fix for a refusal.

- :class:`BearerFile`, :class:`BearerEnv`, :class:`BearerToken`: ``Authorization: Bearer <token>`` from a file
  (read on every request: a projected or rotated token stays current), an environment variable, or a callable
  (the kubeconfig's identity, for a kube-rbac-proxy in front of Prometheus).
- :class:`AzureToken`: an Entra ID token for a scope (``AZURE_MONITOR_SCOPE`` for Azure Monitor managed
  Prometheus) from the Azure identity in use (``azure.identity.DefaultAzureCredential``: environment, workload
  identity, managed identity, Azure CLI), or the credential given; kept until five minutes before it expires.
- :class:`AwsSigV4`: AWS Signature Version 4 for a service and region (``aps``: Amazon Managed Service for
  Prometheus) with the AWS credentials of the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, as ``aws-actions/configure-aws-credentials`` exports them), or the ones given. Signed here
  with the standard library: botocore, the AWS signer, requires ``python-dateutil<3`` and the pinned Kubernetes
  client ``>=3``, so the two cannot be installed together.

A credential that cannot produce its headers raises :class:`CredentialError`, one line naming it and its fix.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

AZURE_MONITOR_SCOPE = "https://prometheus.monitor.azure.com/.default"  # Azure Monitor managed Prometheus's queries
AWS_PROMETHEUS_SERVICE = "aps"  # Amazon Managed Service for Prometheus, as SigV4 names it
REFRESH_BEFORE = 300.0  # a token is fetched anew this long before it expires


class CredentialError(Exception):
    """A credential could not produce its headers: one line naming it and how to fix it."""


class Credential(Protocol):
    """What authenticates a request: ``what`` names it, ``fix`` says what to do when it is refused."""

    what: str
    fix: str

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]: ...


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token.strip()}"}


@dataclass
class BearerFile:
    """A bearer token in a file, read for every request."""

    path: str
    what: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        self.what = self.what or f"the bearer token in file {self.path}"
        self.fix = self.fix or f"put a token the server accepts in {self.path} (or change the file the stack names)"

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise CredentialError(f"{self.what}: cannot read it ({exc.strerror}): {self.fix}") from None
        if not token:
            raise CredentialError(f"{self.what}: the file is empty: {self.fix}")
        return _bearer(token)


@dataclass
class BearerEnv:
    """A bearer token in an environment variable (a CI secret)."""

    name: str
    what: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        self.what = self.what or f"the bearer token in environment variable {self.name}"
        self.fix = self.fix or f"set {self.name} to a token the server accepts (in CI: the environment secret of that name)"

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        token = os.environ.get(self.name, "").strip()
        if not token:
            raise CredentialError(f"{self.what}: it is not set or empty: {self.fix}")
        return _bearer(token)


@dataclass
class BearerToken:
    """A bearer token from a callable (the kubeconfig's identity); None from it is no token."""

    token: Callable[[], str | None]
    what: str
    fix: str

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        found = self.token()
        if not found:
            raise CredentialError(f"{self.what}: it has no bearer token: {self.fix}")
        return _bearer(found)


class _TokenSource(Protocol):
    def get_token(self, *scopes: str) -> Any: ...


@dataclass
class AzureToken:
    """An Entra ID token for ``scope`` from the Azure identity in use (``DefaultAzureCredential``), or from
    ``credential`` (any azure-identity credential)."""

    scope: str = AZURE_MONITOR_SCOPE
    credential: _TokenSource | None = None
    clock: Callable[[], float] = time.time
    what: str = ""
    fix: str = ("sign the identity in: in CI, azure/login with OIDC (AZURE_CLIENT_ID, AZURE_TENANT_ID, "
                "AZURE_SUBSCRIPTION_ID), on a workstation `az login`; and give it the Monitoring Data Reader role on "
                "the Azure Monitor workspace")
    _cached: tuple[str, float] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.what = self.what or f"the Azure identity in use (DefaultAzureCredential), for {self.scope}"

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        if self._cached is None or self._cached[1] - REFRESH_BEFORE <= self.clock():
            self._cached = self._fetch()
        return _bearer(self._cached[0])

    def _fetch(self) -> tuple[str, float]:
        from azure.core.exceptions import AzureError  # noqa: PLC0415 - loaded only where the Azure identity is used
        from azure.identity import DefaultAzureCredential  # noqa: PLC0415

        try:
            if self.credential is None:
                self.credential = DefaultAzureCredential()
            token = self.credential.get_token(self.scope)
        except AzureError as exc:
            detail = " ".join(str(exc).split())[:400]
            raise CredentialError(f"{self.what}: no token ({type(exc).__name__}: {detail}): {self.fix}") from None
        return str(token.token), float(token.expires_on)


@dataclass(frozen=True)
class AwsKeys:
    access_key: str
    secret_key: str
    session_token: str | None = None


def aws_keys_from_environment() -> AwsKeys | None:
    """The AWS credentials of the environment (what configure-aws-credentials exports), or None."""
    access, secret = os.environ.get("AWS_ACCESS_KEY_ID", ""), os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    if not access or not secret:
        return None
    return AwsKeys(access, secret, os.environ.get("AWS_SESSION_TOKEN") or None)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


@dataclass
class AwsSigV4:
    """AWS Signature Version 4 of each request for ``service`` in ``region`` (headers ``Host``, ``X-Amz-Date``,
    ``X-Amz-Security-Token`` where the keys carry a session, and ``Authorization``)."""

    region: str
    service: str = AWS_PROMETHEUS_SERVICE
    keys: Callable[[], AwsKeys | None] = aws_keys_from_environment
    clock: Callable[[], float] = time.time
    what: str = ""
    fix: str = ("give the job AWS credentials of a role allowed aps:QueryMetrics on the workspace: in CI "
                "aws-actions/configure-aws-credentials with role-to-assume (OIDC); on a workstation "
                "`eval $(aws configure export-credentials --format env)`")

    def __post_init__(self) -> None:
        self.what = self.what or f"AWS SigV4 ({self.service}, {self.region}) with the environment's AWS credentials"

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        keys = self.keys()
        if keys is None:
            raise CredentialError(f"{self.what}: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set: {self.fix}")
        parts = urlsplit(url)
        now = datetime.fromtimestamp(self.clock(), UTC)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        signed = {"host": parts.netloc, "x-amz-date": stamp}
        if keys.session_token:
            signed["x-amz-security-token"] = keys.session_token
        names = sorted(signed)
        query = "&".join(sorted(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, _, v in
                                (pair.partition("=") for pair in parts.query.split("&") if pair)))
        canonical = "\n".join([method.upper(), quote(parts.path or "/", safe="/-_.~"), query,
                               "".join(f"{n}:{signed[n].strip()}\n" for n in names), ";".join(names),
                               hashlib.sha256(body).hexdigest()])
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(_hmac(_hmac(_hmac(f"AWS4{keys.secret_key}".encode(), day), self.region), self.service),
                    "aws4_request")
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        out = {"Host": parts.netloc, "X-Amz-Date": stamp,
               "Authorization": f"AWS4-HMAC-SHA256 Credential={keys.access_key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}"}
        if keys.session_token:
            out["X-Amz-Security-Token"] = keys.session_token
        return out
