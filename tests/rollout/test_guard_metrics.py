"""The guard's /metrics and /healthz (rollout/guard.py, checks/guard_metrics.py), and the board in docs/grafana: a real
Prometheus on loopback scrapes a running guard (against the fake API) every second, and every query of every panel
of docs/grafana/gpu-rollout-guard.json must return series from it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from checks import kube as k
from checks.guard import Guard, GuardSettings
from checks.prometheus import Prometheus
from fleetspec.model import FleetSpec
from rollout.guard import address, serve
from refusals.errors import FlagError
from tests.checks.test_informer import wait_for
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import move_node
from tests.fakekube.server import FakeKube
from tests.prometheus.server import MISSING, History, binary, start
from workload import result as job_result

BOARD = PROJECT_DIR / "docs" / "grafana" / "gpu-rollout-guard.json"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def running_guard(fake: FakeKube, kube: k.Kube, spec: FleetSpec) -> Guard:
    fake.bookmark_interval = 0.2
    guard = Guard(kube, spec, "prod", "guard-0", lease_namespace="gpu-rollout-guard",
                  settings=GuardSettings(tick=0.5, settle=0.05, renew_every=1.0))
    return guard


def test_healthz_answers_503_until_the_guard_watches_and_holds_its_lease(prod: FakeKube, kube: k.Kube,
                                                                         prod_spec: FleetSpec) -> None:
    guard = running_guard(prod, kube, prod_spec)
    server = serve(guard, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert get(f"{base}/healthz")[0] == 503
        guard.start()
        wait_for(lambda: get(f"{base}/healthz")[0] == 200, "healthy once watching and leading")
        status, text = get(f"{base}/metrics")
        assert status == 200 and 'gpu_rollout_guard_leader{stack="prod"} 1' in text
        assert get(f"{base}/nothing")[0] == 404
    finally:
        guard.stop()
        server.shutdown()
        server.server_close()
        prod.drop_watches()


def test_listen_is_refused_naming_the_flag() -> None:
    with pytest.raises(FlagError, match="is not HOST:PORT") as refused:
        address("localhost")
    assert refused.value.flag == "--listen"
    assert address(":9400") == ("0.0.0.0", 9400)


@pytest.mark.skipif(binary("prometheus") is None, reason=MISSING)
def test_every_panel_of_the_board_returns_series_from_a_prometheus_scraping_the_guard(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec, tmp_path: Path) -> None:
    nodes = sorted(n["metadata"]["name"] for n in prod.objects("nodes") if "gput4" in n["metadata"]["name"])
    target = prod_spec.driver.version
    prod.update("nodes", nodes[1], {"metadata": {
        "labels": {job_result.LABEL_VALIDATED_DRIVER: target, job_result.LABEL_OUTCOME: job_result.PASSED},
        "annotations": {job_result.result_annotation(target): json.dumps({"finishedAt": "2026-12-01T10:00:00Z"})}}})
    guard = running_guard(prod, kube, prod_spec)
    server = serve(guard, "127.0.0.1", 0)
    try:
        guard.start()
        move_node(prod, nodes[0], "upgrade-failed")  # a trigger the leader acts on: every family has samples
        wait_for(lambda: guard.counters.pauses >= 1, "the guard paused on upgrade-failed")
        with start(History(), tmp_path, scrape=(f"127.0.0.1:{server.server_address[1]}",)) as url:
            prometheus = Prometheus(url)
            # Two scrapes at least, so that increase() over the acted-on counter has its two samples.
            wait_for(lambda: any(s.value >= 2 for s in prometheus.query(
                "count_over_time(gpu_rollout_guard_pauses_total[1m])")), "two scrapes of the guard", limit=60)
            board = json.loads(BOARD.read_text(encoding="utf-8"))
            empty = [(panel["title"], t["expr"]) for panel in board["panels"] for t in panel["targets"]
                     if not prometheus.query(t["expr"])]
            assert not empty, f"panels whose query returns no series: {empty}"
            acted = prometheus.query('gpu_rollout_guard_triggers_acted_total{kind="upgrade-failed"}')
            assert [s.value for s in acted] == [1.0]
    finally:
        guard.stop()
        server.shutdown()
        server.server_close()
        prod.drop_watches()


def test_the_board_is_a_dashboard_whose_panels_each_query_the_guard() -> None:
    board = json.loads(BOARD.read_text(encoding="utf-8"))
    assert board["panels"] and all(panel["targets"] for panel in board["panels"])
    assert all("gpu_rollout_guard_" in t["expr"] for panel in board["panels"] for t in panel["targets"])
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])


def test_the_verb_runs_as_a_process_from_a_project_of_two_files_and_stops_on_sigterm(
        prod: FakeKube, kubeconfig: Path, tmp_path: Path) -> None:
    """As the Deployment runs it: --project-dir holds Pulumi.yaml and the stack's file only (its ConfigMap)."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.prod.yaml"):
        shutil.copy(PROJECT_DIR / name, project / name)
    process = subprocess.Popen(
        [sys.executable, "-m", "rollout", "guard", "--stack", "prod", "--project-dir", str(project),
         "--kubeconfig", str(kubeconfig), "--listen", "127.0.0.1:0", "--lease-namespace", "gpu-rollout-guard",
         "--lease-name", "gpu-rollout-guard"],
        cwd=PROJECT_DIR, stderr=subprocess.PIPE, text=True, env={**os.environ, "POD_NAME": "guard-abc"})
    try:
        assert process.stderr is not None
        line = ""
        while "/metrics and /healthz on" not in line:
            line = process.stderr.readline()
            assert line, "the guard ended before it served"
        port = line.rsplit(":", 1)[1].strip()
        assert "as guard-abc (leading)" in line
        wait_for(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, "the process is healthy")
        lease = prod.obj("leases", "gpu-rollout-guard", "gpu-rollout-guard")
        assert lease["spec"]["holderIdentity"] == "guard-abc"
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        # Stopping hands the Lease back: the other replica need not wait for it to expire.
        assert not prod.obj("leases", "gpu-rollout-guard", "gpu-rollout-guard")["spec"].get("holderIdentity")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_a_bad_listen_address_exits_2_naming_the_flag(prod: FakeKube, kubeconfig: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "rollout", "guard", "--stack", "prod", "--kubeconfig", str(kubeconfig),
                           "--listen", "nowhere"], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--listen: 'nowhere' is not HOST:PORT" in done.stderr
    assert prod.writes == 0


def test_the_validation_deadline_is_the_stacks_unless_the_flag_says(prod_spec: FleetSpec) -> None:
    from rollout.guard import declared_deadline_minutes

    assert declared_deadline_minutes(prod_spec) == 30.0
    later = prod_spec.model_copy(update={"guard": prod_spec.guard.model_copy(update={"validationDeadlineMinutes": 45})})
    assert declared_deadline_minutes(later) == 45.0
