"""The GPUs a cloud VM size or instance type carries: AKS (Azure NC and ND families) and EKS (EC2 P and G families).

Each family names its public source, the cloud's own size page, in ``source``; when a family is refreshed, update
its source line too. A row holds what the size carries: the GPU product as GPU Feature Discovery names it
(``nvidia.com/gpu.product``; every spelling one SKU reports, as ``gpu_knowledge.gpu_products`` and
``compat_data.PRODUCT_EQUIVALENTS`` list them), GPUs per node, whether the GPUs sit on an NVSwitch baseboard
(HGX 8-GPU systems; PCIe and NVL cards never do), the GPU architecture (``compat_data.ARCHITECTURES``' names) and
the vCPUs (what a quota is counted in).

Whether a size is an NVSwitch system follows from the board its source names: the 8-GPU HGX A100, H100, H200 and
B200 boards carry NVSwitches (NVIDIA Fabric Manager User Guide, its list of NVSwitch systems; the rows of
``gpu_knowledge.gpu_products``), V100 SXM2 boards (p3) link their GPUs directly, PCIe and NVL cards never do.

Only sizes the sources list are here: a size not in the table is unknown, never guessed (NV families, fractional
GPU sizes, retired series and non-NVIDIA accelerators are left out). Pure data and two lookups; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_knowledge import compat


@dataclass(frozen=True)
class CloudGpu:
    size: str  # the VM size (AKS vmSize) or instance type (EKS instanceTypes), as the cloud spells it
    products: tuple[str, ...]  # GFD nvidia.com/gpu.product spellings of its GPU; the first is the usual one
    gpus: int  # GPUs per node
    nvswitch: bool  # an HGX/DGX NVSwitch system (Fabric Manager must match the driver)
    architecture: str  # compat_data.ARCHITECTURES key
    vcpus: int
    family: str  # the family whose source line states this row

    @property
    def product(self) -> str:
        return self.products[0]

    def carries(self, product: str) -> bool:
        """Whether ``product`` (a GFD name, any case, MIG profile suffix aside) is this size's GPU."""
        return any(compat.same_gpu_product(product, known) for known in self.products)

    def describe(self) -> str:
        """What the size carries, in words: ``8 x NVIDIA-H100-80GB-HBM3 with NVSwitch (hopper, 96 vCPUs)``."""
        switch = "with NVSwitch" if self.nvswitch else "without NVSwitch"
        return f"{self.gpus} x {self.product} {switch} ({self.architecture}, {self.vcpus} vCPUs)"


@dataclass(frozen=True)
class Family:
    name: str
    cloud: str  # "aks" | "eks"
    source: str
    rows: tuple[tuple[str, int, int], ...]  # (size, GPUs, vCPUs)
    products: tuple[str, ...]
    nvswitch: bool
    architecture: str


# GFD spellings, one tuple per SKU (the first is the one the example stacks and most nodes show).
T4 = ("Tesla-T4",)  # NVML "Tesla T4"
V100_SXM2_16 = ("Tesla-V100-SXM2-16GB",)  # NVML "Tesla V100-SXM2-16GB"
V100_SXM2_32 = ("Tesla-V100-SXM2-32GB",)
A10G = ("NVIDIA-A10G",)
A100_PCIE_80 = ("NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-PCIE-80GB")  # compat_data.PRODUCT_EQUIVALENTS
A100_SXM4_40 = ("NVIDIA-A100-SXM4-40GB",)
A100_SXM4_80 = ("NVIDIA-A100-SXM4-80GB",)
L4 = ("NVIDIA-L4",)
L40S = ("NVIDIA-L40S",)
H100_NVL = ("NVIDIA-H100-NVL",)
H100_SXM5 = ("NVIDIA-H100-80GB-HBM3",)
H200_SXM5 = ("NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e", "NVIDIA-H200-141GB-HBM3")  # compat_data.PRODUCT_EQUIVALENTS
B200_SXM = ("NVIDIA-B200", "NVIDIA-B200-180GB-HBM3e")

