"""The live verbs through `rollout.cli.app`: exit codes 0/1/2, --json documents, pause/resume output."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from gpu_knowledge import labels
from tests.fakekube.fixtures import finish_upgrade, move_node
from tests.fakekube.server import Fault, FakeKube
from tests.rollout.json_contract import document_of, error_of

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_preflight_json_and_exit_codes(prod: FakeKube, kubeconfig: Path) -> None:
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert result.exit_code == 0, result.output
    doc = document_of("preflight", result.stdout)
    assert doc["stack"] == "prod" and {c["status"] for c in doc["checks"]} <= {"pass", "warn"}
    prod.remove("poddisruptionbudgets", "llm-chat-pdb", "inference")
    assert invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig)).exit_code == 1
    assert prod.writes == 0


def test_preflight_table_groups_by_runbook_section(prod: FakeKube, kubeconfig: Path) -> None:
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig))
    assert "Who owns the driver" in result.stdout and "2. Capacity and disruption controls" in result.stdout


@pytest.mark.parametrize("args", [
    ("preflight", "--stack", "nope"),
    ("preflight",),
    ("watch", "--stack", "prod", "--interval", "0"),
    ("pause", "--stack", "prod", "--bogus"),
])
def test_bad_input_exits_2(prod: FakeKube, kubeconfig: Path, args: tuple[str, ...]) -> None:
    assert invoke(*args, "--kubeconfig", str(kubeconfig)).exit_code == 2


def test_bad_kubeconfig_exits_2_naming_the_flag(tmp_path: Path) -> None:
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(tmp_path / "none"))
    assert result.exit_code == 2 and "--kubeconfig" in result.output


def test_cluster_errors_exit_1_with_the_permission(prod: FakeKube, kubeconfig: Path) -> None:
    prod.faults.append(Fault(403, verb="list", plural="poddisruptionbudgets"))
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert result.exit_code == 1 and "poddisruptionbudgets" in error_of(result.stdout, 1, "cluster")["message"]
    assert "'list' 'poddisruptionbudgets.policy' cluster-wide" in result.output


def t4(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"])


def test_pause_resume_and_watch_once(prod: FakeKube, kubeconfig: Path, prod_spec) -> None:
    node, *others = t4(prod)
    for other in others:
        finish_upgrade(prod, other, prod_spec.driver.version)
    move_node(prod, node, "upgrade-required")
    paused = invoke("pause", "--stack", "prod", "--kubeconfig", str(kubeconfig))
    assert paused.exit_code == 0 and f"labelled {node}" in paused.stdout
    assert "3 node(s) already upgrade-done on their pool's target driver" in paused.stdout
    assert prod.obj("nodes", node)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"
    snap = invoke("watch", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--once", "--json")
    assert snap.exit_code == 0, snap.output
    assert {p["pool"]: p["states"] for p in document_of("watch", snap.stdout)["pools"]}["gput4"] == {
        "upgrade-done": 3, "upgrade-required": 1}
    resumed = invoke("resume", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert resumed.exit_code == 0 and document_of("resume", resumed.stdout)["changed"] == [node]
    move_node(prod, node, "upgrade-failed")
    failed = invoke("watch", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--once")
    assert failed.exit_code == 1 and "upgrade-failed" in failed.output
    assert prod.obj("nodes", node)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_failure_midway_shows_what_changed(prod: FakeKube, kubeconfig: Path, verb: str) -> None:
    nodes = t4(prod)
    if verb == "resume":
        assert invoke("pause", "--stack", "prod", "--kubeconfig", str(kubeconfig)).exit_code == 0
    prod.faults.append(Fault(403, verb="patch", plural="nodes", skip=2, times=99))  # the 3rd patch fails
    result = invoke(verb, "--stack", "prod", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 1
    action = "labelled" if verb == "pause" else "released"
    assert f"{action} {nodes[0]}" in result.stdout and f"{action} {nodes[1]}" in result.stdout
    assert nodes[2] not in result.stdout
    assert f"stopped at node {nodes[2]} after changing 2 node(s)" in result.output and f"re-run `{verb}`" in result.output
    prod.faults.clear()
    prod.faults.append(Fault(403, verb="patch", plural="nodes", skip=1, times=99))
    doc = document_of(verb, invoke(verb, "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json").stdout)
    assert doc["changed"] == [nodes[2]] and f"stopped at node {nodes[3]}" in doc["error"]


@pytest.mark.parametrize("verb", ["pause", "resume", "watch"])
def test_no_node_of_the_stack_exits_1(fake: FakeKube, kubeconfig: Path, verb: str) -> None:
    args = [verb, "--stack", "prod", "--kubeconfig", str(kubeconfig)] + (["--once"] if verb == "watch" else [])
    result = invoke(*args)
    assert result.exit_code == 1
    assert ("no node of the stack's pools on this cluster (looked for gput4: gpu-driver-upgrade.io/pool=gput4 or "
            "kubernetes.azure.com/agentpool=gput4;") in result.output and "--context" in result.output
    # Nothing confirms or refutes the cluster (no record, no node): the verb proceeds and says so.
    assert "note: cannot confirm that this is the stack's cluster 'inference-weu-1'" in result.output
    assert "changed" not in result.stdout and "complete" not in result.stdout


def test_watch_reports_trigger_and_failed_pause(prod: FakeKube, kubeconfig: Path) -> None:
    node = t4(prod)[0]
    move_node(prod, node, "upgrade-failed")
    prod.faults.append(Fault(403, verb="patch", plural="nodes", times=99))
    result = invoke("watch", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--once", "--json")
    assert result.exit_code == 1
    doc = document_of("watch", result.stdout)
    assert [t["kind"] for t in doc["triggers"]] == ["upgrade-failed"]
    assert "forbidden (403)" in doc["pauseError"] and doc["paused"]["changed"] == []
    assert "AUTO-PAUSE FAILED" in result.output and f"node {node} (pool gput4) is in upgrade-failed" in result.output


# ---------------------------------------------------------------- image-owned stacks (driver.owner: image)


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_cli_pause_resume_exit_1_with_the_message_and_write_nothing(eks: FakeKube, kubeconfig: Path,
                                                                  verb: str) -> None:
    before = {n["metadata"]["name"]: n["metadata"]["labels"].get(labels.SKIP_UPGRADE) for n in eks.objects("nodes")}
    result = invoke(verb, "--stack", "eks-prod", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 1
    assert f"there is no operator upgrade to {verb}" in result.output
    assert "node(s) changed" not in result.output and "cluster error" not in result.output
    as_json = invoke(verb, "--stack", "eks-prod", "--kubeconfig", str(kubeconfig), "--json")
    doc = document_of(verb, as_json.stdout)
    assert as_json.exit_code == 1 and doc["changed"] == [] and "node image owns the driver" in doc["error"]
    assert eks.writes == 0
    assert {n["metadata"]["name"]: n["metadata"]["labels"].get(labels.SKIP_UPGRADE)
            for n in eks.objects("nodes")} == before


def test_cli_watch_once_json_shape(eks: FakeKube, kubeconfig: Path) -> None:
    result = invoke("watch", "--stack", "eks-prod", "--kubeconfig", str(kubeconfig), "--once", "--json")
    assert result.exit_code == 0, result.output
    doc = document_of("watch", result.stdout)
    assert doc["stack"] == "eks-prod" and doc["owner"] == "image" and doc["complete"] is False
    assert set(doc) == {"schemaVersion", "stack", "owner", "at", "complete", "pools", "nodes", "models", "triggers", "slo"}
    [l40s] = [p for p in doc["pools"] if p["pool"] == "gpu-l40s"]
    assert set(l40s) == {"pool", "target", "held", "nodeCount", "done", "waiting", "generations"}
    assert "(none)" not in result.stdout and "states" not in l40s
    assert {n["generation"] for n in doc["nodes"] if n["pool"] == "gpu-l40s"} == {"1", "2"}
    table = invoke("watch", "--stack", "eks-prod", "--kubeconfig", str(kubeconfig), "--once")
    assert table.exit_code == 0 and "pools by generation" in table.stdout and "(none)" not in table.stdout
    assert "g1 (570.195.03) is still live in the spec" in table.stdout
    assert eks.writes == 0


def test_a_plain_http_server_is_said_to_be_reached_without_tls(prod: FakeKube, kubeconfig: Path) -> None:
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig))
    assert f"note: {prod.url} is reached without TLS" in result.stderr and "certificate" not in result.stderr
