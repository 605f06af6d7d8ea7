"""Issue 7 point 9: image-owned AKS generations checked live: the node image and the driver each node
reports against what its generation records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks import kube as k
from checks.preflight import run_preflight
from checks.results import Status
from rollout.cli import app
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from tests.conftest import aks_image_owned, change
from tests.fakekube.real_cluster import aks_gpu_node, gfd_driver
from tests.fakekube.server import FakeKube

runner = CliRunner()
H100 = {"vm_size": "Standard_ND96isr_H100_v5", "product": "NVIDIA-H100-80GB-HBM3", "gpus": 8}
IMAGE = "AKSUbuntu-2204gen2containerd-"


@pytest.fixture
def spec() -> FleetSpec:
    """Pulumi.prod.yaml, image-owned: gpuh100 on g1 (570.195.03, image 202510.14.0) and g2 (580.173.02,
    202511.21.0), agent pools gpuh100g1 and gpuh100g2."""
    return spec_from_config(aks_image_owned())


@pytest.fixture
def generations(fake: FakeKube) -> dict[str, list[str]]:
    """The two agent pools as AKS created them: the cloud's labels only (no generation label of ours)."""
    nodes = {}
    for pool, image, driver in (("gpuh100g1", "202510.14.0", "570.195.03"), ("gpuh100g2", "202511.21.0", "580.173.02")):
        nodes[pool] = [fake.add(aks_gpu_node(pool, i, image=IMAGE + image, driver=driver, state=None,
                                             extra={"nvidia.com/gpu.deploy.driver": "pre-installed"}, **H100)
                                )["metadata"]["name"] for i in range(4)]
    return nodes


def node_image(results: list) -> dict[str, object]:
    return {r.subject: r for r in results if r.id == "node-image"}


def test_nodes_as_their_generation_records_pass(generations: dict, kube: k.Kube, spec: FleetSpec) -> None:
    [result] = node_image(run_preflight(kube, spec)).values()
    assert result.status == Status.PASS and result.message == "8 node(s) run the driver and node image their " \
                                                              "generation records"


def test_another_node_image_fails(generations: dict, fake: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    node = generations["gpuh100g2"][1]
    fake.update("nodes", node, {"metadata": {"labels": {
        "kubernetes.azure.com/node-image-version": IMAGE + "202512.02.0"}}})  # AKS gave the pool a newer image
    [result] = node_image(run_preflight(kube, spec)).values()
    assert result.status == Status.FAIL
    assert f"{node}: node image {IMAGE}202512.02.0, g2 records 202511.21.0" in result.message


def test_another_driver_fails(generations: dict, fake: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    node = generations["gpuh100g2"][0]
    fake.update("nodes", node, {"metadata": {"labels": gfd_driver("580.95.05")}})  # the image shipped another driver
    [result] = node_image(run_preflight(kube, spec)).values()
    assert result.status == Status.FAIL and f"{node}: driver 580.95.05, g2 records 580.173.02" in result.message


def test_a_full_image_name_may_be_recorded(generations: dict, kube: k.Kube) -> None:
    def record_full(pools: list) -> None:
        pools[0]["generations"][1]["nodeImageVersion"] = "2204gen2containerd-202511.21.0"

    spec = spec_from_config(change(aks_image_owned(), "nodePools", record_full))
    [result] = node_image(run_preflight(kube, spec)).values()
    assert result.status == Status.PASS


def test_preflight_exits_1_on_a_mismatch(generations: dict, fake: FakeKube, kubeconfig: Path, tmp_path: Path) -> None:
    config = aks_image_owned()  # as a stack file: structured values as JSON, which YAML reads as flow style
    stack = tmp_path / "Pulumi.h100img.yaml"
    lines = ["config:"] + [f"  {key}: {value}" for key, value in config.items()]
    stack.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ok = runner.invoke(app, ["preflight", "--stack-file", str(stack), "--kubeconfig", str(kubeconfig), "--json"])
    assert {c["status"] for c in json.loads(ok.stdout)["checks"] if c["id"] == "node-image"} == {"pass"}, ok.output
    fake.update("nodes", generations["gpuh100g1"][0], {"metadata": {"labels": {
        "kubernetes.azure.com/node-image-version": IMAGE + "202509.30.0"}}})
    bad = runner.invoke(app, ["preflight", "--stack-file", str(stack), "--kubeconfig", str(kubeconfig), "--json"])
    assert bad.exit_code == 1
    assert {c["status"] for c in json.loads(bad.stdout)["checks"] if c["id"] == "node-image"} == {"fail"}


def test_operator_owned_stacks_have_no_generations_to_check(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    [result] = node_image(run_preflight(kube, prod_spec)).values()
    assert result.status == Status.PASS and "the GPU Operator owns the driver" in result.message
