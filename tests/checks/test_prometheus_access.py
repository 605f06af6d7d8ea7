"""Every Prometheus a team runs, reached with its credential: a real Prometheus on loopback behind a small auth
front written here, which checks exactly one credential and refuses anything else (401), the way Azure Monitor
managed Prometheus (an Entra ID token for its scope), Amazon Managed Service for Prometheus (SigV4 for ``aps``,
verified here by this file's own computation), a kube-rbac-proxy (the kubeconfig identity's token), Mimir
(``X-Scope-OrgID``) or a TLS endpoint with a private CA do. A refusal names the credential tried and its fix."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from azure.core.credentials import AccessToken
from azure.identity import EnvironmentCredential
from kubernetes import client as k8s_client

from checks import kube as k
from checks.prometheus import DirectTransport, Prometheus, PrometheusError, connect, credential_for, for_stack
from cloud_credentials.credentials import AZURE_MONITOR_SCOPE, AwsKeys, AwsSigV4, AzureToken
from fleetspec.observability import PrometheusAuth, PrometheusSettings, PrometheusUrl, prometheus_access
from tests.checks.verify_world import ProxyKube
from tests.loopback_http import FakeHandler
from tests.prometheus.server import MISSING, History, binary, start
from tests.private_ca import private_ca

pytestmark = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)

QUERY = "sum(fleet_probe)"


class Seen(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Check = Callable[[Seen], bool]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus holding one series, ``fleet_probe`` = 7, over the last half hour."""
    history = History()
    now = dt.datetime.now(dt.UTC).timestamp()
    for step in range(60):
        history.add("fleet_probe", {"node": "gpu-0"}, now - 1800 + step * 30, 7.0)
    with start(history, tmp_path_factory.mktemp("prometheus")) as url:
        yield url


