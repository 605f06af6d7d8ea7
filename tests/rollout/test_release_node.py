"""`gpu-rollout release-node`, `watch` and `resume` on a node held by a failed validation, through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.checks.test_validation_hold import fail_validation, model_pods_on, nodes
from tests.fakekube.fixtures import seed
from tests.fakekube.plugin import stack_spec
from tests.fakekube.server import FakeKube
from workload import result as job_result
from tests.rollout.json_contract import document_of

runner = CliRunner()


@pytest.fixture
def canary(fake: FakeKube) -> FakeKube:
    seed(fake, stack_spec("canary"))
    fake.reset_counts()
    return fake


def invoke(kubeconfig: Path, *args: str):
    return runner.invoke(app, [*args, "--stack", "canary", "--kubeconfig", str(kubeconfig)])


def test_watch_resume_and_release_node(canary: FakeKube, kubeconfig: Path) -> None:
    spec = stack_spec("canary")
    first = nodes(spec)[0]
    [pod] = model_pods_on(canary, first)
    fail_validation(canary, spec, first)

    watched = invoke(kubeconfig, "watch", "--once", "--json")
    assert watched.exit_code == 1, watched.output
    doc = document_of("watch", watched.stdout)
    assert [(t["kind"], t["subject"]) for t in doc["triggers"]] == [("validation-failed", first)]
    assert doc["evictions"] == {"evicted": [f"inference/{pod}"], "refused": [], "failed": [], "kept": []}
    assert doc["paused"]["changed"]
    assert "tokens-per-second failed on driver 580.173.02" in watched.output  # the reason, on stderr
    assert "evicted 1 model pod(s) from held node(s)" in watched.output
    assert "stays cordoned until `gpu-rollout release-node --stack canary <node>`" in watched.output

    resumed = invoke(kubeconfig, "resume")
    assert resumed.exit_code == 0 and f"stay cordoned, held by a failed validation: {first}" in resumed.stdout
    assert canary.obj("nodes", first)["spec"]["unschedulable"] is True

    refused = invoke(kubeconfig, "release-node", first, "--json")
    assert refused.exit_code == 1
    assert document_of("release-node", refused.stdout)["released"] is False and "--accept-failed" in refused.output
    assert canary.obj("nodes", first)["spec"]["unschedulable"] is True

    released = invoke(kubeconfig, "release-node", first, "--accept-failed")
    assert released.exit_code == 0, released.output
    assert released.stdout.startswith(f"released node {first} (held because tokens-per-second failed")
    assert "hold record removed, uncordoned" in released.stdout
    node = canary.obj("nodes", first)
    assert not node["spec"].get("unschedulable") and job_result.HOLD_ANNOTATION not in node["metadata"]["annotations"]

    again = invoke(kubeconfig, "release-node", first)
    assert again.exit_code == 1 and "is not held by a failed validation" in again.output
