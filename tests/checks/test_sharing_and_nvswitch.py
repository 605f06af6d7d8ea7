"""Issue 7 point 11: no warning noise on healthy fleets. mig-timeslicing warns only where MIG is really in
use or GPUs are shared; NVSwitch systems are recognised by their GFD product names (gpu_knowledge/gpu_products.py)."""

from __future__ import annotations

import pytest

from checks import kube as k
from checks.preflight import run_preflight
from checks.results import Status
from gpu_knowledge import gpu_products
from fleetspec.model import FleetSpec
from tests.fakekube.real_cluster import unlabelled_aks_prod
from tests.fakekube.server import FakeKube

T4 = "aks-gput4-31415926-vmss000000"
A100 = "aks-gpua100-31415926-vmss000000"


@pytest.fixture
def fleet(fake: FakeKube) -> dict[str, list[str]]:
    return unlabelled_aks_prod(fake)


def result(kube: k.Kube, spec: FleetSpec, check_id: str, subject: str):
    [found] = [r for r in run_preflight(kube, spec) if r.id == check_id and r.subject == subject]
    return found


def test_gfd_defaults_are_no_mig(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    # Every node of the stack's pools says nvidia.com/mig.strategy=single (GFD under the operator's default)
    # and the MIG-capable ones nvidia.com/mig.config=all-disabled (the operator's default layout): whole GPUs.
    nodes = [n["metadata"]["labels"] for n in prod.objects("nodes")]
    assert {n["nvidia.com/mig.strategy"] for n in nodes} == {"single"}
    assert {n.get("nvidia.com/mig.config") for n in nodes} == {"all-disabled", None}
    found = result(kube, prod_spec, "mig-timeslicing", "cluster")
    assert found.status == Status.PASS, found.message


@pytest.mark.parametrize(("node", "change", "shown"), [
    (A100, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}}, "MIG layout nvidia.com/mig.config=all-1g.10gb"),
    (A100, {"status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}}}, "MIG devices advertised (nvidia.com/mig-1g.10gb)"),
    (A100, {"metadata": {"labels": {"nvidia.com/mig.strategy": "mixed"}}}, "nvidia.com/mig.strategy=mixed"),
    (A100, {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"}}},
     "MIG single: nvidia.com/gpu.product=NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"),
    (T4, {"metadata": {"labels": {"nvidia.com/gpu.replicas": "4"}}}, "nvidia.com/gpu.replicas=4"),
    (T4, {"metadata": {"labels": {"nvidia.com/gpu.sharing-strategy": "time-slicing"}}},
     "nvidia.com/gpu.sharing-strategy=time-slicing"),
    (T4, {"metadata": {"labels": {"nvidia.com/gpu.sharing-strategy": "mps"}}}, "nvidia.com/gpu.sharing-strategy=mps"),
])
def test_mig_or_sharing_in_use_warns(fleet: dict, fake: FakeKube, kube: k.Kube, prod_spec: FleetSpec, node: str,
                                     change: dict, shown: str) -> None:
    fake.update("nodes", node, change)
    found = result(kube, prod_spec, "mig-timeslicing", "cluster")
    assert found.status == Status.WARN and f"{node} {shown}" in found.message


# (GFD product, GPUs per node, an NVSwitch system?)
PRODUCTS = [
    ("NVIDIA-H100-80GB-HBM3", 8, True),
    ("NVIDIA-H200", 8, True),
    ("NVIDIA-H200-141GB-HBM3e", 8, True),
    ("NVIDIA-H200-141GB-HBM3", 8, True),
    ("NVIDIA-B200", 8, True),
    ("NVIDIA-A100-SXM4-80GB", 8, True),
    ("NVIDIA-A100-SXM4-40GB", 8, True),
    ("NVIDIA-H800", 8, True),
    ("NVIDIA-H20", 8, True),
    ("NVIDIA-GB200", 4, True),  # a GB200 compute tray: 4 GPUs on NVLink Switch trays
    ("nvidia-h100-80gb-hbm3", 8, True),  # any case
    ("NVIDIA-A100-SXM4-80GB", 4, False),  # HGX A100 4-GPU: NVLink without NVSwitch
    ("NVIDIA-H100-NVL", 2, False),  # PCIe cards with an NVLink bridge
    ("NVIDIA-H100-PCIe", 8, False),
    ("NVIDIA-H200-NVL", 4, False),
    ("NVIDIA-A100-80GB-PCIe", 8, False),
    ("Tesla-V100-SXM2-16GB", 8, False),  # not in the table: no guess from "SXM"
]


def test_nvswitch_systems_are_told_by_their_product_names(fleet: dict, fake: FakeKube, kube: k.Kube,
                                                          prod_spec: FleetSpec) -> None:
    """gpua100 is declared nvswitch: false; its nodes report one product after the other. Only NVSwitch
    systems earn the fabric-manager warning."""
    warned = []
    for product, gpus, _ in PRODUCTS:
        for node in fleet["gpua100"]:
            fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu.product": product,
                                                                "nvidia.com/gpu.count": str(gpus)}}})
        found = [r for r in run_preflight(kube, prod_spec) if r.id == "fabric-manager" and r.subject == "gpua100"]
        assert [r.status for r in found] in ([], [Status.WARN]), found
        if found:
            assert "is one of an NVSwitch system" in found[0].message
            warned.append((product, gpus))
    assert warned == [(product, gpus) for product, gpus, nvswitch in PRODUCTS if nvswitch]


def test_every_row_has_a_source_and_the_lookup_ignores_the_mig_suffix() -> None:
    assert all(row.source for row in gpu_products.PRODUCTS)
    assert len({row.product.lower() for row in gpu_products.PRODUCTS}) == len(gpu_products.PRODUCTS)
    assert gpu_products.is_nvswitch_system("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", 8) is True
    assert gpu_products.is_nvswitch_system("NVIDIA-H100-80GB-HBM3") is True  # count unknown: the full board
    assert gpu_products.is_nvswitch_system("NVIDIA-L40S", 8) is None
