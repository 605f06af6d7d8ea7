"""`gpu-rollout verify` against the fake API (with the pod proxy) and a real Prometheus on loopback.

A clean canary passes every check and writes its attestation; each failure mode of runbook section 5 gives
its check's status (fail, or inconclusive where the evidence is missing), exit 1 with the reason on stderr,
and no attestation. The cluster side is tests/checks/verify_world.py; Prometheus is Debian's 2.42 with an
hour of backfilled history (tests/prometheus/server.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from checks.validation import EXPECTED_XIDS
from rollout import context
from rollout import verify as verb
from rollout.cli import app
from refusals.exits import Exit
from engine_contracts import attestation
from gpu_knowledge import labels
from tests.conftest import EXAMPLE_KEY_FILE, example_signing_key
from tests.checks.verify_world import NEW, OLD, ProxyKube, World, build, git_project, history, write_result
from tests.fakekube.fixtures import driver_labels, set_pod_ready
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, History, binary, start
from tests.workload.openai_server import Behaviour, OpenAIServer
from workload import result as job_result
from tests.rollout.json_contract import document_of

IDS = ["driver-version", "gpu-count", "operator-validator", "model-answers", "latency-throughput", "model-restarts",
       "no-new-xid", "dcgm-metrics", "validation-job"]
PROMETHEUS_CHECKS = {"latency-throughput", "no-new-xid", "dcgm-metrics"}

needs_prometheus = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with ProxyKube() as fake:
        built = build(fake, tmp_path)
        servers = []
        for pod in built.canary_pods:
            server = OpenAIServer(Behaviour(model="llm-chat")).start()
            fake.backends[("inference", pod)] = server.url
            servers.append(server)
        built.extra["servers"] = servers
        try:
            yield built
        finally:
            for server in servers:
                server.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    git_project(directory)
    return directory


def run(world: World, project: Path, prometheus: str | None, capsys: pytest.CaptureFixture[str]
        ) -> tuple[Exit, dict[str, Any], str]:
    """verify as the CLI runs it (context.open_live, rollout.verify.execute), with the tests' short retries."""
    kubeconfig = world.fake.write_kubeconfig(project.parent / "kubeconfig")
    live = context.open_live(None, world.stack_file, project, str(kubeconfig), None, settings=FAST)
    code = verb.execute(live.stack.name, live.spec, live.kube, project_dir=project, prometheus_url=prometheus,
                        as_json=True, key=example_signing_key())
    out = capsys.readouterr()
    return code, document_of("verify", out.out), out.err


def statuses(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(c["id"], c["subject"]): c["status"] for c in doc["checks"]}


def by_check(doc: dict[str, Any], check_id: str) -> list[dict[str, Any]]:
    return [c for c in doc["checks"] if c["id"] == check_id]


def assert_refused(code: Exit, doc: dict[str, Any], project: Path) -> None:
    assert code == Exit.FAILED and doc["passed"] is False and doc["attestation"] is None
    assert not (project / attestation.ATTESTATION_DIR).exists()


# ---------------------------------------------------------------- the clean canary


