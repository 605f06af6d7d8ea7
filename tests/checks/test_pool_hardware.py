"""preflight's pool-hardware (issue 30): each pool's declared GPU product and count against its nodes' GFD labels,
and, where gpu_knowledge.cloud_gpus knows it, the node's own size; an EKS pool whose launch template sets the type
is judged here only (the pack cannot see it). Read through the inventory from the fake API."""

from __future__ import annotations

from checks import cluster
from checks import kube as k
from checks.inventory import read_inventory
from checks.results import Status
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.fakekube.server import FakeKube

A100 = "aks-gpua100-12345678-vmss000000"
A100_OTHER = "aks-gpua100-12345678-vmss000001"


def _results(kube: k.Kube, spec: FleetSpec) -> dict[str, tuple[Status, str]]:
    return {f.subject: (f.status, f.message) for f in cluster.check_pool_hardware(read_inventory(kube, spec))}


def _label(fake: FakeKube, node: str, **values: str | None) -> None:
    fake.update("nodes", node, {"metadata": {"labels": values}})


def test_the_steady_state_passes_every_pool(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    results = _results(kube, prod_spec)
    assert set(results) == {p.name for p in prod_spec.nodePools}
    assert {status for status, _ in results.values()} == {Status.PASS}
    assert "show 8 x NVIDIA-H100-80GB-HBM3, as declared" in results["gpuh100"][1]


def test_another_gpu_or_count_than_declared_fails_naming_node_declared_and_seen(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _label(prod, A100, **{labels.GPU_PRODUCT: "NVIDIA-H100-NVL"})
    _label(prod, A100_OTHER, **{labels.GPU_COUNT: "2"})
    status, message = _results(kube, prod_spec)["gpua100"]
    assert status == Status.FAIL
    assert "declared gpuProduct NVIDIA-A100-80GB-PCIe, gpusPerNode 1, nvswitch false" in message
    assert f"{A100} shows {labels.GPU_PRODUCT}=NVIDIA-H100-NVL" in message
    assert f"{A100_OTHER} shows {labels.GPU_COUNT}=2" in message
    assert prod.writes == 0


def test_another_gfd_spelling_of_the_declared_gpu_passes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _label(prod, A100, **{labels.GPU_PRODUCT: "NVIDIA-A100-PCIE-80GB"})
    assert _results(kube, prod_spec)["gpua100"][0] == Status.PASS


def test_a_node_gfd_has_not_labelled_yet_warns_not_passes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _label(prod, A100, **{labels.GPU_PRODUCT: None, labels.GPU_COUNT: None})
    status, message = _results(kube, prod_spec)["gpua100"]
    assert status == Status.WARN
    assert A100 in message and "not labelled by GPU Feature Discovery yet" in message


def test_a_count_that_is_not_a_number_warns_naming_it(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _label(prod, A100, **{labels.GPU_COUNT: "eight"})
    status, message = _results(kube, prod_spec)["gpua100"]
    assert status == Status.WARN and f"{A100} ({labels.GPU_COUNT}='eight'): not a GPU count" in message


def test_a_node_of_another_size_fails_naming_what_the_size_carries(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _label(prod, A100, **{labels.INSTANCE_TYPE: "Standard_NC48ads_A100_v4"})
    status, message = _results(kube, prod_spec)["gpua100"]
    assert status == Status.FAIL
    assert f"{A100} is a Standard_NC48ads_A100_v4, which carries 2 x NVIDIA-A100-80GB-PCIe" in message
    assert "gpusPerNode 1 is not its 2" in message


def test_a_launch_template_pool_is_judged_by_its_nodes_instance_type(
        eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    h100 = next(p for p in eks_spec.nodePools if p.eks and p.eks.launchTemplate and not p.eks.instanceTypes)
    nodes = sorted(n["metadata"]["name"] for n in eks.objects("nodes")
                   if n["metadata"]["labels"].get(labels.EKS_NODE_GROUP, "").startswith(h100.name))
    assert _results(kube, eks_spec)[h100.name][0] == Status.PASS  # p5.48xlarge: 8 H100 SXM on NVSwitch
    # a p4d (8 A100 40GB) behind the template, GFD not run yet: the size alone shows the mismatch
    _label(eks, nodes[0], **{labels.INSTANCE_TYPE: "p4d.24xlarge", labels.GPU_PRODUCT: None})
    status, message = _results(kube, eks_spec)[h100.name]
    assert status == Status.FAIL and "is a p4d.24xlarge, which carries 8 x NVIDIA-A100-SXM4-40GB" in message
    # a type the table does not know, and a node without the label: the size was not judged
    _label(eks, nodes[0], **{labels.INSTANCE_TYPE: "p9.huge", labels.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    _label(eks, nodes[1], **{labels.INSTANCE_TYPE: None})
    status, message = _results(kube, eks_spec)[h100.name]
    assert status == Status.WARN and "p9.huge" in message and f"no {labels.INSTANCE_TYPE}" in message
    assert "gpu_knowledge.cloud_gpus" in message
