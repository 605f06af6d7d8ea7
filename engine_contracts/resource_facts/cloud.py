"""Per-cloud rules the resource facts need in both directions: whether a cloud pool's node image brings the driver.

The node images themselves (EKS's NVIDIA AMIs, AKS ``gpuProfile.driver``) are :mod:`gpu_knowledge.node_images`;
the chart's names for two ClusterPolicy settings are :mod:`gpu_knowledge.operator_chart`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine_contracts.resource_facts.tokens import AKS_POOL, EKS_NODE_GROUP
from engine_contracts.resource_facts.values import prop
from gpu_knowledge.node_images import AKS_DRIVER_NONE, is_nvidia_ami


def image_owns_driver(type_token: str, props: Mapping[str, Any]) -> bool:
    """A cloud pool whose node image brings the driver: an AKS pool whose driver AKS installs (anything but
    "None", AKS's default included), or an EKS node group on an NVIDIA AMI."""
    if type_token == AKS_POOL:
        return bool(prop(props, "gpuProfile", "driver") != AKS_DRIVER_NONE)
    if type_token == EKS_NODE_GROUP:
        return is_nvidia_ami(props.get("amiType"))
    return False
