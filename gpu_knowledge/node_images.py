"""Which node images carry NVIDIA's driver, per cloud: EKS's NVIDIA AMIs, and AKS ``gpuProfile.driver``.

Read by the stack model (an image-owned EKS pool must be on an NVIDIA AMI), the renderers (AKS's driver setting)
and the resource facts (whether a cloud pool's image brings the driver)."""

from __future__ import annotations

from typing import Any

# EKS: the NVIDIA AMIs carry the driver (and the container toolkit); Bottlerocket's also the device plugin.
EKS_NVIDIA_AMI = "AL2023_x86_64_NVIDIA"  # the AMI an image-owned node group gets when it names none
EKS_BOTTLEROCKET_NVIDIA_AMI = "BOTTLEROCKET_x86_64_NVIDIA"
EKS_CUSTOM_AMI = "CUSTOM"  # what EKS reports as the amiType of a node group on a launch template's own AMI


def is_nvidia_ami(ami_type: Any) -> bool:
    """An EKS AMI type whose image ships NVIDIA's driver (``AL2023_x86_64_NVIDIA``, ``BOTTLEROCKET_x86_64_NVIDIA``)."""
    return str(ami_type or "").endswith("_NVIDIA")


# AKS: gpuProfile.driver "Install" lets AKS put its driver on the node image; "None" leaves it to the operator.
AKS_DRIVER_NONE = "None"
AKS_DRIVER_INSTALL = "Install"


def aks_gpu_driver(operator_owns_driver: bool) -> str:
    """AKS ``gpuProfile.driver``: "None" whenever the operator owns the driver (two drivers never mix)."""
    return AKS_DRIVER_NONE if operator_owns_driver else AKS_DRIVER_INSTALL
