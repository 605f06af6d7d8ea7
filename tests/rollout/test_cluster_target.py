"""Which cluster the live verbs reach (docs/runbook.md, "Which cluster the live commands reach", resolved by
rollout.context): the stack's declared kubeconfig and context beat the ambient ones, the flags beat the
stack's, and a declared context that is missing is bad input naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.fakekube.real_cluster import identity_configmap
from tests.fakekube.server import FakeKube

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env)


def _kubeconfig(path: Path, contexts: dict[str, str], current: str) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": name, "cluster": {"server": url}} for name, url in contexts.items()],
           "users": [{"name": "tester", "user": {"token": "fake-token"}}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": "tester"}} for name in contexts]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _existing_stack(tmp_path: Path, kubeconfig: Path | None) -> str:
    text = (PROJECT_DIR / "Pulumi.existing-prod.yaml").read_text(encoding="utf-8")
    if kubeconfig is not None:
        text = text.replace("    existing:\n      context: lab-gpu-1\n",
                            f"    existing:\n      context: lab-gpu-1\n      kubeconfig: {kubeconfig}\n")
    path = tmp_path / "Pulumi.existing-prod.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def two_clusters(fake: FakeKube):
    """The lab cluster (the stack's, with its record) and another one, both on loopback."""
    fake.add(identity_configmap("prod", {"cluster": "lab-gpu-1", "cloud": "existing", "stage": "prod"}))
    with FakeKube() as other:
        other.add(identity_configmap("prod", {"cluster": "lab-gpu-2", "cloud": "existing", "stage": "prod"}))
        yield fake, other


def _identity(result) -> dict:
    [found] = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "cluster-identity"]
    return found


def test_the_stacks_kubeconfig_beats_an_ambient_KUBECONFIG(two_clusters, tmp_path: Path) -> None:
    lab, other = two_clusters
    declared = _kubeconfig(tmp_path / "lab", {"lab-gpu-1": lab.url}, "lab-gpu-1")
    ambient = _kubeconfig(tmp_path / "ambient", {"lab-gpu-1": other.url}, "lab-gpu-1")
    stack = _existing_stack(tmp_path, declared)
    result = invoke("preflight", "--stack-file", stack, "--json", env={"KUBECONFIG": str(ambient)})
    assert _identity(result)["status"] == "pass", result.output  # reached lab, not the ambient cluster
    assert lab.counts["list"] > 0 and other.counts["list"] == 0
    # --kubeconfig beats the stack's file: the other cluster is reached, and refused by its record.
    refused = invoke("preflight", "--stack-file", stack, "--kubeconfig", str(ambient))
    assert refused.exit_code == 2 and "names cluster 'lab-gpu-2'" in refused.output


def test_without_a_declared_file_KUBECONFIG_is_read(two_clusters, tmp_path: Path) -> None:
    lab, _ = two_clusters
    ambient = _kubeconfig(tmp_path / "ambient", {"lab-gpu-1": lab.url}, "lab-gpu-1")
    result = invoke("preflight", "--stack-file", _existing_stack(tmp_path, None), "--json",
                    env={"KUBECONFIG": str(ambient)})
    assert _identity(result)["status"] == "pass", result.output


def test_the_stacks_context_beats_the_current_one_and_any_env(two_clusters, tmp_path: Path) -> None:
    lab, other = two_clusters
    both = _kubeconfig(tmp_path / "both", {"lab-gpu-1": lab.url, "elsewhere": other.url}, "elsewhere")
    stack = _existing_stack(tmp_path, both)
    result = invoke("preflight", "--stack-file", stack, "--json", env={"GPU_ROLLOUT_CONTEXT": "elsewhere"})
    assert _identity(result)["status"] == "pass", result.output
    assert other.counts["list"] == 0
    flagged = invoke("preflight", "--stack-file", stack, "--context", "elsewhere")
    assert flagged.exit_code == 2 and "lab-gpu-2" in flagged.output and "context elsewhere" in flagged.output


def test_a_missing_declared_context_is_bad_input_naming_it(fake: FakeKube, tmp_path: Path) -> None:
    only_other = _kubeconfig(tmp_path / "cfg", {"elsewhere": fake.url}, "elsewhere")
    result = invoke("preflight", "--stack-file", _existing_stack(tmp_path, only_other))
    assert result.exit_code == 2 and "--kubeconfig/--context" in result.output and "lab-gpu-1" in result.output
    assert fake.counts["list"] == 0
