"""Per-cloud rules both directions need: which node images carry the driver, AKS gpuProfile.driver, and the
gpu-operator chart's own names for two ClusterPolicy settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec.resource_facts.tokens import AKS_POOL, EKS_NODE_GROUP
from spec.resource_facts.values import prop

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


def image_owns_driver(type_token: str, props: Mapping[str, Any]) -> bool:
    """A cloud pool whose node image brings the driver: an AKS pool whose driver AKS installs (anything but
    "None", AKS's default included), or an EKS node group on an NVIDIA AMI."""
    if type_token == AKS_POOL:
        return bool(prop(props, "gpuProfile", "driver") != AKS_DRIVER_NONE)
    if type_token == EKS_NODE_GROUP:
        return is_nvidia_ami(props.get("amiType"))
    return False


# The gpu-operator chart names two settings differently from the ClusterPolicy CRD it renders.
CRD_POD_DELETION, HELM_POD_DELETION = "podDeletion", "gpuPodDeletion"  # in driver.upgradePolicy
CRD_USE_DRIVER_CRD, HELM_DRIVER_CRD = "useNvidiaDriverCRD", "nvidiaDriverCRD"  # chart: nvidiaDriverCRD.enabled


def helm_upgrade_policy(crd_policy: Mapping[str, Any]) -> dict[str, Any]:
    """An upgradePolicy spelled as the CRD spells it, under the chart's value names."""
    values = dict(crd_policy)
    values[HELM_POD_DELETION] = values.pop(CRD_POD_DELETION)
    return values


def crd_upgrade_policy(helm_policy: Any) -> dict[str, Any] | None:
    """Chart values' upgradePolicy in the CRD's spelling (what the rules read); None when it is no mapping."""
    if not isinstance(helm_policy, Mapping):
        return None
    policy = dict(helm_policy)
    if HELM_POD_DELETION in policy:
        policy[CRD_POD_DELETION] = policy.pop(HELM_POD_DELETION)
    return policy


def helm_driver_values(crd_driver: Mapping[str, Any], *, deploy_default_cr: bool) -> dict[str, Any]:
    """ClusterPolicy ``spec.driver`` as the chart's ``driver`` values (a disabled driver is just disabled)."""
    driver = dict(crd_driver)
    if driver.get("enabled"):
        driver[HELM_DRIVER_CRD] = {"enabled": driver.pop(CRD_USE_DRIVER_CRD), "deployDefaultCR": deploy_default_cr}
        driver["upgradePolicy"] = helm_upgrade_policy(driver["upgradePolicy"])
    return driver
