"""A real Kubernetes control plane on loopback, for the e2e tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, all built by e2e/build.sh.

Every process listens on 127.0.0.1 on a free port, keeps its data and logs in one temporary folder,
and is stopped by ``stop()`` whatever happened (the session fixture calls it in a ``finally``).
Clients authenticate with a static token of a ``system:masters`` user; the API server's serving
certificate is signed by a throwaway CA that the kubeconfig carries.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parents[2] / "e2e"
BIN_DIR = E2E_DIR / "bin"
CONTROL_PLANE_TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# Controllers the tests rely on: Deployments make ReplicaSets make pods, the operator's DaemonSet makes
# driver pods, the disruption controller keeps PDB status (the Eviction API reads it), namespaces get
# their default ServiceAccount, garbage collection follows owner references. The node lifecycle
# controller stays off: kwok's nodes have no kubelet heartbeat to keep them Ready.
CONTROLLERS = ",".join(f"{name}-controller" for name in (
    "deployment", "replicaset", "daemonset", "disruption", "serviceaccount", "garbage-collector", "namespace",
    "endpoints", "endpointslice",  # a Service's `up` waits for its endpoints (the in-cluster guard's Service)
))

TOKEN = "e2e-admin-token"  # noqa: S105 - a throwaway credential of a loopback-only test cluster


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_tools() -> list[str]:
    return [name for name in CONTROL_PLANE_TOOLS if not os.access(BIN_DIR / name, os.X_OK)]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(directory: Path) -> None:
    """A CA, the API server's serving certificate (127.0.0.1, localhost) and the service-account key."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=gpu-driver-upgrade-e2e-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=directory)
    (directory / "apiserver.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "apiserver.crt", "-days", "2", "-extfile", "apiserver.ext", cwd=directory)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)


def kubeconfig_document(server: str, ca_file: Path, context: str) -> dict:
    ca = base64.b64encode(ca_file.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "e2e-admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": "e2e-admin"}}],
        "current-context": context,
    }


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    """Start with ``start()``, always ``stop()``. ``kubeconfig`` names one context, ``context``."""

    workdir: Path
    context: str = "e2e"
    processes: list[Process] = field(default_factory=list)
    server: str = ""
    kubeconfig: Path = Path()

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120.0) -> None:
        missing = missing_tools()
        if missing:
            raise RuntimeError(f"e2e tools missing in {BIN_DIR}: {', '.join(missing)}; run e2e/build.sh (make e2e)")
        certs = self.workdir / "certs"
        make_certs(certs)
        (self.workdir / "tokens.csv").write_text(f"{TOKEN},e2e-admin,e2e-admin,system:masters\n")

        etcd_client, etcd_peer = free_port(), free_port()
        self._spawn("etcd", [
            "--name=e2e", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--log-level=warn",
        ])
        self._wait(f"http://127.0.0.1:{etcd_client}/health", "etcd", timeout, tls=False)

        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={certs / 'apiserver.crt'}", f"--tls-private-key-file={certs / 'apiserver.key'}",
            f"--client-ca-file={certs / 'ca.crt'}", f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC", "--service-cluster-ip-range=10.96.0.0/16",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certs / 'sa.pub'}",
            f"--service-account-signing-key-file={certs / 'sa.key'}",
            f"--cert-dir={certs}", "--endpoint-reconciler-type=none", "--allow-privileged=true",
            # New nodes get a not-ready taint that only the node lifecycle controller removes, and that
            # controller stays off (see CONTROLLERS): kwok's nodes are Ready from their first status.
            "--disable-admission-plugins=TaintNodesByCondition", "--v=1",
        ])
        self._wait(f"{self.server}/readyz", "kube-apiserver", timeout)

        self.kubeconfig = self.workdir / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(kubeconfig_document(self.server, certs / "ca.crt", self.context)))
        self.kubeconfig.chmod(0o600)
        kubeconfig = str(self.kubeconfig)

        self._spawn("kube-controller-manager", [
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", f"--controllers={CONTROLLERS}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--cert-dir={self.workdir / 'kcm-certs'}", "--use-service-account-credentials=false",
            f"--root-ca-file={certs / 'ca.crt'}", f"--service-account-private-key-file={certs / 'sa.key'}",
            "--v=1",
        ])
        self._spawn("kube-scheduler", [
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}", f"--cert-dir={self.workdir / 'scheduler-certs'}", "--v=1",
        ])
        stages = sorted(str(p) for p in (BIN_DIR / "kwok-stages").glob("*.yaml"))
        self._spawn("kwok", [
            f"--kubeconfig={kubeconfig}", "--manage-all-nodes=true",
            *(f"--config={path}" for path in stages),
            f"--server-address=127.0.0.1:{free_port()}", "--node-ip=127.0.0.1", "--v=INFO",
        ])

    def stop(self) -> None:
        """Stop every process, newest first: SIGTERM, then SIGKILL after a grace period."""
        for proc in reversed(self.processes):
            if proc.popen.poll() is None:
                try:
                    os.killpg(proc.popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 15
        for proc in reversed(self.processes):
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.popen.wait(timeout=10)
        self.processes.clear()

    def check_alive(self) -> None:
        dead = [p for p in self.processes if p.popen.poll() is not None]
        if dead:
            raise RuntimeError("; ".join(f"{p.name} exited {p.popen.returncode}:\n{p.tail()}" for p in dead))

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail()}" for p in self.processes)

    # ------------------------------------------------------------------ helpers

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(  # noqa: S603 - our own binaries, fixed arguments
                [str(BIN_DIR / name), *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, start_new_session=True,
            )
        self.processes.append(Process(name, popen, log))

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.workdir / "certs" / "ca.crt"))

    def _wait(self, url: str, name: str, timeout: float, tls: bool = True) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self.check_alive()
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"} if tls else {})
            try:
                with urllib.request.urlopen(  # noqa: S310 - loopback
                    request, timeout=5, context=self.ssl_context() if tls else None
                ) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise RuntimeError(f"{name} not ready after {timeout:.0f}s ({last}):\n{self.logs()}")


