"""Issue 24 point 4: live errors that say what to do. A credentials plugin that fails stops the verb at once with
the plugin's own message and the command that fixes it, in the stack's cloud's words; a server that answers 404
without a Kubernetes status is said to be no API server; each retry is one line; urllib3's warnings never print
raw. All on loopback: the fake API, a plain HTTPS server, a closed port."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from typer.testing import CliRunner

from checks import kube as kube_module
from checks.errors import GaveUpError
from rollout.cli import app
from tests.fakekube.server import FakeKube
from tests.loopback_http import FakeHandler

runner = CliRunner()

FAILING_PLUGIN = """#!/bin/sh
echo 'Unable to locate credentials. You can configure credentials by running "aws configure".' >&2
exit 255
"""


def kubeconfig_doc(server: str, user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_failing_credentials_plugin_stops_at_once_with_its_message_and_the_fix(fake: FakeKube,
                                                                                 tmp_path: Path) -> None:
    plugin = tmp_path / "aws"
    plugin.write_text(FAILING_PLUGIN, encoding="utf-8")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "./aws",
                     "args": ["eks", "get-token", "--cluster-name", "eks-inference-use1-1"]}}
    path = write(tmp_path / "kubeconfig", kubeconfig_doc(fake.url, user))
    result = runner.invoke(app, ["preflight", "--stack", "eks-prod", "--kubeconfig", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "credentials plugin failed (process returned 255. Unable to locate credentials." in line
    assert "aws sts get-caller-identity" in line
    assert "`aws eks update-kubeconfig --name eks-inference-use1-1 --region us-east-1`" in line
    assert "ERROR:root" not in result.output
    assert sum(fake.counts.values()) == 0  # stopped before any request went out unauthenticated


@pytest.mark.parametrize(("stack", "named"), [
    ("prod", "`az aks get-credentials --resource-group rg-inference-weu-1 --name aks-inference-weu-1`"),
    ("eks-prod", "`aws eks update-kubeconfig --name eks-inference-use1-1 --region us-east-1`"),
    ("existing-prod", "the stack declares context lab-gpu-1 (cluster.existing.context)"),
])
def test_no_kubeconfig_says_how_to_get_one_for_the_stack_s_cluster(tmp_path: Path, stack: str, named: str) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": None, "KUBERNETES_SERVICE_HOST": None}
    result = runner.invoke(app, ["preflight", "--stack", stack], env=env)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("--kubeconfig/--context: no kubeconfig: ") and named in line


def test_an_aks_stack_is_never_told_to_declare_an_existing_cluster_s_context(fake: FakeKube, tmp_path: Path) -> None:
    doc = kubeconfig_doc(fake.url, {"token": "t"})
    doc.pop("current-context")
    result = runner.invoke(app, ["preflight", "--stack", "prod", "--kubeconfig", str(write(tmp_path / "k", doc))])
    assert result.exit_code == 2
    assert "cluster.existing" not in result.stderr
    assert "sets no current-context: pass --context, or run `az aks get-credentials --resource-group " \
           "rg-inference-weu-1 --name aks-inference-weu-1`, which sets it" in result.stderr


class _NotKubernetes(FakeHandler):
    """A web server that is no Kubernetes API: 404 and a page of HTML for everything."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_body(404, b"<html><body>Not Found</body></html>", content_type="text/html")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not-kubernetes.invalid")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def not_kubernetes(tmp_path: Path) -> Iterator[str]:
    """An HTTPS server on loopback with a self-signed certificate, answering 404 HTML."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotKubernetes)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_self_signed(tmp_path))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_is_no_kubernetes_api_is_named_as_such(not_kubernetes: str, tmp_path: Path) -> None:
    path = write(tmp_path / "kubeconfig", kubeconfig_doc(not_kubernetes, {"token": "t"},
                                                          **{"insecure-skip-tls-verify": True}))
    result = runner.invoke(app, ["preflight", "--stack", "prod", "--kubeconfig", str(path)])
    assert result.exit_code == 1 and result.stdout == ""
    assert "answered 404 without a Kubernetes status, so it is no Kubernetes API server" in result.stderr
    assert f"note: the TLS certificate of {not_kubernetes} is not verified" in result.stderr
    assert "InsecureRequestWarning" not in result.stderr and "site-packages" not in result.stderr
    assert "list nodes: not found" not in result.stderr  # the bare 404 it used to be


def test_each_retry_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write(tmp_path / "kubeconfig", kubeconfig_doc(f"http://127.0.0.1:{port}", {"token": "t"}))
    lines: list[str] = []
    settings = kube_module.ClientSettings(request_timeout=1, attempts=3, backoff_base=0.01, backoff_cap=0.02)
    adapter = kube_module.connect(str(path), settings=settings, notify=lines.append)
    with pytest.raises(GaveUpError, match="the connection was refused or failed"):
        adapter.list(kube_module.NODES)
    note, *lines = lines  # the plain-http note the adapter says once, then one line per retry
    assert note.startswith("note: http://127.0.0.1:") and "without TLS" in note
    assert len(lines) == 2
    assert all("list nodes: the connection was refused or failed" in line and "\n" not in line for line in lines)
    assert [line.rsplit("(", 1)[1] for line in lines] == ["attempt 2 of 3)", "attempt 3 of 3)"]
