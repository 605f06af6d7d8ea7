"""gpu_knowledge.cloud_gpus: the GPUs each AKS VM size and EKS instance type carries, each family with its public
source, consistent with the product, architecture and NVSwitch tables, and with the example stacks."""

from __future__ import annotations

import pytest

from fleetspec.load import load_stack_file
from gpu_knowledge import cloud_gpus, compat, compat_data, gpu_products
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR


def test_every_family_cites_the_clouds_own_size_page():
    for family in cloud_gpus.FAMILIES:
        host = "https://learn.microsoft.com/" if family.cloud == "aks" else "https://docs.aws.amazon.com/ec2/"
        assert host in family.source, family.name
        assert family.rows and family.products, family.name
    assert {row.family for row in cloud_gpus.SIZES} == set(cloud_gpus.SOURCES)


def test_sizes_are_unique_and_spelled_as_the_clouds_spell_them():
    sizes = [row.size.lower() for row in cloud_gpus.SIZES]
    assert len(sizes) == len(set(sizes))
    for row in cloud_gpus.SIZES:
        family = next(f for f in cloud_gpus.FAMILIES if f.name == row.family)
        if family.cloud == "aks":
            assert row.size.startswith("Standard_N"), row.size  # NC and ND families only (NV is out of scope)
        else:
            assert row.size == row.size.lower() and row.size[0] in "pg", row.size  # EC2 P and G families
        assert row.gpus >= 1 and row.vcpus >= row.gpus


def test_each_row_agrees_with_the_architecture_equivalence_and_nvswitch_tables():
    for row in cloud_gpus.SIZES:
        assert row.architecture in compat_data.ARCHITECTURES, row.size
        for spelling in row.products:
            assert compat.architecture(spelling).value == row.architecture, (row.size, spelling)
            # every spelling of a row is one SKU for the prod gate too
            assert all(compat.same_gpu_product(spelling, other) for other in row.products), (row.size, spelling)
            known = gpu_products.is_nvswitch_system(spelling, row.gpus)
            assert known is None or known == row.nvswitch, (row.size, spelling)
        if row.nvswitch:
            assert row.gpus == 8, row.size  # HGX 8-GPU baseboards only


def test_lookups():
    h100 = cloud_gpus.aks_vm_size("standard_nd96isr_h100_v5")  # ARM compares VM sizes without case
    assert h100 is not None and (h100.product, h100.gpus, h100.nvswitch, h100.vcpus) == (
        "NVIDIA-H100-80GB-HBM3", 8, True, 96)
    assert h100.describe() == "8 x NVIDIA-H100-80GB-HBM3 with NVSwitch (hopper, 96 vCPUs)"
    assert cloud_gpus.eks_instance_type("p5en.48xlarge").architecture == "hopper"
    assert cloud_gpus.any_size("g6e.12xlarge").gpus == 4
    assert cloud_gpus.any_size("Standard_NC24ads_A100_v4").product == "NVIDIA-A100-80GB-PCIe"
    for unknown in ("Standard_NV36ads_A10_v5", "p5.4xlarge", "g6f.xlarge", "m7i.large", "", "  "):
        assert cloud_gpus.any_size(unknown) is None, unknown
    assert cloud_gpus.eks_instance_type("Standard_ND96isr_H100_v5") is None  # one cloud's table per lookup


def test_a_gpu_with_several_gfd_spellings_accepts_each():
    h200 = cloud_gpus.aks_vm_size("Standard_ND96isr_H200_v5")
    for spelling in ("NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e", "nvidia-h200-141gb-hbm3", "NVIDIA-H200-MIG-1g.18gb"):
        assert h200.carries(spelling), spelling
    assert not h200.carries("NVIDIA-H200-NVL")  # the PCIe card is another product
    a100 = cloud_gpus.aks_vm_size("Standard_NC24ads_A100_v4")
    assert a100.carries("NVIDIA-A100-PCIE-80GB") and a100.carries("NVIDIA-A100-80GB-PCIe")
    assert not a100.carries("NVIDIA-A100-SXM4-80GB")


def test_contradictions_name_each_declared_value_that_differs():
    row = cloud_gpus.aks_vm_size("Standard_ND96isr_H100_v5")
    wrong = cloud_gpus.contradictions(row, cloud_gpus.Declared("NVIDIA-H100-NVL", 1, False))
    assert wrong == ["gpuProduct NVIDIA-H100-NVL is not its GPU (NVIDIA-H100-80GB-HBM3)",
                     "gpusPerNode 1 is not its 8", "nvswitch false is not its true"]
    assert cloud_gpus.contradictions(row, cloud_gpus.Declared("NVIDIA-H100-80GB-HBM3", 8, True)) == []
    # a MIG layout: the device plugin counts MIG devices, not the size's GPUs
    assert cloud_gpus.contradictions(row, cloud_gpus.Declared("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 56, True,
                                                              mig=True)) == []
    assert cloud_gpus.contradictions(row, cloud_gpus.Declared(None, None, None)) == []


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_example_stacks_run_sizes_the_table_knows_and_declare_what_they_carry(stack):
    spec = load_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")
    for pool in spec.nodePools:
        sizes = ([pool.aks.vmSize] if pool.aks else (pool.eks.instanceTypes or []) if pool.eks else [])
        for size in sizes:
            row = cloud_gpus.any_size(size)
            assert row is not None, (stack, pool.name, size)
            declared = cloud_gpus.Declared(pool.gpuProduct, pool.gpusPerNode, pool.nvswitch)
            assert cloud_gpus.contradictions(row, declared) == [], (stack, pool.name, size)