_AZURE = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
_NC = f"Microsoft Learn, NC family VM size series, {_AZURE}nc-family: "
_ND = f"Microsoft Learn, ND family VM size series, {_AZURE}nd-family: "
_AWS = ("Amazon EC2 instance types, accelerated computing specifications, "
        "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; ")

FAMILIES: tuple[Family, ...] = (
    # ---------------------------------------------------------------- AKS: Azure NC and ND families
    Family("NCasT4_v3", "aks", _NC + "NCasT4_v3 series (T4)",
           (("Standard_NC4as_T4_v3", 1, 4), ("Standard_NC8as_T4_v3", 1, 8), ("Standard_NC16as_T4_v3", 1, 16),
            ("Standard_NC64as_T4_v3", 4, 64)),
           T4, False, "turing"),
    Family("NC_A100_v4", "aks", _NC + "NC_A100_v4 series (A100 PCIe 80GB)",
           (("Standard_NC24ads_A100_v4", 1, 24), ("Standard_NC48ads_A100_v4", 2, 48),
            ("Standard_NC96ads_A100_v4", 4, 96)),
           A100_PCIE_80, False, "ampere"),
    Family("NCads_H100_v5", "aks", _NC + "NCads_H100_v5 series (H100 NVL 94GB, PCIe cards)",
           (("Standard_NC40ads_H100_v5", 1, 40), ("Standard_NC80adis_H100_v5", 2, 80)),
           H100_NVL, False, "hopper"),
    Family("ND_A100_v4", "aks", _ND + f"ND_A100_v4 series (8 A100 40GB SXM4, NVLink 3.0), {_AZURE}ndasra100v4-series",
           (("Standard_ND96asr_v4", 8, 96),),
           A100_SXM4_40, True, "ampere"),
    Family("NDm_A100_v4", "aks", _ND + "NDm_A100_v4 series (8 A100 80GB SXM4, NVLink 3.0)",
           (("Standard_ND96amsr_A100_v4", 8, 96),),
           A100_SXM4_80, True, "ampere"),
    Family("ND_H100_v5", "aks", _ND + f"ND_H100_v5 series (8 H100 SXM, NVLink 4.0), {_AZURE}ndh100v5-series",
           (("Standard_ND96isr_H100_v5", 8, 96),),
           H100_SXM5, True, "hopper"),
    Family("ND_H200_v5", "aks", _ND + "ND_H200_v5 series (8 H200 141GB)",
           (("Standard_ND96isr_H200_v5", 8, 96),),
           H200_SXM5, True, "hopper"),
    # ---------------------------------------------------------------- EKS: EC2 P and G families
    Family("p3", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p3/ (V100 SXM2, NVLink, no NVSwitch)",
           (("p3.2xlarge", 1, 8), ("p3.8xlarge", 4, 32), ("p3.16xlarge", 8, 64)),
           V100_SXM2_16, False, "volta"),
    Family("p3dn", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p3/ (V100 SXM2 32GB)",
           (("p3dn.24xlarge", 8, 96),),
           V100_SXM2_32, False, "volta"),
    Family("p4d", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p4/ (8 A100 40GB, NVSwitch)",
           (("p4d.24xlarge", 8, 96),),
           A100_SXM4_40, True, "ampere"),
    Family("p4de", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p4/ (8 A100 80GB, NVSwitch)",
           (("p4de.24xlarge", 8, 96),),
           A100_SXM4_80, True, "ampere"),
    Family("p5", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p5/ (8 H100, NVSwitch)",
           (("p5.48xlarge", 8, 192),),
           H100_SXM5, True, "hopper"),
    Family("p5e", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p5/ (8 H200, NVSwitch)",
           (("p5e.48xlarge", 8, 192), ("p5en.48xlarge", 8, 192)),
           H200_SXM5, True, "hopper"),
    Family("p6-b200", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/p6/ (8 B200, NVSwitch)",
           (("p6-b200.48xlarge", 8, 192),),
           B200_SXM, True, "blackwell"),
    Family("g4dn", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/g4/ (T4)",
           (("g4dn.xlarge", 1, 4), ("g4dn.2xlarge", 1, 8), ("g4dn.4xlarge", 1, 16), ("g4dn.8xlarge", 1, 32),
            ("g4dn.16xlarge", 1, 64), ("g4dn.12xlarge", 4, 48), ("g4dn.metal", 8, 96)),
           T4, False, "turing"),
    Family("g5", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/g5/ (A10G)",
           (("g5.xlarge", 1, 4), ("g5.2xlarge", 1, 8), ("g5.4xlarge", 1, 16), ("g5.8xlarge", 1, 32),
            ("g5.16xlarge", 1, 64), ("g5.12xlarge", 4, 48), ("g5.24xlarge", 4, 96), ("g5.48xlarge", 8, 192)),
           A10G, False, "ampere"),
    Family("g6", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/g6/ (L4)",
           (("g6.xlarge", 1, 4), ("g6.2xlarge", 1, 8), ("g6.4xlarge", 1, 16), ("g6.8xlarge", 1, 32),
            ("g6.16xlarge", 1, 64), ("g6.12xlarge", 4, 48), ("g6.24xlarge", 4, 96), ("g6.48xlarge", 8, 192)),
           L4, False, "ada"),
    Family("g6e", "eks", _AWS + "https://aws.amazon.com/ec2/instance-types/g6e/ (L40S)",
           (("g6e.xlarge", 1, 4), ("g6e.2xlarge", 1, 8), ("g6e.4xlarge", 1, 16), ("g6e.8xlarge", 1, 32),
            ("g6e.16xlarge", 1, 64), ("g6e.12xlarge", 4, 48), ("g6e.24xlarge", 4, 96), ("g6e.48xlarge", 8, 192)),
           L40S, False, "ada"),
)

