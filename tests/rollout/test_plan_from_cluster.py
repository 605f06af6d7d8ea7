"""Issue 32, point 2: `plan --from-cluster` judges the policies' questions preflight answers live (spare capacity,
the driver's and operator's compatibility) on what the cluster runs, beside the pack's verdict on the stack file;
a failed one refuses as preflight would, and the report says where it read the cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import seed
from tests.fakekube.plugin import stack_spec
from tests.fakekube.server import FakeKube

runner = CliRunner()


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
                                                   "operator-supports-driver"}
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
