"""Compatibility facts as data: CUDA, driver branches, GPU architectures, GPU Operator releases.

Each table names its public source: NVIDIA's documentation (the CUDA Toolkit release notes, the Data Center
Driver lifecycle pages, the GPU Operator's platform support and component matrix, the Fabric Manager user guide)
or NVIDIA's repositories on GitHub (gpu-operator, gpu-driver-container). When a table is refreshed, update its
source line too. ``gpu_knowledge.compat`` answers questions over these tables.
"""

from __future__ import annotations

from datetime import date

# ---------------------------------------------------------------- CUDA toolkit -> minimum driver

CUDA_MIN_DRIVER_SOURCE = (
    "CUDA Toolkit Release Notes, table 'CUDA Toolkit and Minimum Required Driver Version' (13.1 edition), "
    "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
)
# (major, minor, update) -> minimum Linux x86_64 driver. Update n of a toolkit is version X.Y.n.
CUDA_MIN_DRIVER: dict[tuple[int, int, int], str] = {
    (13, 1, 0): "590.44.01",
    (13, 0, 2): "580.95.05",
    (13, 0, 1): "580.82.07",
    (13, 0, 0): "580.65.06",
    (12, 9, 1): "575.57.08",
    (12, 9, 0): "575.51.03",
    (12, 8, 1): "570.124.06",
    (12, 8, 0): "570.26",
    (12, 6, 3): "560.35.05",
    (12, 6, 2): "560.35.03",
    (12, 6, 1): "560.35.03",
    (12, 6, 0): "560.28.03",
    (12, 5, 1): "555.42.06",
    (12, 5, 0): "555.42.02",
    (12, 4, 1): "550.54.15",
    (12, 4, 0): "550.54.14",
    (12, 3, 1): "545.23.08",
    (12, 3, 0): "545.23.06",
    (12, 2, 2): "535.104.05",
    (12, 2, 1): "535.86.09",
    (12, 2, 0): "535.54.03",
    (12, 1, 1): "530.30.02",
    (12, 1, 0): "530.30.02",
    (12, 0, 1): "525.85.12",
    (12, 0, 0): "525.60.13",
    (11, 8, 0): "520.61.05",
    (11, 7, 1): "515.48.07",
    (11, 7, 0): "515.43.04",
}
# Releases that never existed, so a config naming one is a typo rather than an unknown release.
CUDA_NEVER_RELEASED: dict[tuple[int, int], str] = {(12, 7): "there is no CUDA 12.7 (12.6 is followed by 12.8)"}

# ---------------------------------------------------------------- CUDA forward compatibility

FORWARD_COMPAT_SOURCE = (
    "CUDA Forward Compatibility, https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
)
# Which base driver branches run a cuda-compat package, by the highest (major, minor) it supports.
# "cuda-compat-13-x works on base drivers 535+, 570+ and 580+"; 12-9 on 535 and 570; <= 12-8 on 535.
# "Branches not listed are end of life and not supported targets"; New Feature Branches never are.
FORWARD_COMPAT_BRANCHES: tuple[tuple[tuple[int, int], frozenset[int]], ...] = (
    ((13, 99), frozenset({535, 570, 580})),
    ((12, 9), frozenset({535, 570})),
    ((12, 8), frozenset({535})),
)

# ---------------------------------------------------------------- driver branch lifecycle

BRANCH_SOURCE = (
    "Supported Drivers and CUDA Toolkit Versions, "
    "https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html"
)
LTSB = "LTSB"
PRODUCTION = "production"
NEW_FEATURE = "new feature"
# branch -> (type, end of life, highest CUDA major without a compat package)
BRANCHES: dict[int, tuple[str, date, int]] = {
    535: (LTSB, date(2026, 6, 30), 12),
    580: (LTSB, date(2028, 6, 30), 13),
    595: (PRODUCTION, date(2027, 3, 31), 13),
    610: (NEW_FEATURE, date(2026, 8, 31), 13),
    620: (LTSB, date(2029, 9, 30), 13),
}

# ---------------------------------------------------------------- GPU architecture support

ARCH_SOURCE = (
    "CUDA Toolkit, Driver, and Architecture Matrix, "
    "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html; "
    "minimum drivers derived from the architecture's first CUDA release and the toolkit table"
)
# architecture -> (minimum driver, last supporting branch or None while support is ongoing)
ARCHITECTURES: dict[str, tuple[str, int | None]] = {
    "blackwell": ("570.26", None),  # first CUDA 12.8
    "hopper": ("520.61.05", None),  # first CUDA 11.8
    "ada": ("520.61.05", None),  # first CUDA 11.8
    "ampere": ("450.36.06", None),  # first CUDA 11.0
    "turing": ("410", None),  # first CUDA 10.0
    "volta": ("384", 580),  # R580 is the last branch for Volta, Pascal and Maxwell
    "pascal": ("367", 580),
    "maxwell": ("340", 580),
    "kepler": ("340", 470),
}