SIZES: tuple[CloudGpu, ...] = tuple(
    CloudGpu(size, family.products, gpus, family.nvswitch, family.architecture, vcpus, family.name)
    for family in FAMILIES for size, gpus, vcpus in family.rows
)
SOURCES: dict[str, str] = {family.name: family.source for family in FAMILIES}

# Azure VM size names are case-insensitive (ARM compares them so); EC2 instance types are lower case.
_AKS = {row.size.lower(): row for row in SIZES if row.size.startswith("Standard_")}
_EKS = {row.size: row for row in SIZES if not row.size.startswith("Standard_")}

TABLE = "gpu_knowledge.cloud_gpus"  # how a message names this table


def aks_vm_size(vm_size: str) -> CloudGpu | None:
    """The row of an Azure VM size (any case); None when the table does not know it."""
    return _AKS.get(vm_size.strip().lower())


def eks_instance_type(instance_type: str) -> CloudGpu | None:
    """The row of an EC2 instance type; None when the table does not know it."""
    return _EKS.get(instance_type.strip())


def any_size(size: str) -> CloudGpu | None:
    """The row of a VM size or an instance type, whichever cloud spells it (a node's
    ``node.kubernetes.io/instance-type`` label holds either)."""
    return aks_vm_size(size) or eks_instance_type(size)


@dataclass(frozen=True)
class Declared:
    """A pool's declared hardware, as the stack states it."""

    gpu_product: str | None
    gpus_per_node: int | None
    nvswitch: bool | None
    mig: bool = False  # a MIG layout: the device plugin counts MIG devices, so GPUs per node is not compared


def contradictions(row: CloudGpu, declared: Declared) -> list[str]:
    """Each way ``declared`` contradicts what ``row``'s size carries, in words; empty when it agrees (what the
    declaration leaves unset is not compared)."""
    out = []
    if declared.gpu_product is not None and not row.carries(declared.gpu_product):
        spellings = " or ".join(row.products)
        out.append(f"gpuProduct {declared.gpu_product} is not its GPU ({spellings})")
    if declared.gpus_per_node is not None and not declared.mig and declared.gpus_per_node != row.gpus:
        out.append(f"gpusPerNode {declared.gpus_per_node} is not its {row.gpus}")
    if declared.nvswitch is not None and declared.nvswitch != row.nvswitch:
        out.append(f"nvswitch {str(declared.nvswitch).lower()} is not its {str(row.nvswitch).lower()}")
    return out
