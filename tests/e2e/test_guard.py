"""`gpu-rollout guard` on the real API server (issue 35, point 6): the guard runs as a process, follows the cluster
through the watch API, and pauses the canary stack within 60 s of a kwok node going ``upgrade-failed``, recording
why (an Event on the node, the fleet Lease's halt record and its status); of two replicas one leads, and the other
takes over once the leader stopped (killed outright, so its Lease expires rather than being handed back).

It runs as the stack declares its cluster (cluster.existing's kubeconfig: the admin credential of the test cluster);
and, on the prod stack whose `pulumi up` declared the guard's ServiceAccount, RBAC and admission policy
(tests/e2e/test_guard_rbac.py proves them by impersonation), with that ServiceAccount's own token."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import ControlPlane, Rest, kubeconfig_document
from tests.e2e.pulumi_cli import CHECKOUT
from tests.e2e.test_live_verbs import SKIP, live, operator_moves, pool_nodes  # noqa: F401  (live: a fixture)

NAMESPACE = "gpu-rollout-guard"
FLEET_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpu-driver-upgrade-fleet"
GUARD_LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/gpu-rollout-guard"
STACK, POOL = "existing-canary", "l40s-canary"


class Replica:
    """One `gpu-rollout guard` process; its port read from its first lines on stderr."""

    def __init__(self, project: Path, name: str, log: Path, stack: str = STACK, *extra: str) -> None:
        self.name, self.stack, self.log = name, stack, log.open("w+")
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "rollout", "guard", "--stack", stack, "--project-dir", str(project),
             "--listen", "127.0.0.1:0", "--lease-namespace", NAMESPACE, "--lease-name", "gpu-rollout-guard",
             *extra],
            cwd=CHECKOUT, stdout=subprocess.DEVNULL, stderr=self.log, text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(project), "KUBECONFIG": str(project / "no-such-kubeconfig"),
                 "POD_NAME": name})
        self.port = int(str(wait_for(f"{name} serving", self._port, timeout=120)))

    def _port(self) -> int | None:
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} ended ({self.process.returncode}): {self.text()}")
        for line in self.text().splitlines():
            if "/metrics and /healthz on" in line:
                return int(line.rsplit(":", 1)[1])
        return None

    def text(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:  # noqa: S310
            return answer.read().decode()

    def leads(self) -> bool:
        return f'gpu_rollout_guard_leader{{stack="{self.stack}"}} 1' in self.metrics()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(60)
        self.log.close()


@pytest.fixture
def guard_world(live: Rest, project: Path, tmp_path: Path) -> Iterator[tuple[Rest, list[Replica]]]:  # noqa: F811
    """The guard's namespace; the replicas a test starts are stopped, and the Leases they wrote removed."""
    status, _ = live.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": NAMESPACE}})
    assert status in (201, 409)
    had_fleet_lease = live.request("GET", FLEET_LEASE)[0] == 200
    replicas: list[Replica] = []
    yield live, replicas
    for replica in replicas:
        replica.stop(signal.SIGKILL if replica.process.poll() is None else signal.SIGTERM)
    live.request("DELETE", GUARD_LEASE)
    if not had_fleet_lease:
        live.request("DELETE", FLEET_LEASE)


def start(project: Path, tmp_path: Path, replicas: list[Replica], name: str, stack: str = STACK,
          *extra: str) -> Replica:
    replica = Replica(project, name, tmp_path / f"{name}.log", stack, *extra)
    replicas.append(replica)
    return replica