class _Front(FakeHandler):
    check: Check
    backend: str
    seen: list[Seen]

    def do_POST(self) -> None:  # noqa: N802 - the handler's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        seen = Seen("POST", self.path, {key.lower(): value for key, value in self.headers.items()}, body)
        self.seen.append(seen)
        if not self.check(seen):
            self.send_body(401, b'{"status":"error","errorType":"unauthorized","error":"refused"}')
            return
        request = urllib.request.Request(self.backend + self.path, data=body, method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
                self.send_body(response.status, response.read())
        except urllib.error.HTTPError as error:
            self.send_body(error.code, error.read())


class Front(NamedTuple):
    url: str
    seen: list[Seen]


def _serve(backend: str, check: Check, tls: ssl.SSLContext | None = None) -> Iterator[Front]:
    seen: list[Seen] = []
    handler = type("Front", (_Front,), {"check": staticmethod(check), "backend": backend, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Front(f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


def _bearer(token: str) -> Check:
    return lambda seen: seen.headers.get("authorization") == f"Bearer {token}"


def _value(prometheus: Prometheus) -> float:
    (sample,) = prometheus.query(QUERY)
    return sample.value


# ---------------------------------------------------------------- the short form and plain URLs


def test_the_string_form_stays_a_url_or_a_service() -> None:
    assert prometheus_access("http://prometheus.monitoring:9090") == PrometheusUrl("http://prometheus.monitoring:9090")
    found = prometheus_access(PrometheusSettings(service="monitoring/prometheus-k8s:https", scheme="https"))
    assert found.describe() == "service monitoring/https:prometheus-k8s:https (through the API server's service proxy)"


def test_a_plain_url_needs_nothing(prometheus: str) -> None:
    assert _value(connect(prometheus_access(prometheus), _kube())) == 7.0


def test_a_server_asking_for_a_credential_none_was_given_for_says_how_to_give_one(prometheus: str) -> None:
    for front in _serve(prometheus, _bearer("s3cret")):
        with pytest.raises(PrometheusError) as refused:
            _value(Prometheus(front.url))
    assert "HTTP 401: it asks for a credential and none was sent: give validation.prometheus as an object with " \
           "'auth'" in str(refused.value)


# ---------------------------------------------------------------- bearer tokens


def test_a_bearer_token_from_a_file_is_read_for_every_request(prometheus: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    access = prometheus_access(PrometheusSettings(url="http://x", auth=PrometheusAuth(type="bearer-file",
                                                                                      file=str(token))))
    for front in _serve(prometheus, _bearer("s3cret")):
        client = connect(PrometheusUrl(front.url, access.auth), _kube())  # type: ignore[union-attr]
        assert _value(client) == 7.0
        token.write_text("rotated")  # a projected token rotates: the next request reads the file again
        with pytest.raises(PrometheusError) as refused:
            _value(client)
    assert f"HTTP 401: the bearer token in file {token} was refused: put a token the server accepts in {token}" \
        in str(refused.value)


def test_a_bearer_token_from_the_environment(prometheus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = PrometheusAuth(type="bearer-env", env="PROMETHEUS_TOKEN")
    for front in _serve(prometheus, _bearer("from-ci")):
        client = connect(PrometheusUrl(front.url, auth), _kube())
        monkeypatch.delenv("PROMETHEUS_TOKEN", raising=False)
        with pytest.raises(PrometheusError) as unset:
            _value(client)
        monkeypatch.setenv("PROMETHEUS_TOKEN", "from-ci")
        assert _value(client) == 7.0
        assert front.seen and all(s.headers.get("authorization") for s in front.seen)  # none went out without it
    assert ("the bearer token in environment variable PROMETHEUS_TOKEN: it is not set or empty: set PROMETHEUS_TOKEN "
            "to a token the server accepts (in CI: the environment secret of that name)") in str(unset.value)


def _kube(token: str | None = None) -> k.Kube:
    configuration = k8s_client.Configuration()
    configuration.host = "https://api.canary.example:6443"
    if token is not None:
        configuration.api_key = {"authorization": f"Bearer {token}"}
    return k.Kube(k8s_client.ApiClient(configuration))


def test_the_kubeconfig_identity_for_a_kube_rbac_proxy(prometheus: str) -> None:
    auth = PrometheusAuth(type="kubeconfig")
    for front in _serve(prometheus, _bearer("identity-token")):
        assert _value(connect(PrometheusUrl(front.url, auth), _kube("identity-token"))) == 7.0
        with pytest.raises(PrometheusError) as none:
            _value(connect(PrometheusUrl(front.url, auth), _kube()))  # a client certificate: no token
    assert "the kubeconfig identity (https://api.canary.example:6443): it has no bearer token: use a kubeconfig " \
           "whose user has a token" in str(none.value)


# ---------------------------------------------------------------- Azure Monitor managed Prometheus


class _Entra:
    """An azure-identity credential as the Azure identity in use hands out tokens: it records the scopes asked."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(f"entra-token-{len(self.scopes)}", int(dt.datetime.now(dt.UTC).timestamp()) + 3600)


def test_azure_monitor_gets_an_entra_token_for_its_scope_once_per_lifetime(prometheus: str) -> None:
    entra = _Entra()
    for front in _serve(prometheus, _bearer("entra-token-1")):
        client = Prometheus(transport=DirectTransport(front.url, credential=AzureToken(credential=entra)))
        assert _value(client) == 7.0 and _value(client) == 7.0
    assert entra.scopes == [(AZURE_MONITOR_SCOPE,)] and AZURE_MONITOR_SCOPE == "https://prometheus.monitor.azure.com/.default"
    assert isinstance(credential_for(PrometheusAuth(type="azure"), _kube()), AzureToken)


def test_an_azure_identity_that_gives_no_token_is_named_with_its_fix(prometheus: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
                 "AZURE_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    for front in _serve(prometheus, _bearer("never")):
        client = Prometheus(transport=DirectTransport(front.url, credential=AzureToken(credential=EnvironmentCredential())))
        with pytest.raises(PrometheusError) as refused:
            _value(client)
        assert front.seen == []  # nothing went out without a token
    message = str(refused.value)
    assert "the Azure identity in use (DefaultAzureCredential), for https://prometheus.monitor.azure.com/.default: " \
           "no token (CredentialUnavailableError" in message
    assert "azure/login with OIDC" in message and "Monitoring Data Reader" in message


# ---------------------------------------------------------------- Amazon Managed Service for Prometheus


def _sigv4_check(keys: AwsKeys, region: str) -> Check:
    """Verify AWS Signature Version 4 as the service does, from the request as it arrived: the canonical request
    rebuilt from its method, path, the headers it says it signed and the body, signed with the secret here."""

    def check(seen: Seen) -> bool:
        authorization = seen.headers.get("authorization", "")
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return False
        fields = dict(part.strip().split("=", 1) for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(","))
        access, day, where, service, terminal = fields["Credential"].split("/")
        names = fields["SignedHeaders"].split(";")
        if access != keys.access_key or (where, service, terminal) != (region, "aps", "aws4_request"):
            return False
        if "host" not in names or "x-amz-date" not in names or (keys.session_token and "x-amz-security-token" not in names):
            return False
        lines = [seen.method, seen.path.split("?")[0], "", *(f"{n}:{seen.headers[n].strip()}" for n in names), "",
                 ";".join(names), hashlib.sha256(seen.body).hexdigest()]
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        amz_date = seen.headers["x-amz-date"]
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{day}/{region}/aps/aws4_request\n{digest}"
        key = ("AWS4" + keys.secret_key).encode()
        for step in (day, region, "aps", "aws4_request"):
            key = hmac.new(key, step.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, fields["Signature"]) and amz_date.startswith(day)

    return check


@pytest.mark.parametrize("session", [None, "FwoGZXIvYXdzEJr//session"])
def test_amazon_managed_prometheus_takes_a_sigv4_signature_for_aps(prometheus: str, session: str | None) -> None:
    keys = AwsKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", session)
    for front in _serve(prometheus, _sigv4_check(keys, "us-east-1")):
        signed = AwsSigV4("us-east-1", keys=lambda: keys)
        assert _value(Prometheus(transport=DirectTransport(front.url, credential=signed))) == 7.0
        forged = AwsSigV4("us-east-1", keys=lambda: AwsKeys(keys.access_key, "another-secret", session))
        with pytest.raises(PrometheusError) as refused:
            _value(Prometheus(transport=DirectTransport(front.url, credential=forged)))
    assert ("HTTP 401: AWS SigV4 (aps, us-east-1) with the environment's AWS credentials was refused: give the job AWS "
            "credentials of a role allowed aps:QueryMetrics") in str(refused.value)


def test_sigv4_without_aws_credentials_says_where_they_come_from(prometheus: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    auth = PrometheusAuth(type="aws-sigv4", region="eu-west-1")
    with pytest.raises(PrometheusError) as unset:
        _value(connect(PrometheusUrl(prometheus, auth), _kube()))
    assert "AWS SigV4 (aps, eu-west-1) with the environment's AWS credentials: AWS_ACCESS_KEY_ID and " \
           "AWS_SECRET_ACCESS_KEY are not set: " in str(unset.value)
    assert "aws-actions/configure-aws-credentials with role-to-assume" in str(unset.value)


# ---------------------------------------------------------------- a tenant, a private CA, the service proxy


def test_a_tenant_goes_as_x_scope_orgid(prometheus: str) -> None:
    for front in _serve(prometheus, lambda seen: seen.headers.get("x-scope-orgid") == "gpu-fleet"):
        settings = PrometheusSettings(url=front.url, tenant="gpu-fleet")
        client = for_stack(settings, _kube())
        assert client is not None and _value(client) == 7.0
        with pytest.raises(PrometheusError) as refused:
            _value(Prometheus(front.url))
    assert "HTTP 401" in str(refused.value)


def test_a_private_ca_bundle_is_trusted_only_where_named(prometheus: str, tmp_path: Path) -> None:
    bundle, tls = private_ca(tmp_path)
    for front in _serve(prometheus, _bearer("tls-token"), tls):
        auth = PrometheusAuth(type="bearer-env", env="TLS_TOKEN")
        trusted = connect(PrometheusUrl(front.url, auth, ca_file=str(bundle)), _kube())
        untrusted = connect(PrometheusUrl(front.url, auth), _kube())
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TLS_TOKEN", "tls-token")
            assert _value(trusted) == 7.0
            with pytest.raises(PrometheusError) as refused:
                _value(untrusted)
    assert "the server's TLS certificate is not trusted (set validation.prometheus.caFile to the CA bundle that " \
           "signs it)" in str(refused.value)


def test_the_service_proxy_over_https_with_a_tenant(prometheus: str, tmp_path: Path) -> None:
    """The API server's service proxy to a TLS port: ``services/https:<name>:<port>/proxy``."""
    with ProxyKube() as fake:
        fake.services[("monitoring", "https:prometheus-k8s:web")] = prometheus
        kube = k.connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
        settings = PrometheusSettings(service="monitoring/prometheus-k8s:web", scheme="https", tenant="gpu-fleet")
        client = for_stack(settings, kube)
        assert client is not None and _value(client) == 7.0
        assert fake.service_proxied[-1][2] == "https:prometheus-k8s:web"
        assert client.where == "service monitoring/https:prometheus-k8s:web (through the API server's service proxy)"
