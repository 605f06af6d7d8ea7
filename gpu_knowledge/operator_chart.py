"""The gpu-operator Helm chart's own names for two ClusterPolicy settings, and the translation both ways.

The stack model spells ``upgradePolicy`` as the ClusterPolicy CRD does; the chart's values name two settings
differently. The renderers write the chart's names, the resource facts read them back in the CRD's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