SKU_SOURCE = "GPU Operator platform support, cloud-native-docs gpu-operator/platform-support.rst"
# Product model token -> a stricter minimum than its architecture's (the operator's platform notes).
SKU_MIN_DRIVER: dict[str, str] = {
    "B200": "570.133.20",  # "HGX B200 needs driver container >= 570.133.20"
    "RTX-PRO-6000": "575.57.08",  # RTX PRO 6000 Blackwell Server Edition
}

# GFD nvidia.com/gpu.product strings are "<vendor>-<model>-<variant>..." (NVIDIA-H100-80GB-HBM3,
# Tesla-T4, A100-SXM4-40GB-MIG-1g.5gb). The model token decides the architecture.
PRODUCT_ARCHITECTURE: dict[str, str] = {
    **dict.fromkeys(("B100", "B200", "B300", "GB200", "GB300", "RTX-PRO-6000"), "blackwell"),
    **dict.fromkeys(("H100", "H200", "H800", "H20", "GH200"), "hopper"),
    **dict.fromkeys(("L4", "L40", "L40S", "L20", "RTX-6000-ADA"), "ada"),
    **dict.fromkeys(("A100", "A800", "A10", "A10G", "A30", "A40", "A16", "A2", "RTX-A6000"), "ampere"),
    **dict.fromkeys(("T4", "T4G"), "turing"),
    **dict.fromkeys(("V100", "V100S"), "volta"),
    **dict.fromkeys(("P100", "P40", "P4", "P6"), "pascal"),
    **dict.fromkeys(("M60", "M40", "M10", "M6"), "maxwell"),
    **dict.fromkeys(("K80", "K40", "K20"), "kepler"),
}

# ---------------------------------------------------------------- one GPU, several GFD names

PRODUCT_EQUIVALENTS_SOURCE = (
    "NVML nvmlDeviceGetName, https://docs.nvidia.com/deploy/nvml-api/ (GFD's nvidia.com/gpu.product is that name "
    "with dashes); the spellings one SKU reports across driver and VBIOS releases, each with its source, are the "
    "rows of gpu_knowledge/gpu_products.py"
)
# Groups of GFD nvidia.com/gpu.product names of one and the same SKU (compared without case and without a MIG
# profile suffix). Only spelling variants of one board belong here: a PCIe card and the SXM module of the same
# chip, or two memory sizes, are different products for the prod gate (topology, power, memory differ).
PRODUCT_EQUIVALENTS: tuple[frozenset[str], ...] = (
    frozenset({"NVIDIA-A100-PCIE-80GB", "NVIDIA-A100-80GB-PCIe"}),  # the A100 80GB PCIe card
    frozenset({"NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e", "NVIDIA-H200-141GB-HBM3"}),  # the HGX H200 SXM module
    frozenset({"NVIDIA-B200", "NVIDIA-B200-180GB-HBM3e"}),  # the HGX B200 SXM module
)

# ---------------------------------------------------------------- GPU Operator release -> drivers

OPERATOR_SOURCE = "GPU Operator component matrix, cloud-native-docs gpu-operator/life-cycle-policy.rst"
# Exact release ("26.7.0") -> driver versions its matrix lists. Each row is keyed to the releases the doc
# it was read from covers: the 24.9 row comes from the 24.9.2 doc and the 25.3 row from the 25.3.3 doc, so
# they answer for those releases only (24.9.0 or 25.3.1 may list fewer drivers: UNKNOWN). The 26.3 doc
# gives one row for 26.3.0-26.3.3.
_OPERATOR_26_3 = (
    "595.71.05", "595.58.03", "590.48.01", "580.159.04", "580.159.03", "580.126.20",
    "570.211.01", "535.309.01", "535.288.01",
)
OPERATOR_DRIVERS: dict[str, tuple[str, ...]] = {
    "24.9.2": ("570.86.15", "565.57.01", "560.35.03", "550.144.03", "550.127.08", "535.230.02", "535.216.03"),
    "25.3.3": (
        "580.82.07", "580.65.06", "575.57.08", "570.172.08", "570.158.01", "570.148.08",
        "550.163.01", "535.261.03", "535.247.01",
    ),
    "25.10.0": ("580.95.05", "580.82.07", "575.57.08", "570.195.03", "550.163.01", "535.274.02"),
    "25.10.1": ("580.105.08", "580.95.05", "580.82.07", "575.57.08", "570.195.03", "550.163.01", "535.274.02"),
    **dict.fromkeys(("26.3.0", "26.3.1", "26.3.2", "26.3.3"), _OPERATOR_26_3),
    "26.7.0": ("610.57.04", "595.91.07", "580.173.02", "535.309.01"),
}
# Release line ("24.6") -> drivers, for lines whose doc gives one row for every release of the line
# ("24.6.x": the doc names no patch release, so the row is taken to hold for the whole line).
OPERATOR_LINE_DRIVERS: dict[str, tuple[str, ...]] = {
    "24.6": ("550.90.07", "535.183.06"),
}