@needs_prometheus
def test_a_clean_canary_passes_every_check_and_writes_its_attestation(world: World, project: Path,
                                                                      tmp_path: Path) -> None:
    kubeconfig = world.fake.write_kubeconfig(tmp_path / "kubeconfig")
    with start(history(world), tmp_path / "prometheus") as url:
        result = CliRunner().invoke(app, ["verify", "--stack-file", str(world.stack_file), "--project-dir",
                                          str(project), "--kubeconfig", str(kubeconfig), "--prometheus", url, "--json",
                                          "--signing-key", str(EXAMPLE_KEY_FILE)])
    assert result.exit_code == 0, result.output
    doc = document_of("verify", result.stdout)
    assert [c["id"] for c in doc["checks"] if c["status"] != "pass"] == []
    assert list(dict.fromkeys(c["id"] for c in doc["checks"])) == IDS  # the runbook's order
    assert {c["subject"] for c in by_check(doc, "driver-version")} == set(world.canary_nodes)
    assert {c["subject"] for c in by_check(doc, "model-answers")} == {f"inference/{p}" for p in world.canary_pods}
    latency = by_check(doc, "latency-throughput")[0]["evidence"]
    assert latency["newPods"] == world.canary_pods and latency["oldPods"] == world.old_pods
    new, old = latency["whole"]["new"], latency["whole"]["baseline"]  # over the whole soak
    assert new["p95LatencySeconds"] == pytest.approx(1.75, rel=0.02)
    assert old["p95LatencySeconds"] == pytest.approx(1.75, rel=0.02)
    assert new["tokensPerSecond"] == pytest.approx(100.0, rel=0.02)  # 100 tokens per 1 s request
    assert latency["baseline"]["kind"] == "old-driver pods" and latency["gpusPerPod"] == 1
    xids = by_check(doc, "no-new-xid")
    # The 43 five minutes after each node's upgrade is in its upgrade window; every GPU-bucket had DCGM samples.
    assert all("ignored, expected in its upgrade window (until " in c["message"] and "): 43" in c["message"]
               and "100% of the soak's GPU-buckets judged" in c["message"] for c in xids)
    assert all(c["evidence"]["coverage"]["judgedFraction"] == 1.0 for c in by_check(doc, "dcgm-metrics"))
    assert all(c["evidence"]["seriesByDriver"] == {NEW: 1} for c in by_check(doc, "dcgm-metrics"))

    written = attestation.path_for(project / attestation.ATTESTATION_DIR, "canary", NEW)
    assert doc["attestation"] == str(written)
    sealed = attestation.load(written)
    assert (sealed.driver, sealed.stack, sealed.stage, sealed.cluster, sealed.operatorChart) == (
        NEW, "organization/gpu-driver-upgrade/canary", "canary", "inference-weu-1", "v26.7.0")
    # The cluster's identity: kube-system's uid as verify read it, the AKS resource the stack declares.
    (namespace,) = world.fake.store["namespaces"].values()
    assert sealed.identity.kubeSystemUid == namespace["metadata"]["uid"]
    assert sealed.identity.cloudId == ("/resourceGroups/rg-inference-weu-1/providers/Microsoft.ContainerService/"
                                       "managedClusters/aks-inference-weu-1")
    assert {p.kernelModuleType for p in sealed.pools} == {"open"}  # kernelModuleType auto, R580: open modules
    assert [(p.name, p.gpuProduct, p.architecture) for p in sealed.pools] == [
        ("canarya100", "NVIDIA-A100-80GB-PCIe", "ampere"), ("canaryt4", "Tesla-T4", "turing"),
        ("gpucanary", "NVIDIA-H100-NVL", "hopper")]  # one canary pool per architecture the prod stack runs
    # What each pool was, as the nodes and Prometheus showed it: only gpucanary runs a model, which served traffic.
    assert [(p.gpusPerNode, p.nvswitch, p.migConfig, p.servedTraffic) for p in sealed.pools] == [
        (1, False, "all-disabled", False), (1, False, "all-disabled", False), (1, False, "all-disabled", True)]
    assert sealed.pools[2].traffic == ("llm-chat-canary on 2 pod(s): at least 1000 requests served during the soak, "
                                       "answered verify's request")
    # 2 pods at 2 requests a second over the 40-minute soak, in its one bucket, judged.
    coverage = sealed.coverage or {}
    assert coverage["gpucanary"].requests == pytest.approx(2 * 2 * 40 * 60, rel=0.05)
    assert (coverage["gpucanary"].judgedFraction, coverage["gpucanary"].buckets) == (1.0, 1)
    assert coverage["canarya100"].requests == 0 and coverage["canarya100"].judgedFraction == 0.0
    assert sealed.pools[0].kernel and sealed.pools[0].osImage == "Ubuntu 22.04.5 LTS" and sealed.driverMode == "nvidiadriver"
    assert sealed.signature is not None and sealed.signature.keyId == attestation.EXAMPLE_KEY_ID
    assert [c.id for c in sealed.checks] == [c["id"] for c in doc["checks"]]
    assert sealed.soakStart.timestamp() == int(world.soak_start)  # the last canary node's upgrade-done
    assert -1 < sealed.soakEnd.timestamp() - world.now < 120  # soakEnd is kept in whole seconds
    head = (project / ".git" / "HEAD").read_text().split()[-1]
    assert sealed.gitCommit == (project / ".git" / head).read_text().strip()
    assert world.fake.writes == 0  # verify only reads the cluster
    assert {(m, port, path) for m, _, _, port, path in world.fake.proxied} == {
        ("GET", 8000, "v1/models"), ("POST", 8000, "v1/completions")}


# ---------------------------------------------------------------- each failure mode: its status, exit 1, no attestation


