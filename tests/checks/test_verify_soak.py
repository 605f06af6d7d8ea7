"""`gpu-rollout verify` over a week of soak, the way the soak schedule runs it: the whole window from the canary's
soak start to now at scrape resolution, Prometheus reached through the API server's service proxy as the stack's
``validation.prometheus`` names it.

One real Prometheus (Debian's 2.42, tests/prometheus) holds two weeks of backfilled history, backfilled once for
the module: a troubled week that ended ten days ago (a fatal Xid 79 overwritten by an Xid 43 ten minutes later on
one node; a latency regression in hour 30 that recovered; a restart storm on day 3) and a clean week up to now.
Each canary is the AKS example canary (tests/checks/verify_world.py), soaked 168 hours.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from checks import kube as kube_module
from checks.catalogue import CATALOGUE
from checks.prometheus import Prometheus
from checks.results import CheckResult
from checks.verify_read import gather
from rollout.cli import app
from engine_contracts import attestation
from tests.checks.verify_world import (HOUR, NEW, PROMETHEUS_SERVICE, ProxyKube, Soak, World, build, git_project,
                                       history)
from tests.conftest import EXAMPLE_KEY_FILE
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, binary, start
from tests.workload.openai_server import Behaviour, OpenAIServer

pytestmark = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)

WEEK = 168 * 60 + 3  # minutes the canary has soaked: a week (and 3 minutes, too short to be a bucket of its own)
DAY = 24 * HOUR
SERVICE = f"{PROMETHEUS_SERVICE[0]}/{PROMETHEUS_SERVICE[1]}"


@dataclass
class Soaked:
    clean: World
    troubled: World
    url: str
    xid_node: str
    xid_at: float
    storm_pod: str


def _on_tick(world: World, at: float, step: float) -> float:
    """The first time at or after ``at`` that history() samples every ``step`` seconds (its ticks start a day and
    more before the first canary node's upgrade)."""
    base = min(world.now - HOUR, min(world.finished.values()) - 28 * HOUR)
    return base + -(-(at - base) // step) * step


def _troubled(world: World) -> tuple[Soak, str, float, str]:
    """Hour 30 slower, then recovered; a 79 on one node's GPU ten minutes before a 43 overwrites it (two days in);
    twelve restarts of one model pod within an hour on day 3, the last three OOM-killed."""
    start = world.soak_start
    node, pod = world.canary_nodes[1], world.canary_pods[0]
    xid_at = _on_tick(world, start + 40 * HOUR + 125, 60)  # DCGM is scraped every minute
    first_restart = _on_tick(world, start + 50 * HOUR + 300, 300) + 10  # kube-state-metrics every 5 minutes
    storm = [(pod, first_restart + 240 * i, i >= 9) for i in range(12)]
    soak = Soak(slower=lambda at: start + 29 * HOUR < at <= start + 30 * HOUR,
                xids=[(node, xid_at, 79), (node, xid_at + 600, 43)], restarts=storm, kube_state_metrics=True,
                err_code=False)
    return soak, node, xid_at, pod


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soaked]:
    """Both canaries, their fake clusters serving, and the one Prometheus holding both weeks."""
    directory = tmp_path_factory.mktemp("soak")
    for name in ("clean", "troubled"):
        (directory / name).mkdir()
    now = float(int(time.time()))
    with ProxyKube() as clean_fake, ProxyKube() as troubled_fake:
        clean = build(clean_fake, directory / "clean", now, soak_minutes=WEEK,
                      validation={"prometheus": SERVICE, "bucketMinutes": 60})
        troubled = build(troubled_fake, directory / "troubled", now - 10 * DAY, soak_minutes=WEEK)
        soak, node, xid_at, pod = _troubled(troubled)
        both = history(clean, soak=Soak(kube_state_metrics=True, err_code=False), dcgm_coarse=60).merge(
            history(troubled, soak=soak, dcgm_coarse=60))
        with start(both, directory / "prometheus") as url:
            clean_fake.services[PROMETHEUS_SERVICE] = url
            yield Soaked(clean, troubled, url, node, xid_at, pod)


@pytest.fixture(scope="module")
def troubled_results(soaked: Soaked, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[CheckResult]]:
    """verify's read and checks of the troubled canary, as it stood at the end of its week."""
    world = soaked.troubled
    kube = kube_module.connect(str(world.fake.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")),
                               settings=FAST)
    facts = gather(kube, world.spec, Prometheus(soaked.url), now=world.now,
                   ask=lambda pod, port, path, body: {"data": [{"id": "llm-chat"}], "choices": [{"text": " hi"}]})
    out: dict[str, list[CheckResult]] = {}
    for result in CATALOGUE.run("verify", facts):
        out.setdefault(result.id, []).append(result)
    return out


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(at)))


def test_a_fatal_xid_overwritten_by_43_within_the_hour_is_seen_with_its_time_and_node(
        soaked: Soaked, troubled_results: dict[str, list[CheckResult]]) -> None:
    by_node = {r.subject: r for r in troubled_results["no-new-xid"]}
    found = by_node[soaked.xid_node]
    assert found.status.value == "fail", found.message
    # The sample the gauge held 79 at, though it read 43 again ten minutes later, long before any hourly look.
    assert found.message.startswith(f"Xid 79 since the upgrade finished ({_stamp(soaked.troubled.finished[soaked.xid_node])})")
    assert f"Xid 79 on GPU 0 of {soaked.xid_node} at {_stamp(soaked.xid_at)}" in found.message
    assert {x["xid"]: x["expected"] for x in found.evidence["xids"]} == {43: True, 79: False}
    assert found.evidence["source"] == "DCGM_FI_DEV_XID_ERRORS"
    others = {r.status.value for subject, r in by_node.items() if subject != soaked.xid_node}
    assert others == {"pass"}


