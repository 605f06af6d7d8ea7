"""Issue 32, point 1: `gpu-rollout init --from-cluster` reads the team's GPU pools through the cloud's API (Azure
Resource Manager, the EKS API; a loopback fake of both here, tests/cloud_api_fake.py) with the user's credentials
(cloud_credentials), and writes the stacks with those pools, each adopted by its ID; what it cannot read is a note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cloud_credentials.credentials import BearerToken
from cloud_pools import read
from gpu_knowledge import cloud_ids
from rollout import adopted_pools, starter
from rollout.cli import app
from tests import cloud_api_fake as fake
from tests.rollout.test_init import project  # noqa: F401 (the fixture)

runner = CliRunner()
AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
EKS_ARGS = ["--cloud", "eks", "--name", "team", "--eks-cluster", fake.EKS_CLUSTER, "--region", fake.REGION,
            "--node-role-arn", "arn:aws:iam::123456789012:role/gpu-nodes", "--subnet", "subnet-0a1b2c3d4e5f60718",
            "--from-cluster", "--canary-pool", "gpu-a10g-g2"]


@pytest.fixture
def api():
    with fake.serve() as served:
        yield served


def stack_config(folder: Path, name: str) -> dict[str, Any]:
    return yaml.safe_load((folder / f"Pulumi.{name}.yaml").read_text())["config"]


def test_the_agent_pools_are_read_page_by_page_with_the_token(api: fake.CloudApi) -> None:
    found = read.read_aks(fake.SUBSCRIPTION, fake.GROUP, fake.AKS_CLUSTER, BearerToken(lambda: "t0ken", "a test token", "use another"),
                          endpoint=api.url)
    assert (found.location, found.kubernetes_version) == ("westeurope", "1.33.5")
    assert [p.name for p in found.pools] == ["cpupool", "h100canary", "h100serve", "system"]  # both pages
    serve = next(p for p in found.pools if p.name == "h100serve")
    assert serve.import_id == cloud_ids.aks_agent_pool(fake.SUBSCRIPTION, fake.GROUP, fake.AKS_CLUSTER, "h100serve")
    assert (serve.count, serve.sizes, serve.zones, serve.labels) == (6, ("Standard_NC40ads_H100_v5",), ("1", "2"),
                                                                     {"team": "search"})
    assert all(headers.get("Authorization") == "Bearer t0ken" for _, headers in api.requests)
    assert all(path.split("?")[1].startswith("api-version=") for path, _ in api.requests)


def test_init_writes_the_aks_pools_adopted_and_notes_what_it_left(project: Path, api: fake.CloudApi,  # noqa: F811
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def from_cluster(driver: str) -> adopted_pools.Pools:
        cluster = read.read_aks(fake.SUBSCRIPTION, fake.GROUP, fake.AKS_CLUSTER, BearerToken(lambda: "t", "a test token", "use another"),
                                endpoint=api.url)
        return adopted_pools.pools_of(cluster, "aks", ("h100canary",), driver)

    chosen = starter.Cluster("aks", fake.AKS_CLUSTER, fake.GROUP, fake.AKS_CLUSTER, "westeurope")
    starter.execute(project, chosen, "team-canary", "team-prod", "CHG-1", None, from_cluster)
    canary, prod = stack_config(project, "team-canary"), stack_config(project, "team-prod")
    (pool,) = canary["gpu-driver-upgrade:nodePools"]
    assert pool["name"] == "h100canary" and pool["role"] == "canary" and pool["nodeCount"] == 3
    assert pool["gpuProduct"] == "NVIDIA-H100-NVL" and pool["gpusPerNode"] == 1
    assert pool["aks"]["adopt"] == f"{fake.ARM_BASE}/agentPools/h100canary"
    (served,) = prod["gpu-driver-upgrade:nodePools"]
    assert served["name"] == "h100serve" and served["rollout"] == {"wave": 1, "released": False}
    assert served["aks"]["availabilityZones"] == ["1", "2"] and served["aks"]["osSku"] == "Ubuntu2204"
    assert canary["gpu-driver-upgrade:models"] == [] and prod["gpu-driver-upgrade:cluster"]["aks"]["kubernetesVersion"] \
        == "1.33.5"
    out = capsys.readouterr().out
    assert "read from the cluster: h100canary (canary), h100serve (prod); each adopted by its ID" in out
    assert "note: cpupool: Standard_D8s_v5 is no GPU size" in out
    assert "note: h100serve: its own node labels (team=search) are not declared" in out
    assert "system" not in out.split("read from the cluster:")[1].split("\n")[0]


def test_init_from_an_eks_cluster_end_to_end(project: Path, api: fake.CloudApi) -> None:  # noqa: F811
    result = runner.invoke(app, ["init", "--project-dir", str(project), *EKS_ARGS, "--api-endpoint", api.url,
                                 "--change-ticket", "CHG-2"], env=AWS)
    assert result.exit_code == 0, result.output
    assert all(headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
               and "/us-east-1/eks/aws4_request" in headers["Authorization"] for _, headers in api.requests)
    (canary,) = stack_config(project, "team-canary")["gpu-driver-upgrade:nodePools"]
    assert canary["name"] == "gpu-a10g" and canary["eks"]["adopt"] == f"{fake.EKS_CLUSTER}:gpu-a10g-g2"
    assert canary["generations"] == [{"id": 2, "driverVersion": canary["generations"][0]["driverVersion"],
                                      "releaseVersion": "1.33.5-20251120"}]
    (prod,) = stack_config(project, "team-prod")["gpu-driver-upgrade:nodePools"]
    assert prod["name"] == "gpu-h100" and prod["eks"]["adopt"] == f"{fake.EKS_CLUSTER}:gpu-h100-g1"
    assert "note: general: m6i.large is no GPU size" in result.stdout
    planned = runner.invoke(app, ["plan", "--stack", "team-prod", "--project-dir", str(project), "--json"])
    resources = json.loads(planned.stdout)["resources"]
    assert [(r["name"], r["adopt"]) for r in resources if r["adopt"]] == [("gpu-h100-g1",
                                                                          f"{fake.EKS_CLUSTER}:gpu-h100-g1")]


def test_a_refused_credential_exits_1_naming_its_fix_and_writes_nothing(project: Path,  # noqa: F811
                                                                       api: fake.CloudApi) -> None:
    api.refuse = True
    result = runner.invoke(app, ["init", "--project-dir", str(project), *EKS_ARGS, "--api-endpoint", api.url], env=AWS)
    assert result.exit_code == 1
    assert "HTTP 403 with AWS SigV4 (eks, us-east-1)" in result.stderr
    assert not (project / "Pulumi.team-canary.yaml").exists()


@pytest.mark.parametrize(("args", "flag"), [
    (["--canary-pool", "nope"], "--canary-pool nope: no such pool in the cluster"),
])
def test_a_canary_pool_the_cluster_lacks_is_refused(project: Path, api: fake.CloudApi, args: list[str],  # noqa: F811
                                                   flag: str) -> None:
    result = runner.invoke(app, ["init", "--project-dir", str(project), *EKS_ARGS[:-1], *args[1:], "--api-endpoint",
                                 api.url], env=AWS)
    assert result.exit_code == 2 and flag in result.stderr
    assert not (project / "Pulumi.team-canary.yaml").exists()


def test_the_cluster_reading_flags_need_from_cluster(project: Path) -> None:  # noqa: F811
    result = runner.invoke(app, ["init", "--project-dir", str(project), "--cloud", "aks", "--name", "t",
                                 "--aks-cluster", "a", "--resource-group", "g", "--location", "westeurope",
                                 "--canary-pool", "x"])
    assert result.exit_code == 2 and "--from-cluster" in result.stderr
