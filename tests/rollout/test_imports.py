"""The live verbs never load the Pulumi SDK (it was most of every verb's start-up): each runs for real in a
fresh interpreter against the fake API on loopback, which then reports the modules it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR
from tests.fakekube.server import FakeKube

# Runs `gpu-rollout ARGS` in this interpreter, then writes its exit code and every loaded module of the
# Pulumi SDKs (and of preview/, which imports them, but for preview.garbage: the entry point's collection policy,
# plain Python) to REPORT.
PROBE = """
import json, os, sys
from rollout import cli
sys.argv = ["gpu-rollout", *json.loads(os.environ["ARGS"])]
try:
    cli.main()
    code = 0
except SystemExit as exit_:
    code = exit_.code
sdk = sorted(m for m in sys.modules if m.split(".")[0].startswith("pulumi")
             or (m.split(".")[0] == "preview" and m not in ("preview", "preview.garbage")))
heavy = sorted(m for m in ("kubernetes", "fleetspec.model", "checks.kube") if m in sys.modules)
with open(os.environ["REPORT"], "w", encoding="utf-8") as report:
    json.dump({"code": code, "sdk": sdk, "heavy": heavy}, report)
"""


def probe(args: list[str], tmp_path: Path) -> tuple[int, list[str], str, list[str]]:
    report = tmp_path / "report.json"
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env.update(ARGS=json.dumps(args), REPORT=str(report))
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=PROJECT_DIR, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    found = json.loads(report.read_text(encoding="utf-8"))
    return found["code"], found["sdk"], proc.stdout, found["heavy"]


@pytest.mark.parametrize("verb", [["preflight"], ["watch", "--once"], ["pause"], ["resume"]],
                         ids=lambda verb: verb[0])
def test_a_live_verb_runs_without_the_pulumi_sdk(prod: FakeKube, kubeconfig: Path, tmp_path: Path,
                                                 verb: list[str]) -> None:
    code, sdk, stdout, heavy = probe([*verb, "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json"], tmp_path)
    assert code == 0, stdout
    assert "checks.kube" in heavy  # it did reach the cluster through the adapter
    assert json.loads(stdout)["stack"] == "prod"  # the verb really ran, through the cluster
    assert sdk == []


def test_help_loads_neither_the_sdk_nor_the_spec_nor_the_client(tmp_path: Path) -> None:
    code, sdk, stdout, heavy = probe(["preflight", "--help"], tmp_path)
    assert code == 0 and "--kubeconfig" in stdout
    assert sdk == [] and heavy == []


def test_plan_loads_the_sdk_but_not_the_kubernetes_client(tmp_path: Path) -> None:
    """The probe sees the SDK where it is used: plan runs the program under Pulumi's mocks. The Kubernetes
    client (0.2 s to import) is for the verbs that reach a cluster; the offline plan never does."""
    code, sdk, stdout, heavy = probe(["plan", "--stack", "canary", "--json"], tmp_path)
    assert code == 0 and json.loads(stdout)["stack"] == "canary"
    assert "pulumi" in sdk and "preview.run" in sdk
    assert "kubernetes" not in heavy and "checks.kube" not in heavy