def test_a_latency_regression_in_hour_30_that_recovered_fails_naming_the_bucket(
        soaked: Soaked, troubled_results: dict[str, list[CheckResult]]) -> None:
    (found,) = troubled_results["latency-throughput"]
    assert found.status.value == "fail", found.message
    start = soaked.troubled.soak_start
    hour_30 = f"hour 30 ({_stamp(start + 29 * HOUR)} to {_stamp(start + 30 * HOUR)})"
    assert found.message.startswith(f"1 of 168 judged bucket(s) out of tolerance: {hour_30}: p95 latency 2.25s vs "
                                    "1.75s on old-driver pods (more than 20% higher)"), found.message
    assert found.evidence["buckets"]["count"] == 168 and found.evidence["buckets"]["tooFewRequests"] == []
    assert found.evidence["baseline"]["kind"] == "old-driver pods"
    # Over the whole week the one slow hour is lost in the average: only the buckets catch it.
    assert found.evidence["whole"]["new"]["p95LatencySeconds"] == pytest.approx(1.75, rel=0.02)


def test_a_restart_storm_on_day_3_fails_naming_pod_and_hour(
        soaked: Soaked, troubled_results: dict[str, list[CheckResult]]) -> None:
    (found,) = troubled_results["model-restarts"]
    assert found.status.value == "fail", found.message
    start = soaked.troubled.soak_start
    hour_51 = f"hour 51 ({_stamp(start + 50 * HOUR)} to {_stamp(start + 51 * HOUR)})"
    assert found.message.startswith(f"12 container restart(s) on upgraded nodes during the soak, OOM kills among them "
                                    f"(kube-state-metrics): {hour_51}: 12 restart(s) of {soaked.storm_pod}/server "
                                    f"on {soaked.troubled.pod_node[soaked.storm_pod]} (OOM-killed)"), found.message
    assert [(r["bucket"]["bucket"], r["restarts"], r["oomKilled"]) for r in found.evidence["restarts"]] == [
        (51, 12, True)]


def test_the_troubled_week_fails_nothing_else(troubled_results: dict[str, list[CheckResult]]) -> None:
    for check_id in ("driver-version", "gpu-count", "operator-validator", "dcgm-metrics", "validation-job"):
        assert {r.status.value for r in troubled_results[check_id]} == {"pass"}, check_id


@pytest.fixture(scope="module")
def clean_run(soaked: Soaked, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    """`gpu-rollout verify --stack-file ... --json` of the clean canary: no --prometheus, the stack names the
    Service; its model pods answer through the pod proxy."""
    world = soaked.clean
    project = tmp_path_factory.mktemp("project")
    git_project(project)
    servers = []
    for pod in world.canary_pods:
        server = OpenAIServer(Behaviour(model="llm-chat")).start()
        world.fake.backends[("inference", pod)] = server.url
        servers.append(server)
    try:
        kubeconfig = world.fake.write_kubeconfig(project.parent / "kubeconfig")
        result = CliRunner().invoke(app, ["verify", "--stack-file", str(world.stack_file), "--project-dir",
                                          str(project), "--kubeconfig", str(kubeconfig), "--json",
                                          "--signing-key", str(EXAMPLE_KEY_FILE)])
    finally:
        for server in servers:
            server.stop()
    return result.exit_code, json.loads(result.stdout), project


def test_a_clean_week_passes_and_is_attested(soaked: Soaked, clean_run: tuple[int, dict[str, Any], Path]) -> None:
    code, doc, project = clean_run
    assert code == 0, [c for c in doc["checks"] if c["status"] != "pass"]
    sealed = attestation.load(attestation.path_for(project / attestation.ATTESTATION_DIR, "canary", NEW))
    assert sealed.soak_hours >= 168
    latency = next(c for c in doc["checks"] if c["id"] == "latency-throughput")
    assert latency["message"].startswith("168 bucket(s) within tolerance over 168.")
    restarts = next(c for c in doc["checks"] if c["id"] == "model-restarts")
    assert restarts["message"].startswith("no container restart of its 2 pod(s) on upgraded nodes during the soak "
                                          "(kube-state-metrics)")
    xids = [c for c in doc["checks"] if c["id"] == "no-new-xid"]
    assert {c["status"] for c in xids} == {"pass"} and all("every sample" in c["message"] for c in xids)


def test_prometheus_is_reached_through_the_service_proxy_by_post(
        soaked: Soaked, clean_run: tuple[int, dict[str, Any], Path]) -> None:
    proxied = soaked.clean.fake.service_proxied
    assert proxied and {(method, namespace, target) for method, namespace, target, _, _ in proxied} == {
        ("POST", "monitoring", "prometheus-k8s:9090")}
    assert {path for _, _, _, path, _ in proxied} == {"api/v1/query", "api/v1/query_range"}
    assert all("query" in form for *_, form in proxied)