# ---------------------------------------------------------------- GPU Operator release -> DCGM

DCGM_SOURCE = (
    "GPU Operator chart, deployments/gpu-operator/values.yaml dcgmExporter.version at each release tag (NVIDIA/"
    "gpu-operator); the exporter's image tag is <DCGM>-<exporter>-<os>. DCGM itself supports drivers R450 and "
    "later: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html"
)
# Release -> the DCGM version of the DCGM Exporter its chart ships: the DCGM NVIDIA released with (and validated
# against) the drivers that release lists (OPERATOR_DRIVERS). 24.6.0-24.6.2 ship the same exporter.
OPERATOR_DCGM: dict[str, str] = {
    **dict.fromkeys(("24.6.0", "24.6.1", "24.6.2"), "3.3.7"),
    "24.9.2": "3.3.9",
    "25.3.3": "4.3.1",
    "25.10.0": "4.4.1",
    "25.10.1": "4.4.2",
    **dict.fromkeys(("26.3.0", "26.3.1"), "4.5.1"),
    **dict.fromkeys(("26.3.2", "26.3.3"), "4.5.3"),
    "26.7.0": "4.6.0",
}

# ---------------------------------------------------------------- Fabric Manager

FABRIC_MANAGER_SOURCE = (
    "Fabric Manager user guide (FM aborts when the loaded driver stack is not compatible), "
    "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html; GDS troubleshooting "
    "('install the same version of Fabric Manager as the CUDA driver'); gpu-driver-container install.sh "
    "pins nvidia-fabricmanager=${DRIVER_VERSION}"
)

# ---------------------------------------------------------------- GPU Operator release -> node operating systems

OPERATOR_OS_SOURCE = (
    "GPU Operator platform support, cloud-native-docs gpu-operator/platform-support.rst, section 'Supported "
    "Operating Systems and Kubernetes Platforms' at docs tags gpu-operator-v24.9-8, gpu-operator-v25.10, "
    "gpu-operator-v26.3 and gpu-operator-v26.7-1; NVIDIA/gpu-driver-container ships driver images for "
    "ubuntu22.04, ubuntu24.04, ubuntu26.04, rhel8, rhel9 and rhel10 only"
)
# Release line -> operating systems the operator's containerized driver supports on its nodes. The 26.3 row
# is the docs as released (2026-03-20; Ubuntu 20.04 was dropped from later 26.3 docs on 2026-05-21).
OPERATOR_DRIVER_OS: dict[str, frozenset[str]] = {
    "24.9": frozenset({"ubuntu20.04", "ubuntu22.04", "rhel8"}),
    "25.10": frozenset({"ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "rhel8", "rhel9"}),
    "26.3": frozenset({"ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "rhel8", "rhel9", "rhel10", "rocky"}),
    "26.7": frozenset({"ubuntu22.04", "ubuntu24.04", "ubuntu26.04", "rhel8", "rhel9", "rhel10", "rocky"}),
}
# Operating systems for which no operator release ships a driver container (no row of any release lists
# them, and the driver-container repository has no image for them): NVIDIA/gpu-operator issues #686, #946,
# #1492 (Amazon Linux, Bottlerocket), NVIDIA/gpu-driver-container #416 and commit 7a164e30 (Azure Linux
# removed as unsupported, 2026-04-28).
NO_DRIVER_CONTAINER_OS: dict[str, str] = {
    "amazonlinux2": "Amazon Linux 2",
    "amazonlinux2023": "Amazon Linux 2023",
    "bottlerocket": "Bottlerocket",
    "azurelinux": "Azure Linux",
}
