"""The GPU Operator's settings in the FleetSpec, with ``upgradePolicy`` spelled as the ClusterPolicy CRD spells it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, field_validator

from gpu_knowledge import compat, operator_chart
from fleetspec.base import ClusterPolicyMode, IntOrPercent, NonNegativeInt, SpecModel, int_or_percent
from gpu_knowledge.versions import ChartVersion, chart_key


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
    podSelector: str = Field("", description="Label selector of the pods (batch, fine-tuning jobs) the upgrade waits "
                             "for before evicting; empty: none.", examples=["workload-class=batch"])
    timeoutSeconds: NonNegativeInt = Field(0, description="How long to wait for them; 0 waits forever.",
                                           examples=[3600])


class PodDeletion(SpecModel):
    force: StrictBool = Field(False, description="Delete GPU pods that have no controller.")
    timeoutSeconds: NonNegativeInt = Field(300, description="How long deletion waits on a blocking PDB; 0 waits "
                                           "forever.", examples=[900])
    deleteEmptyDir: StrictBool = Field(False, description="Delete pods that use emptyDir volumes (their data is lost).")


class Drain(SpecModel):
    enable: StrictBool = Field(False, description="Drain the whole node when GPU pod deletion is not enough.")
    force: StrictBool = Field(False, description="Delete pods without a controller during the drain.")
    podSelector: str = Field("", description="Drain only the pods this label selector selects; empty: every pod.")
    timeoutSeconds: NonNegativeInt = Field(300, description="How long the drain waits; 0 waits forever.",
                                           examples=[900])
    deleteEmptyDir: StrictBool = Field(False, description="Drain pods that use emptyDir volumes too (their data is "
                                       "lost).")


class UpgradePolicy(SpecModel):
    """``spec.driver.upgradePolicy`` of the ClusterPolicy CRD (and of NVIDIADriver on operator >= 26.7)."""

    autoUpgrade: StrictBool = Field(True, description="Let the operator's upgrade controller roll the nodes; "
                                    "`false`: nothing rolls.")
    maxParallelUpgrades: NonNegativeInt = Field(1, description="Nodes upgraded at once; 0 means unlimited.")
    maxUnavailable: IntOrPercent = Field("25%", description="Nodes that may be unavailable, a count or a percentage "
                                         "(rounded up).", examples=[1])
    waitForCompletion: WaitForCompletion = Field(
        WaitForCompletion(), description="Pods the upgrade waits for before it evicts anything (batch, fine-tuning).")
    podDeletion: PodDeletion = Field(PodDeletion(), description="How the upgrade deletes a node's GPU pods.")
    drain: Drain = Field(Drain(), description="Whether and how the upgrade drains the whole node.")

    @field_validator("maxUnavailable", mode="before")
    @classmethod
    def _max_unavailable(cls, value: object) -> int | str:
        return int_or_percent(value, "maxUnavailable")

    def as_crd(self) -> dict[str, object]:
        """The policy exactly as the CRD spells it."""
        return self.model_dump(mode="json")

    def as_helm_values(self) -> dict[str, object]:
        """The same policy under the chart's value names (``gpuPodDeletion`` for ``podDeletion``)."""
        return operator_chart.helm_upgrade_policy(self.as_crd())


