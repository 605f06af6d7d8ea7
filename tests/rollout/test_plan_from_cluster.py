"""Issue 32, point 2: `plan --from-cluster` judges the policies' questions preflight answers live (spare capacity,
the driver's and operator's compatibility) on what the cluster runs, beside the pack's verdict on the stack file;
a failed one refuses as preflight would, and the report says where it read the cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpu_knowledge.cloud_ids import aks_agent_pool
from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import seed
from tests.fakekube.plugin import stack_spec
from tests.fakekube.real_cluster import unlabelled_aks_prod
from tests.fakekube.server import FakeKube

runner = CliRunner()
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


def plan(*args: str) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(PROJECT_DIR), "--json", *args])
    return result.exit_code, json.loads(result.stdout) if result.stdout else {}, result.stderr


def live_of(document: dict[str, Any], check: str, subject: str) -> dict[str, Any]:
    (found,) = [c for c in document["live"] if c["id"] == check and c["subject"] == subject]
    return found


def test_the_live_checks_agree_with_the_pack_on_the_seeded_cluster(fake: FakeKube, kubeconfig: Path) -> None:
    seed(fake, stack_spec("canary"))
    code, offline, _ = plan()
    assert offline["live"] is None and offline["verdict"] == "admitted-with-advice"
    code, document, err = plan("--from-cluster", "--kubeconfig", str(kubeconfig))
    assert code == 0, err
    assert document["verdict"] == "admitted-with-advice"
    assert {c["id"] for c in document["live"]} <= {"spare-capacity", "change-ticket", "gpu-supported-by-driver",
                                                   "operator-supports-driver", "pool-adopted"}
    # The validation job's hold on gpucanary: a warning live, the pack's advice offline; the same numbers.
    live = live_of(document, "spare-capacity", "gpucanary")
    assert live["status"] == "warn" and "+ 1 held by the validation job" in live["message"]
    advice = [v for v in document["violations"] if v["policy"] == "spare-capacity" and "gpucanary" in v["message"]]
    assert [v["enforcement"] for v in advice] == ["advisory"] and "2 GPUs out but only 1 spare" in advice[0]["message"]
    cluster = document["basis"]["sources"][-1]
    assert cluster["role"] == "cluster" and cluster["source"].startswith("read live (--from-cluster)")
    assert not cluster["assumed"]


def test_a_live_failure_refuses_what_the_stack_file_alone_admits(fake: FakeKube, kubeconfig: Path) -> None:
    seed(fake, stack_spec("canary"))
    # The cluster's PDB keeps both replicas, not the one the stack file says: one node out drops the model.
    fake.update("poddisruptionbudgets", "llm-chat-canary-pdb", {"spec": {"minAvailable": 2}}, "inference")
    code, offline, _ = plan()
    assert code == 0 and offline["verdict"] != "refused"
    code, document, _ = plan("--from-cluster", "--kubeconfig", str(kubeconfig))
    assert code == 1 and document["verdict"] == "refused"
    live = live_of(document, "spare-capacity", "gpucanary")
    assert live["status"] == "fail" and "below minAvailable" in live["message"]
    text = runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(PROJECT_DIR), "--from-cluster",
                               "--kubeconfig", str(kubeconfig)], env={"COLUMNS": "100"})
    assert text.exit_code == 1
    assert "live checks" in text.stdout and "verdict: refused (1 failed live check(s))" in " ".join(
        text.stdout.splitlines()[-3:])


def test_a_cluster_flag_without_from_cluster_is_refused_naming_it(kubeconfig: Path) -> None:
    result = runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(PROJECT_DIR),
                                 "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2 and "--from-cluster" in result.stderr and "--kubeconfig" in result.stderr


def test_a_first_deployment_over_pools_the_cluster_runs_is_refused_until_they_are_adopted(
        fake: FakeKube, kubeconfig: Path, tmp_path: Path) -> None:
    """The cluster of Pulumi.prod.yaml before its first `up`: agent pools gput4, gpua100 and gpuh100 serve already.
    Creating them again is refused; adopting them by their IDs is not."""
    unlabelled_aks_prod(fake)
    cluster = ["--from-cluster", "--kubeconfig", str(kubeconfig), "--json"]
    result = runner.invoke(app, ["plan", "--stack", "prod", "--project-dir", str(PROJECT_DIR), *cluster])
    document = json.loads(result.stdout)
    adopted = {c["subject"]: c for c in document["live"] if c["id"] == "pool-adopted"}
    assert result.exit_code == 1 and document["verdict"] == "refused"
    assert {s: c["status"] for s, c in adopted.items()} == {"gput4": "fail", "gpua100": "fail", "gpuh100": "fail"}
    assert "the cluster runs kubernetes.azure.com/agentpool=gpuh100 already" in adopted["gpuh100"]["message"]
    assert "nodePools[].aks.adopt" in adopted["gpuh100"]["message"]
    # The same file, each pool adopted by its ARM ID.
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    aks = document["config"]["gpu-driver-upgrade:cluster"]["aks"]
    for pool in document["config"]["gpu-driver-upgrade:nodePools"]:
        pool["aks"]["adopt"] = aks_agent_pool(SUBSCRIPTION, aks["resourceGroup"], aks["clusterName"], pool["name"])
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = runner.invoke(app, ["plan", "--stack-file", str(path), "--project-dir", str(PROJECT_DIR), *cluster])
    document = json.loads(result.stdout)
    adopted = {c["subject"]: c for c in document["live"] if c["id"] == "pool-adopted"}
    assert {s: c["status"] for s, c in adopted.items()} == {"gput4": "pass", "gpua100": "pass", "gpuh100": "pass"}
    assert adopted["gpua100"]["message"] == ("adopts kubernetes.azure.com/agentpool=gpua100 (8 node(s)): the first "
                                             "`up` imports it")
    assert {r["name"] for r in document["resources"] if r["adopt"]} == {"gput4", "gpua100", "gpuh100"}