def impersonated_patch(control_plane: ControlPlane, path: str, body: dict,
                       impersonation: dict[str, str]) -> tuple[int, str]:
    """A merge patch through the admin credential as the identity the ``Impersonate-*`` headers name: the API
    server's authorizer and admission answer as for that identity's own token. (status, error text)."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/merge-patch+json",
               "Accept": "application/json", **impersonation}
    request = urllib.request.Request(f"{control_plane.server}{path}", method="PATCH",
                                     data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=control_plane.ssl_context()) as response:  # noqa: S310
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: dict | str) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status
        self.body = body


class Rest:
    """A minimal JSON client for the test's own reads and writes (independent of the product's adapter)."""

    def __init__(self, control_plane: ControlPlane) -> None:
        self.server = control_plane.server
        self.context = control_plane.ssl_context()

    def request(self, method: str, path: str, body: object | None = None,
                content_type: str = "application/json") -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path, data=data, method=method,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:  # noqa: S310
                raw = response.read()
                return response.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed: dict | str = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            return exc.code, parsed if isinstance(parsed, dict) else {"message": parsed}

    def call(self, method: str, path: str, body: object | None = None,
             content_type: str = "application/json") -> dict:
        status, answer = self.request(method, path, body, content_type)
        if status >= 300:
            raise ApiError(method, path, status, answer)
        return answer

    def get(self, path: str) -> dict:
        return self.call("GET", path)

    def create(self, path: str, body: dict) -> dict:
        return self.call("POST", path, body)

    def merge_patch(self, path: str, body: dict) -> dict:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def items(self, path: str) -> list[dict]:
        return list(self.get(path).get("items") or [])
