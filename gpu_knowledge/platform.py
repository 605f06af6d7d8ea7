"""Which operating system a pool's nodes run, read from the fields that decide it: AKS ``osSku``, EKS
``amiType`` (or, for a custom AMI, the OS declared with the launch template), or the OS an existing
cluster's pool declares. Used by the spec, the rendered pool labels and the policy pack alike."""

from __future__ import annotations

from typing import Literal

# Operating systems by the names the GPU Operator's driver images use (ubuntu22.04, rhel9, ...), plus the
# ones no operator release supports, so a pool on them can be refused by name.
OsId = Literal[
    "ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "ubuntu26.04", "rhel8", "rhel9", "rhel10", "rocky",
    "amazonlinux2", "amazonlinux2023", "bottlerocket", "azurelinux",
]

# AKS osSku -> OS. "Ubuntu" lets AKS pick the Ubuntu release by the pool's Kubernetes version
# (https://learn.microsoft.com/azure/aks/cluster-configuration#os-sku), so it is one of these two.
UBUNTU_BY_KUBERNETES_VERSION = ("ubuntu22.04", "ubuntu24.04")
AKS_OS_SKU: dict[str, str] = {
    "Ubuntu2204": "ubuntu22.04",
    "Ubuntu2404": "ubuntu24.04",
    "AzureLinux": "azurelinux",
    "AzureLinux3": "azurelinux",
}

# EKS amiType -> OS (https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html#AmazonEKS-Type-Nodegroup-amiType).
# A node group on a custom AMI (the launch template's ImageId) has no amiType of its own.
EKS_AMI_OS: dict[str, str] = {
    "AL2023_x86_64_STANDARD": "amazonlinux2023",
    "AL2023_x86_64_NVIDIA": "amazonlinux2023",
    "BOTTLEROCKET_x86_64": "bottlerocket",
    "BOTTLEROCKET_x86_64_NVIDIA": "bottlerocket",
}


def aks_os(os_sku: str) -> tuple[str, ...]:
    """The operating systems an AKS pool of this osSku may run (two for plain "Ubuntu")."""
    if os_sku == "Ubuntu":
        return UBUNTU_BY_KUBERNETES_VERSION
    return (AKS_OS_SKU[os_sku],) if os_sku in AKS_OS_SKU else ()


def eks_os(ami_type: str | None, declared: str | None) -> tuple[str, ...]:
    """The operating system of an EKS node group: by its amiType, else the custom AMI's declared OS."""
    if ami_type:
        return (EKS_AMI_OS[ami_type],) if ami_type in EKS_AMI_OS else ()
    return (declared,) if declared else ()