@needs_prometheus
def test_a_node_on_the_old_driver_fails_driver_version(world: World, project: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[1]
    world.fake.update("nodes", node, {"metadata": {"labels": driver_labels(OLD)}})  # GFD: the old driver came back
    with start(history(world, lost_driver_on=node), tmp_path / "prometheus") as url:
        code, doc, err = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    assert statuses(doc)[("driver-version", node)] == "fail"
    assert f"GFD reports {OLD}" in by_check(doc, "driver-version")[1]["message"]
    assert statuses(doc)[("dcgm-metrics", node)] == "fail"  # DCGM says the old driver too
    assert {s for (i, n), s in statuses(doc).items() if i == "driver-version" and n != node} == {"pass"}
    assert f"fail: driver-version {node}: target {NEW}: GFD reports {OLD}" in err


@needs_prometheus
def test_a_lost_gpu_fails_gpu_count(world: World, project: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[0]
    world.fake.update("nodes", node, {"status": {"allocatable": {labels.GPU_RESOURCE: "0"}}})
    with start(history(world), tmp_path / "prometheus") as url:
        code, doc, _ = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    found = next(c for c in by_check(doc, "gpu-count") if c["subject"] == node)
    assert found["status"] == "fail"
    assert f"allocatable nvidia.com/gpu is 0, pool {world.pool_of[node].name} declares 1" in found["message"]
    assert [c["status"] for c in doc["checks"] if c["status"] != "pass"] == ["fail"]


@needs_prometheus
def test_a_validator_not_ready_fails_operator_validator(world: World, project: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[2]
    validator = next(p["metadata"]["name"] for p in world.fake.objects("pods")
                     if p["spec"]["nodeName"] == node and p["metadata"]["labels"].get("app") == "nvidia-operator-validator")
    set_pod_ready(world.fake, "gpu-operator", validator, False)
    with start(history(world), tmp_path / "prometheus") as url:
        code, doc, _ = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    assert statuses(doc)[("operator-validator", node)] == "fail"
    assert f"validator not Ready: {validator}" in next(c["message"] for c in by_check(doc, "operator-validator")
                                                       if c["subject"] == node)


@needs_prometheus
def test_a_model_pod_that_does_not_answer_fails_model_answers(world: World, project: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    world.extra["servers"][0].stop()  # the server in the first canary pod is gone; the pod still says Ready
    with start(history(world), tmp_path / "prometheus") as url:
        code, doc, err = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    dead, alive = (f"inference/{p}" for p in world.canary_pods)
    assert statuses(doc)[("model-answers", dead)] == "fail" and statuses(doc)[("model-answers", alive)] == "pass"
    assert "connection refused" in next(c["message"] for c in by_check(doc, "model-answers") if c["subject"] == dead)
    assert f"fail: model-answers {dead}" in err


@needs_prometheus
def test_a_canary_slower_than_the_tolerance_fails_latency_throughput(world: World, project: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with start(history(world, slower=True), tmp_path / "prometheus") as url:
        code, doc, _ = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    (found,) = by_check(doc, "latency-throughput")
    assert found["status"] == "fail" and found["subject"] == "inference/llm-chat-canary"
    assert "p95 latency 2.25s vs 1.75s on old-driver pods (more than 20% higher)" in found["message"]
    assert "tokens/s 66.7 vs 100 on old-driver pods (more than 10% lower)" in found["message"]
    assert found["evidence"]["tolerance"] == {"p95Latency": 0.2, "tokensPerSecond": 0.1, "errorRate": 0.01}


@needs_prometheus
def test_empty_metrics_are_inconclusive_never_a_pass(world: World, project: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with start(History(), tmp_path / "prometheus") as url:  # a Prometheus that has no series at all
        code, doc, err = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    assert {c["id"] for c in doc["checks"] if c["status"] == "inconclusive"} == PROMETHEUS_CHECKS
    # Restarts known in no bucket (no kube-state-metrics): the soak is not judged, which fails.
    assert {c["id"] for c in doc["checks"] if c["status"] == "fail"} == {"model-restarts"}
    assert "kube-state-metrics (kube_pod_container_status_restarts_total) shows the model's pods in none of hour 1 (" \
        in by_check(doc, "model-restarts")[0]["message"]
    assert {c["id"] for c in doc["checks"] if c["status"] == "pass"} == set(IDS) - PROMETHEUS_CHECKS - {"model-restarts"}
    assert ("no data: p95LatencySeconds new: empty result for sum by (le) (increase("
            "vllm:e2e_request_latency_seconds_bucket") in by_check(doc, "latency-throughput")[0]["message"]
    assert "inconclusive: dcgm-metrics" in err and "no DCGM_FI_DEV_GPU_UTIL series for this node" in err


@needs_prometheus
def test_xid_79_after_the_upgrade_fails_no_new_xid(world: World, project: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[1]
    with start(history(world, xid_on=node, xid=79), tmp_path / "prometheus") as url:
        code, doc, _ = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    assert [(c["id"], c["subject"]) for c in doc["checks"] if c["status"] != "pass"] == [("no-new-xid", node)]
    found = next(c for c in by_check(doc, "no-new-xid") if c["subject"] == node)
    assert found["status"] == "fail" and found["message"].startswith("Xid 79 since the upgrade finished")
    assert {x["xid"]: x["expected"] for x in found["evidence"]["xids"]} == {43: True, 79: False}
    assert set(EXPECTED_XIDS) == {43, 45}


@needs_prometheus
def test_a_failed_validation_job_fails_validation_job(world: World, project: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[0]
    write_result(world.fake, world.spec, node, world.finished[node], failed_check="tokens-per-second")
    with start(history(world), tmp_path / "prometheus") as url:
        code, doc, _ = run(world, project, url, capsys)
    assert_refused(code, doc, project)
    found = next(c for c in by_check(doc, "validation-job") if c["subject"] == node)
    assert found["status"] == "fail" and found["message"] == "the job failed: tokens-per-second: 12.0 tokens/s, below 40"


def _result_on(world: World, on: str, **names: Any) -> None:
    """A passing result on node ``on`` under the target's annotation, naming what ``names`` says (node, cluster,
    targetDriver) and its driver-version check seeing ``reported``."""
    reported = names.pop("reported", NEW)
    assert world.spec.validation is not None
    checks = [job_result.Check(c, job_result.PASS, "ok", {"reported": reported, "target": NEW}
                               if c == "driver-version" else {}) for c in job_result.CHECKS]
    fields: dict[str, Any] = {
        "node": on, "pool": "gpucanary", "stage": "canary", "cluster": world.spec.cluster.name,
        "targetDriver": NEW, "image": world.spec.validation.image, "model": world.spec.validation.model,
        "program": "sha256:" + "ab" * 32, "startedAt": "2026-12-02T10:00:00Z", "finishedAt": "2026-12-02T10:05:00Z",
        "durationSeconds": 300.0, "checks": checks}
    fields.update(names)
    written = job_result.Result(**fields)
    world.fake.update("nodes", on, {"metadata": {"annotations": {
        job_result.result_annotation(NEW): written.dumps()}}}, manager="gpu-validation")


@pytest.mark.parametrize(("names", "reason"), [
    ({"node": "aks-gpucanary-12345678-vmss000009"}, "the result names node aks-gpucanary-12345678-vmss000009, not "
                                                    f"this node's validation on {NEW}"),
    ({"targetDriver": OLD}, f"the result names driver {OLD}"),
    ({"cluster": "another-cluster"}, "the result names cluster another-cluster"),
    ({"reported": OLD}, f"the result's driver-version check saw driver {OLD}, not {NEW}"),
])
def test_a_result_that_is_not_this_nodes_validation_on_the_target_fails(
        world: World, project: Path, capsys: pytest.CaptureFixture[str], names: dict[str, str], reason: str) -> None:
    """A passing result copied from another node, recorded on the old driver, or from another cluster."""
    node = world.canary_nodes[1]
    _result_on(world, node, **names)
    code, doc, _ = run(world, project, None, capsys)
    assert_refused(code, doc, project)
    found = next(c for c in by_check(doc, "validation-job") if c["subject"] == node)
    assert found["status"] == "fail" and found["message"].startswith(reason), found["message"]
    others = [c["status"] for c in by_check(doc, "validation-job") if c["subject"] != node]
    assert others and set(others) == {"pass"}


def test_a_node_held_by_a_failed_validation_fails_even_after_passing_again(
        world: World, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[0]
    write_result(world.fake, world.spec, node, world.finished[node], failed_check="no-xid")
    _, doc, _ = run(world, project, None, capsys)
    failed_run = next(c for c in by_check(doc, "validation-job") if c["subject"] == node)
    assert failed_run["message"].startswith("the job failed: no-xid")
    assert failed_run["evidence"]["hold"]["checks"] == ["no-xid"]
    # Validated again (the label removed), passed; the job never lifts the hold: the node is still out.
    write_result(world.fake, world.spec, node, world.finished[node])
    code, doc, _ = run(world, project, None, capsys)
    assert_refused(code, doc, project)
    found = next(c for c in by_check(doc, "validation-job") if c["subject"] == node)
    assert found["status"] == "fail"
    assert "but the node is still held by a failed validation (no-xid failed on driver" in found["message"]
    assert "`gpu-rollout release-node`" in found["message"]
    # Without any result left, the hold alone fails it (it is never merely inconclusive).
    world.fake.update("nodes", node, {"metadata": {"annotations": {job_result.result_annotation(NEW): None}}})
    _, doc, _ = run(world, project, None, capsys)
    found = next(c for c in by_check(doc, "validation-job") if c["subject"] == node)
    assert found["status"] == "fail" and found["message"].startswith("held by a failed validation")


def test_without_prometheus_the_metric_checks_are_inconclusive(world: World, project: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = run(world, project, None, capsys)
    assert_refused(code, doc, project)
    # Restarts too: the pods' status shows no restart, but not in which bucket of the soak (none is judged).
    assert {c["id"] for c in doc["checks"] if c["status"] == "inconclusive"} == PROMETHEUS_CHECKS | {"model-restarts"}
    assert "no Prometheus: pass --prometheus URL" in err


def test_a_missing_job_result_is_inconclusive(world: World, project: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[2]
    world.fake.update("nodes", node, {"metadata": {"annotations": {f"validation.gpu-driver-upgrade.io/{NEW}": None}}})
    _, doc, _ = run(world, project, None, capsys)
    assert statuses(doc)[("validation-job", node)] == "inconclusive"


def test_a_bad_prometheus_url_exits_2(world: World, project: Path, tmp_path: Path) -> None:
    kubeconfig = world.fake.write_kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(app, ["verify", "--stack-file", str(world.stack_file), "--project-dir", str(project),
                                      "--kubeconfig", str(kubeconfig), "--prometheus", "prometheus:9090"])
    assert result.exit_code == 2 and "--prometheus" in result.output
    assert world.fake.counts["list"] == 0


@needs_prometheus
def test_a_newer_attestation_is_never_replaced(world: World, project: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """verify refuses to overwrite an attestation of the same driver whose soak ended later: exit 1, file intact."""
    later = datetime.fromtimestamp(world.now + 7200, UTC)
    newer = attestation.seal(
        stack="organization/gpu-driver-upgrade/canary", stage="canary", cluster="inference-weu-1",
        identity=attestation.ClusterIdentity(kubeSystemUid="uid"), driver=NEW, operator_chart="v26.7.0", driver_mode="nvidiadriver",
        pools=[attestation.AttestedPool.of("gpucanary", "NVIDIA-H100-NVL")],
        checks=[attestation.AttestedCheck(id="validation-job", status="pass", subject="n", message="m")],
        soak_start=datetime.fromtimestamp(world.soak_start, UTC), soak_end=later, git_commit="0123456789abcdef",
        signing_key=example_signing_key())
    path = attestation.write(project / attestation.ATTESTATION_DIR, newer)
    assert path == attestation.path_for(project / attestation.ATTESTATION_DIR, "canary", NEW)
    before = path.read_bytes()
    with start(history(world), tmp_path / "prometheus") as url:
        code, doc, err = run(world, project, url, capsys)
    assert code == Exit.FAILED and doc["passed"] is True and doc["attestation"] is None
    assert "refusing to replace a newer attestation" in doc["attestationError"] and "attestation not written" in err
    assert path.read_bytes() == before


@needs_prometheus
def test_a_canary_without_a_signing_key_writes_no_attestation(world: World, project: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check passes, but nothing signs: exit 1 and no file, naming how to give the key; a key that is no
    PEM is invalid input."""
    monkeypatch.delenv(attestation.SIGNING_KEY_ENV, raising=False)
    kubeconfig = world.fake.write_kubeconfig(tmp_path / "kubeconfig")
    args = ["verify", "--stack-file", str(world.stack_file), "--project-dir", str(project), "--kubeconfig",
            str(kubeconfig), "--json"]
    with start(history(world), tmp_path / "prometheus") as url:
        result = CliRunner().invoke(app, [*args, "--prometheus", url])
    doc = document_of("verify", result.stdout)
    assert result.exit_code == 1 and doc["passed"] is True and doc["attestation"] is None
    assert "no signing key: set GPU_ROLLOUT_SIGNING_KEY (the PEM text) or give --signing-key FILE" in doc["attestationError"]
    assert not (project / attestation.ATTESTATION_DIR).exists()
    bad = tmp_path / "key.pem"
    bad.write_text("not a key")
    result = CliRunner().invoke(app, [*args, "--signing-key", str(bad)])
    assert result.exit_code == 2 and f"--signing-key {bad}: not a PEM private key" in result.output
