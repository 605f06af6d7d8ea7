"""Issue 32, point 1: a stack adopts the GPU pools a team already runs (``nodePools[].aks.adopt`` /
``nodePools[].eks.adopt``): the program declares that agent pool or node group with Pulumi's ``import`` and its cloud
ID (seen here under mocks, where the engine hands the ID to the mock as the registration's resource ID), `plan`
marks it adopt, and an ID of another cluster, pool or shape is refused at its key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fleetspec.load import SpecError, spec_from_config
from preview.run import run_program
from engine_contracts import resource_facts as rf
from rollout.cli import app
from tests.conftest import PROJECT_DIR, edited

runner = CliRunner()
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
AKS_ID = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-inference-weu-1/providers/Microsoft.ContainerService/"
          "managedClusters/aks-inference-weu-1/agentPools/gpuh100")


def adopting(stack: str, pool: str, block: str, value: str) -> dict[str, str]:
    def edit(pools: list[dict[str, Any]]) -> None:
        next(p for p in pools if p["name"] == pool)[block]["adopt"] = value

    return edited(stack, "nodePools", edit)


def problems(config: dict[str, str]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        spec_from_config(config)
    return {p.path: p.message for p in caught.value.problems}


def test_an_adopted_agent_pool_is_imported_by_its_arm_id_and_the_others_created() -> None:
    run = run_program(adopting("prod", "gpuh100", "aks", AKS_ID), "prod")
    pools = {r.name: r for r in run.resources if r.type == rf.AKS_POOL}
    assert pools["gpuh100"].adopt == AKS_ID
    assert {name for name, r in pools.items() if not r.adopt} == set(pools) - {"gpuh100"}
    assert all(not r.adopt for r in run.resources if r.type != rf.AKS_POOL)


def test_an_adopted_node_group_is_imported_by_cluster_and_name() -> None:
    spec = spec_from_config(edited("eks-prod", "nodePools", lambda pools: None))
    (pool,) = [p for p in spec.nodePools if p.name == "gpu-h100"]
    oldest = pool.cloud_name(min(pool.live_generations, key=lambda g: g.id))
    value = f"{spec.cluster.eks.clusterName}:{oldest}"
    run = run_program(adopting("eks-prod", "gpu-h100", "eks", value), "eks-prod")
    groups = {r.name: r.adopt for r in run.resources if r.type == rf.EKS_NODE_GROUP}
    assert groups[oldest] == value and [n for n, a in groups.items() if a] == [oldest]


@pytest.mark.parametrize(("value", "reason"), [
    ("gpuh100", "is not an AKS agent pool's resource ID"),
    (AKS_ID.replace("rg-inference-weu-1", "rg-other"), "resource group 'rg-other', cluster 'aks-inference-weu-1', "
     "not this stack's cluster"),
    (AKS_ID.replace("agentPools/gpuh100", "agentPools/gpuold"), "it adopts 'gpuold', but the program declares this "
     "pool's cloud pool as 'gpuh100'"),
])
def test_a_wrong_aks_id_is_refused_at_its_key(value: str, reason: str) -> None:
    found = problems(adopting("prod", "gpuh100", "aks", value))
    (key,) = [k for k in found if k.endswith(".aks.adopt")]
    assert key.startswith("gpu-driver-upgrade:nodePools[") and reason in found[key]


def test_a_node_group_of_another_cluster_is_refused_at_its_key() -> None:
    found = problems(adopting("eks-prod", "gpu-h100", "eks", "other-cluster:gpu-h100-g1"))
    (key,) = [k for k in found if k.endswith(".eks.adopt")]
    assert "in cluster 'other-cluster', not this stack's cluster" in found[key]


def test_plan_marks_the_adopted_pool(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.prod.yaml"
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    for pool in document["config"]["gpu-driver-upgrade:nodePools"]:
        if pool["name"] == "gpuh100":
            pool["aks"]["adopt"] = AKS_ID
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    args = ["plan", "--stack-file", str(path), "--project-dir", str(PROJECT_DIR)]
    result = runner.invoke(app, [*args, "--json"])
    resources = json.loads(result.stdout)["resources"]
    assert [(r["name"], r["adopt"]) for r in resources if r["adopt"]] == [("gpuh100", AKS_ID)]
    text = runner.invoke(app, args, env={"COLUMNS": "400"}).stdout
    assert f"adopt: the existing {AKS_ID} (not created)" in text
