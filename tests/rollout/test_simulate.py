"""`gpu-rollout simulate`: from the stack (no cluster reached), from the live cluster (read-only, a constant number
of LISTs), its exit codes and the stack-file change it prints."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR, edited
from tests.fakekube.server import FakeKube
from tests.rollout.json_contract import document_of

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def write_stack(tmp_path: Path, config: dict[str, str], name: str = "prod") -> Path:
    """A stack file holding ``config`` (the engine's flat map, objects as JSON, which YAML reads back)."""
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(json.dumps({"config": config}), encoding="utf-8")
    return path


def cached(stack: str = "prod") -> dict[str, str]:
    """The example stack with every model's weights in a cache: its rollout completes."""
    return edited(stack, "models", lambda models: [m.update(weightsCached=True) for m in models])


def test_from_the_stack_it_predicts_and_recommends_without_a_cluster(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))  # would fail, were it read
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, cached())), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 0, result.output
    doc = document_of("simulate", result.stdout)
    assert doc["source"] == "stack" and doc["predicted"]["seconds"] > 0
    assert [w["name"] for w in doc["predicted"]["waves"]] == ["wave 1", "wave 2", "wave 3"]
    assert doc["predicted"]["seconds"] >= doc["lowerBound"]["seconds"] and doc["ratio"] >= 1
    assert {m["model"] for m in doc["predicted"]["models"]} >= {"inference/llm-chat"}
    recommended = doc["recommended"]
    assert recommended["maxParallelUpgrades"] >= 1
    assert recommended["stackChange"] == [
        {"key": "gpu-driver-upgrade:gpuOperator.upgradePolicy.maxParallelUpgrades",
         "value": recommended["maxParallelUpgrades"]},
        {"key": "gpu-driver-upgrade:gpuOperator.upgradePolicy.maxUnavailable", "value": recommended["maxUnavailable"]},
    ]


def test_the_table_prints_the_stack_change(tmp_path: Path) -> None:
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, cached())), "--project-dir",
                    str(PROJECT_DIR))
    assert result.exit_code == 0, result.output
    assert "gpu-driver-upgrade:gpuOperator.upgradePolicy.maxParallelUpgrades:" in result.stdout
    assert "lower bound" in result.stdout


def test_a_pdb_keeping_every_replica_exits_1_naming_it(tmp_path: Path) -> None:
    config = edited("prod", "models", lambda models: [m.update(weightsCached=True, minAvailable=m["replicas"])
                                                      for m in models])
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 1
    doc = document_of("simulate", result.stdout)
    first = doc["predicted"]["stalls"][0]
    assert first["cause"] == "pdb" and first["state"] == "pod-deletion-required" and first["pdb"].endswith("-pdb")
    assert doc["recommended"]["maxParallelUpgrades"] is None and "stackChange" not in doc["recommended"]
    assert "the rollout stops for good" in result.stderr


def test_parallel_overrides_the_configured_policy(tmp_path: Path) -> None:
    path = str(write_stack(tmp_path, cached()))
    doc = json.loads(invoke("simulate", "--stack-file", path, "--project-dir", str(PROJECT_DIR), "--parallel", "2",
                            "--json").stdout)
    assert {p["maxParallelUpgrades"] for p in doc["policies"]} == {2}


def test_the_seed_makes_it_repeatable(tmp_path: Path) -> None:
    path = str(write_stack(tmp_path, cached()))
    runs = [json.loads(invoke("simulate", "--stack-file", path, "--project-dir", str(PROJECT_DIR), "--seed", seed,
                              "--json").stdout)["predicted"]["seconds"] for seed in ("5", "5", "6")]
    assert runs[0] == runs[1] != runs[2]


def test_kubeconfig_without_from_cluster_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("simulate", "--stack", "prod", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert result.exit_code == 2 and "--from-cluster" in result.output


def test_an_image_owned_stack_has_nothing_to_simulate() -> None:
    result = invoke("simulate", "--stack", "eks-prod")
    assert result.exit_code == 2 and "node image owns the driver" in result.stderr


def test_from_the_cluster_reads_in_a_constant_number_of_lists_and_writes_nothing(prod: FakeKube,
                                                                                 kubeconfig: Path) -> None:
    result = invoke("simulate", "--stack", "prod", "--from-cluster", "--kubeconfig", str(kubeconfig), "--json")
    assert result.exit_code in (0, 1), result.output
    doc = document_of("simulate", result.stdout)
    assert doc["source"] == "cluster"
    assert sum(p["nodes"] for p in doc["predicted"]["pools"]) == 16
    assert prod.writes == 0
    assert prod.counts["list"] - prod.pages <= 10 and set(prod.counts) == {"list"}


def test_from_the_cluster_a_single_replica_without_a_pdb_goes_to_zero(prod: FakeKube, kubeconfig: Path,
                                                                      prod_spec) -> None:
    """Runbook: the cluster's own GPU Deployment with one replica and no PDB is gone while its node drains."""
    from tests.fakekube.fixtures import model_container, pod

    node = sorted(n["metadata"]["name"] for n in prod.objects("nodes")
                  if n["metadata"]["labels"].get("gpu-driver-upgrade.io/pool") == "gpuh100")[-1]
    container = {**model_container(prod_spec.models[0]), "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    prod.add({"kind": "Deployment", "metadata": {"name": "solo", "namespace": "lab"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "solo"}},
                       "template": {"metadata": {"labels": {"app": "solo"}}, "spec": {"containers": [container]}}}})
    prod.add(pod("solo-1", "lab", node, {"app": "solo"}, [container], owner=("ReplicaSet", "solo-1")))
    doc = json.loads(invoke("simulate", "--stack", "prod", "--from-cluster", "--kubeconfig", str(kubeconfig),
                            "--json").stdout)
    solo = next(m for m in doc["predicted"]["models"] if m["model"] == "lab/solo")
    assert solo["minAvailable"] == 1 and solo["lowestAvailable"] == 0


def test_the_shipped_operator_owned_examples_predict_a_rollout_that_keeps_every_model() -> None:
    # The examples' models cache their weights, so a rescheduled replica is back before podDeletion times out.
    for stack in ("canary", "prod", "existing-canary", "existing-prod"):
        result = invoke("simulate", "--stack", stack, "--project-dir", str(PROJECT_DIR), "--json")
        assert result.exit_code == 0, (stack, result.output[-2000:])


def test_the_same_fleet_downloading_its_weights_stops_on_a_pdb(tmp_path: Path) -> None:
    # A replica that downloads its weights takes longer than podDeletion.timeoutSeconds to come back: the next
    # eviction the PDB allows comes too late, and the node goes to upgrade-failed.
    uncached = edited("prod", "models", lambda models: [m.update(weightsCached=False) for m in models])
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, uncached)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 1, result.output[-2000:]