class GpuOperator(SpecModel):
    """The GPU Operator: its release, who owns the ClusterPolicy, the driver mode and the upgrade policy."""

    chartVersion: ChartVersion = Field(
        description="Operator release (= Helm chart version), exact. From v26.7.0 each NVIDIADriver carries its own "
        "`upgradePolicy`; before that only the ClusterPolicy's applies.", examples=["v26.7.0"])
    namespace: str = Field("gpu-operator", description="Namespace of the operator (and of the chart with "
                           "`clusterPolicy: helm`).")
    clusterPolicy: ClusterPolicyMode = Field(
        ClusterPolicyMode.PATCH, description="`patch`: server-side patch of the existing `cluster-policy`. `helm`: "
        "install the pinned chart with the same settings as values. `external`: another stack owns it (the canary "
        "stack in the shared-cluster topology).", examples=["external"]
    )
    useNvidiaDriverCrd: StrictBool = Field(
        False, description="One NVIDIADriver per pool instead of one cluster-wide driver: selecting the pool label "
        "(AKS, EKS) or the pool's `existing.nodeSelector`. With `clusterPolicy: helm` from v26.7.0 the chart's "
        "`default` NVIDIADriver stays the fallback owner of GPU nodes outside the pools. Switch it on in a change of "
        "its own, after the operator upgrade (policy `per-pool-mode-own-change`; runbook: migration to per-pool "
        "mode).")
    usePrecompiled: StrictBool = Field(
        False, description="Precompiled driver images, tagged `<branch>-<kernel>-<os>`; `driver.version` is then a "
        "branch.")
    kernelModuleType: Literal["auto", "open", "proprietary"] = Field(
        "auto", description="Which kernel modules the driver container loads; `auto` lets the operator choose (open "
        "from R570 on).", examples=["open"])
    driverRepository: str = Field("nvcr.io/nvidia", description="Registry path of the `driver` image (a mirror, say).",
                                  examples=["registry.example.com/nvidia"])
    dcgmExporterVersion: str | None = Field(
        None, description="The DCGM Exporter the cluster runs, as its image tag (`<DCGM>-<exporter>[-<os>]`), pinned "
        "where this stack owns the ClusterPolicy (`spec.dcgmExporter.version`, or the chart's `dcgmExporter.version`). "
        "Policy `dcgm-exporter-supports-driver` refuses a DCGM older than the one NVIDIA ships with the target branch, "
        "and preflight's `dcgm-exporter` fails where the running exporter's image differs. Required where the operator "
        "owns the driver.", examples=["4.4.2-4.6.0-ubuntu22.04"])
    upgradePolicy: UpgradePolicy = Field(
        UpgradePolicy(), description="`spec.driver.upgradePolicy`, spelled exactly as the ClusterPolicy CRD spells it. "
        "With `clusterPolicy: helm` it is sent under the chart's names (`gpuPodDeletion`).",
        examples=[{"maxParallelUpgrades": 1}])
    unpinnedHoldReason: str | None = Field(
        None,
        min_length=1,
        description="Only with `driver.owner: operator` and `useNvidiaDriverCrd: false`: why held pools may be held "
        "by the skip label alone, although a node added to one installs `driver.version` at once. Turns policy "
        "`held-pool-pinned` into advice; refused in per-pool mode, where held pools are pinned.",
        examples=["GPU pools are fixed-size; CHG-4711"],
    )
    batchJobSelectors: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Label selectors of batch or fine-tuning pods that must finish rather than be evicted; policy "
        "`wait-for-batch-jobs` checks that `upgradePolicy.waitForCompletion.podSelector` covers each one.",
        examples=[["workload-class=batch"]],
    )

    @field_validator("dcgmExporterVersion")
    @classmethod
    def _dcgm_exporter_version(cls, value: str | None) -> str | None:
        if value is not None and compat.dcgm_of_exporter_tag(value) is None:
            raise ValueError(f"'{value}' is not a DCGM Exporter image tag: <DCGM>-<exporter>[-<os>], such as "
                             "4.4.2-4.6.0-ubuntu22.04 (the tag the exporter's image carries)")
        return value

    @property
    def default_driver_is_fallback(self) -> bool:
        """From v26.7.0 the chart's `default` NVIDIADriver (spec.default: true) only takes GPU nodes no other
        NVIDIADriver selects; before, it was an ordinary CR that overlapped every per-pool one."""
        return chart_key(self.chartVersion) >= (26, 7, 0)

    @property
    def per_driver_upgrade_policy(self) -> bool:
        """NVIDIADriver carries its own upgradePolicy (and `default`) from operator v26.7.0 on."""
        return chart_key(self.chartVersion) >= (26, 7, 0)


