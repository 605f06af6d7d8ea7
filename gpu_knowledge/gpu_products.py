"""GPU products as GPU Feature Discovery names them, and which of them sit in NVSwitch systems.

GFD's ``nvidia.com/gpu.product`` is the NVML device name with spaces turned into dashes
(``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``; NVIDIA/k8s-device-plugin
``internal/lm/resource.go``); under the MIG ``single`` strategy GFD appends the MIG profile
(``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``). The same GPU can report more than one name across driver and
VBIOS releases (an HGX H200 shows up as ``NVIDIA-H200`` and as ``NVIDIA-H200-141GB-HBM3e``), so every
spelling seen in a source gets its own row.

An NVSwitch system needs Fabric Manager, which must match the driver exactly (NVIDIA Fabric Manager User
Guide, "Fabric Manager and driver version compatibility"). SXM modules sit on an NVSwitch baseboard only in the 8-GPU HGX/DGX systems: the 4-GPU HGX
A100/H100 boards link their GPUs directly (no NVSwitch), so a row carries the smallest GPU count per node
of its NVSwitch system. GB200 nodes (4 GPUs per compute tray) reach NVLink Switch trays, which also run
Fabric Manager (with NVLSM on NVLink5). PCIe and NVL cards (H100 PCIe, H100 NVL, H200 NVL, A100 PCIe) are
never NVSwitch systems: their NVLink, if any, is a bridge between two or four cards.

Pure data and one lookup; no I/O. Match is case-insensitive on the whole name (after the MIG suffix).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProduct:
    product: str  # GFD nvidia.com/gpu.product
    nvswitch_from_gpus: int | None  # NVSwitch system when a node has at least this many GPUs; None: never
    source: str


# Sources, by the short names used in the rows:
#   go-nvml:   NVIDIA/go-nvml pkg/nvml/mock/shared/gpus/{a100,h100,h200,b200}.go (NVIDIA's NVML mock: the
#              device names real GPUs report), turned into GFD names by the dash rule above.
#   fm-guide:  NVIDIA Fabric Manager User Guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide),
#              its list of NVSwitch systems: HGX/DGX A100, H100, H200, B200, and GB200 NVL72 (FM with NVLSM).
#   observed:  the GFD label as published in public cluster configs and node dumps in public GitHub
#              repositories (2026), where NVML's name differs from go-nvml's mock or go-nvml has none.
#   torch:     the device name (= NVML name) PyTorch reports, as published in public benchmark code.
PRODUCTS: tuple[GpuProduct, ...] = (
    # Ampere: HGX/DGX A100 8-GPU has six NVSwitches; the 4-GPU HGX A100 board has none.
    GpuProduct("NVIDIA-A100-SXM4-40GB", 8, "go-nvml a100.go A100_SXM4_40GB; fm-guide (DGX A100)"),
    GpuProduct("NVIDIA-A100-SXM4-80GB", 8, "go-nvml a100.go A100_SXM4_80GB; fm-guide"),
    GpuProduct("NVIDIA-A100-PCIE-40GB", None, "go-nvml a100.go A100_PCIE_40GB (PCIe card)"),
    GpuProduct("NVIDIA-A100-PCIE-80GB", None, "go-nvml a100.go A100_PCIE_80GB (PCIe card)"),
    GpuProduct("NVIDIA-A100-80GB-PCIe", None, "observed (public cluster test scripts: the A100 80GB PCIe card)"),
    # Hopper: HGX H100/H200/H800/H20 8-GPU boards carry four third-generation NVSwitches.
    GpuProduct("NVIDIA-H100-80GB-HBM3", 8, "go-nvml h100.go H100_SXM5_80GB; fm-guide (HGX H100)"),
    GpuProduct("NVIDIA-H100-PCIe", None, "observed (PCIe card)"),
    GpuProduct("NVIDIA-H100-NVL", None, "observed (PCIe card pairs with an NVLink bridge, no NVSwitch)"),
    GpuProduct("NVIDIA-H200", 8, "observed (HGX H200, e.g. AWS p5en: nvidia-smi 'NVIDIA H200'); fm-guide"),
    GpuProduct("NVIDIA-H200-141GB-HBM3e", 8, "go-nvml h200.go H200_SXM5_141GB; fm-guide"),
    GpuProduct("NVIDIA-H200-141GB-HBM3", 8, "observed (public cluster test scripts); same HGX H200 board"),
    GpuProduct("NVIDIA-H200-NVL", None, "observed (nvidia-smi 'NVIDIA H200 NVL': PCIe card, NVLink bridge)"),
    GpuProduct("NVIDIA-H800", 8, "torch 'NVIDIA H800' (HGX H800 8-GPU, the export variant of HGX H100)"),
    GpuProduct("NVIDIA-H20", 8, "torch 'NVIDIA H20' (HGX H20 8-GPU board)"),
    # Blackwell: HGX B200 8-GPU has two fifth-generation NVSwitch chips; GB200 nodes reach NVLink Switch trays.
    GpuProduct("NVIDIA-B200", 8, "observed (HGX B200 node labels); fm-guide"),
    GpuProduct("NVIDIA-B200-180GB-HBM3e", 8, "go-nvml b200.go B200_SXM5_180GB; fm-guide"),
    GpuProduct("NVIDIA-GB200", 1, "observed (GB200 NVL72 compute trays, 4 GPUs each); fm-guide (FM + NVLSM)"),
)

_BY_NAME = {row.product.lower(): row for row in PRODUCTS}


def base_product(product: str) -> str:
    """The product without the MIG profile GFD appends under the ``single`` strategy."""
    head, sep, _ = product.partition("-MIG-")
    return head if sep else product


def lookup(product: str) -> GpuProduct | None:
    """The table's row for a GFD product name (MIG suffix ignored, any case); None when not in the table."""
    return _BY_NAME.get(base_product(product).lower())


def is_nvswitch_system(product: str, gpus_per_node: int | None = None) -> bool | None:
    """True for a product that sits in an NVSwitch system with this many GPUs per node (unknown count:
    assume the full board), False for one that never does, None for a product not in the table."""
    row = lookup(product)
    if row is None:
        return None
    if row.nvswitch_from_gpus is None:
        return False
    return gpus_per_node is None or gpus_per_node >= row.nvswitch_from_gpus