def test_a_node_going_upgrade_failed_is_paused_within_a_minute(guard_world: tuple[Rest, list[Replica]],
                                                               project: Path, tmp_path: Path) -> None:
    rest, replicas = guard_world
    guard = start(project, tmp_path, replicas, "guard-0")
    wait_for("the guard leading", guard.leads, timeout=60)
    first, *others = sorted(pool_nodes(POOL))
    for state in ("upgrade-required", "cordon-required", "upgrade-failed"):
        operator_moves(rest, first, state)

    def paused() -> bool:
        nodes = {n["metadata"]["name"]: n["metadata"] for n in rest.items("/api/v1/nodes")}
        return all((nodes[name].get("labels") or {}).get(SKIP) == "true"
                   and (nodes[name].get("annotations") or {}).get("gpu-driver-upgrade.io/paused-by") == STACK
                   for name in (first, *others))

    wait_for("the guard's pause of the canary's nodes", paused, timeout=60)
    events = [e for e in rest.items("/api/v1/namespaces/default/events") if e.get("reason") == "GPURolloutPaused"]
    assert any(e["involvedObject"]["name"] == first and "upgrade-failed" in e["message"] for e in events), events
    annotations = rest.get(FLEET_LEASE)["metadata"]["annotations"]
    assert f"guard of stack {STACK}: node {first}" in annotations["gpu-driver-upgrade.io/fleet-halted"]
    assert '"upgrade-failed"' in annotations["gpu-driver-upgrade.io/guard-status"]
    assert 'gpu_rollout_guard_triggers_acted_total{stack="existing-canary",kind="upgrade-failed"} 1' \
        in guard.metrics()


def test_two_replicas_elect_one_leader_and_the_other_takes_over(guard_world: tuple[Rest, list[Replica]],
                                                                project: Path, tmp_path: Path) -> None:
    rest, replicas = guard_world
    first = start(project, tmp_path, replicas, "guard-a")
    wait_for("guard-a leading", first.leads, timeout=60)
    second = start(project, tmp_path, replicas, "guard-b")
    wait_for("guard-b watching", lambda: f'gpu_rollout_guard_up{{stack="{STACK}"}} 1' in second.metrics(),
             timeout=60)
    assert first.leads() and not second.leads()
    assert rest.get(GUARD_LEASE)["spec"]["holderIdentity"] == "guard-a"
    first.stop(signal.SIGKILL)  # no hand-back: the Lease has to expire
    wait_for("guard-b leading once guard-a's Lease expired", second.leads, timeout=90)
    assert rest.get(GUARD_LEASE)["spec"]["holderIdentity"] == "guard-b"
    assert "leading: Lease" in second.text()


def test_the_guard_pauses_the_prod_stack_as_its_service_account(
        prod_up, guard_world: tuple[Rest, list[Replica]], control_plane: ControlPlane, project: Path,
        tmp_path: Path) -> None:
    """Its ServiceAccount's token (a TokenRequest, as the pod's projected token), through the RBAC and the
    admission policy the prod stack's `up` declared: enough to watch, lead, pause and record, nothing more."""
    rest, replicas = guard_world
    token = rest.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/gpu-rollout-guard/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    document = kubeconfig_document(control_plane.server, control_plane.workdir / "certs" / "ca.crt", "guard-sa")
    document["users"] = [{"name": "e2e-admin", "user": {"token": token}}]
    kubeconfig = tmp_path / "guard-sa.kubeconfig"
    kubeconfig.write_text(json.dumps(document))
    guard = start(project, tmp_path, replicas, "guard-sa", "existing-prod", "--kubeconfig", str(kubeconfig),
                  "--context", "guard-sa")
    wait_for("the guard leading as its ServiceAccount", guard.leads, timeout=60)
    first, *others = sorted(pool_nodes("l40s-serving"))
    for state in ("upgrade-required", "cordon-required", "upgrade-failed"):
        operator_moves(rest, first, state)

    def paused() -> bool:
        nodes = {n["metadata"]["name"]: n["metadata"] for n in rest.items("/api/v1/nodes")}
        return all((nodes[name].get("annotations") or {}).get("gpu-driver-upgrade.io/paused-by") == "existing-prod"
                   and (nodes[name].get("labels") or {}).get(SKIP) == "true" for name in (first, *others))

    wait_for("the prod pool paused by the guard's ServiceAccount", paused, timeout=60)
    events = [e for e in rest.items("/api/v1/namespaces/default/events") if e.get("reason") == "GPURolloutPaused"
              and e["involvedObject"]["name"] == first]
    assert events and events[0]["reportingInstance"] == "guard-sa"
    assert "guard of stack existing-prod" in \
        rest.get(FLEET_LEASE)["metadata"]["annotations"]["gpu-driver-upgrade.io/fleet-halted"]
    assert "forbidden" not in guard.text()  # nothing it does is refused
