"""The GPU Operator's settings in the FleetSpec, with ``upgradePolicy`` spelled as the ClusterPolicy CRD spells it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, field_validator

from spec import resource_facts
from spec.base import ClusterPolicyMode, NonNegativeInt, SpecModel, int_or_percent
from spec.versions import ChartVersion, chart_key


# What an unset upgradePolicy key becomes, per kind of object that carries it (reference gpu-operator.md 1.2):
# - ClusterPolicy CRD: autoUpgrade false, maxParallelUpgrades 1, maxUnavailable 25%;
# - NVIDIADriver CRD (26.7.0+): autoUpgrade true (unlike ClusterPolicy), maxParallelUpgrades 1, 25%;
# - Helm values: the chart template renders `autoUpgrade | default false` and `maxParallelUpgrades | default 0`
#   (0 = unlimited).
# The policy pack reads the stack's resources by them, `simulate --from-cluster` the live objects.
CLUSTER_POLICY_DEFAULTS: dict[str, object] = {"autoUpgrade": False, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}
NVIDIA_DRIVER_POLICY_DEFAULTS: dict[str, object] = {**CLUSTER_POLICY_DEFAULTS, "autoUpgrade": True}
HELM_POLICY_DEFAULTS: dict[str, object] = {"autoUpgrade": False, "maxParallelUpgrades": 0, "maxUnavailable": "25%"}


class WaitForCompletion(SpecModel):
    podSelector: str = Field("", description="Label selector of jobs the upgrade waits for before evicting.")
    timeoutSeconds: NonNegativeInt = Field(0, description="How long to wait; 0 waits forever.")


class PodDeletion(SpecModel):
    force: StrictBool = Field(False, description="Delete GPU pods that have no controller.")
    timeoutSeconds: NonNegativeInt = Field(300, description="Eviction timeout; 0 waits forever.")
    deleteEmptyDir: StrictBool = Field(False, description="Delete pods with emptyDir volumes.")


class Drain(SpecModel):
    enable: StrictBool = Field(False, description="Drain the whole node when GPU pod deletion is not enough.")
    force: StrictBool = False
    podSelector: str = ""
    timeoutSeconds: NonNegativeInt = 300
    deleteEmptyDir: StrictBool = False


class UpgradePolicy(SpecModel):
    """``spec.driver.upgradePolicy`` of the ClusterPolicy CRD (and of NVIDIADriver on operator >= 26.7)."""

    autoUpgrade: StrictBool = Field(True, description="Let the operator's upgrade controller roll the nodes.")
    maxParallelUpgrades: NonNegativeInt = Field(1, description="Nodes upgraded at once; 0 means unlimited.")
    maxUnavailable: int | str = Field("25%", description="Nodes that may be unavailable, count or percent.")
    waitForCompletion: WaitForCompletion = WaitForCompletion()
    podDeletion: PodDeletion = PodDeletion()
    drain: Drain = Drain()

    @field_validator("maxUnavailable", mode="before")
    @classmethod
    def _max_unavailable(cls, value: object) -> int | str:
        return int_or_percent(value, "maxUnavailable")

    def as_crd(self) -> dict[str, object]:
        """The policy exactly as the CRD spells it."""
        return self.model_dump(mode="json")

    def as_helm_values(self) -> dict[str, object]:
        """The same policy under the chart's value names (``gpuPodDeletion`` for ``podDeletion``)."""
        return resource_facts.helm_upgrade_policy(self.as_crd())


class GpuOperator(SpecModel):
    chartVersion: ChartVersion = Field(description="GPU Operator release (chart version), e.g. v26.7.0.")
    namespace: str = Field("gpu-operator", description="Namespace the operator runs in.")
    clusterPolicy: ClusterPolicyMode = Field(
        ClusterPolicyMode.PATCH, description="How this stack owns the ClusterPolicy: patch, helm or external."
    )
    useNvidiaDriverCrd: StrictBool = Field(False, description="One NVIDIADriver per pool instead of one driver.")
    usePrecompiled: StrictBool = Field(False, description="Precompiled driver images (tagged by branch).")
    kernelModuleType: Literal["auto", "open", "proprietary"] = "auto"
    driverRepository: str = Field("nvcr.io/nvidia", description="Registry path of the driver image.")
    upgradePolicy: UpgradePolicy = UpgradePolicy()
    unpinnedHoldReason: str | None = Field(
        None,
        min_length=1,
        description="With useNvidiaDriverCrd: false, why held pools may be held by the skip label alone (a node "
        "added to a held pool then installs driver.version at once); turns policy held-pool-pinned into advice.",
    )
    batchJobSelectors: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Label selectors of batch or fine-tuning pods that must finish rather than be evicted; "
        "upgradePolicy.waitForCompletion.podSelector should cover them.",
    )

    @property
    def default_driver_is_fallback(self) -> bool:
        """From v26.7.0 the chart's `default` NVIDIADriver (spec.default: true) only takes GPU nodes no other
        NVIDIADriver selects; before, it was an ordinary CR that overlapped every per-pool one."""
        return chart_key(self.chartVersion) >= (26, 7, 0)

    @property
    def per_driver_upgrade_policy(self) -> bool:
        """NVIDIADriver carries its own upgradePolicy (and `default`) from operator v26.7.0 on."""
        return chart_key(self.chartVersion) >= (26, 7, 0)


