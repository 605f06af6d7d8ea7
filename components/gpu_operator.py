"""The GPU Operator's driver settings: the ClusterPolicy (patched, or installed by a pinned chart) and
one NVIDIADriver per operator-owned pool."""

from __future__ import annotations

from typing import Any, Literal, Self

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field, model_validator

from components.args import ComponentArgs
from components.options import child_options
from gpu_knowledge import kinds
from renderers import manifests
from fleetspec.model import ClusterPolicyMode


class DriverPolicyArgs(ComponentArgs):
    mode: Literal[ClusterPolicyMode.HELM, ClusterPolicyMode.PATCH] = Field(
        description="gpuOperator.clusterPolicy: `helm` installs the chart, `patch` patches the existing ClusterPolicy "
        "(`external`: no DriverPolicy at all).")
    chart_version: str = Field(description="gpuOperator.chartVersion: the chart installed in `helm` mode.")
    namespace: str = Field(description="gpuOperator.namespace: where `helm` mode installs the chart.")
    helm_values: dict[str, Any] | None = Field(
        None, description="The chart's values, in `helm` mode only (manifests.helm_values).")
    annotations: dict[str, str] | None = Field(
        None, description="The ClusterPolicy's driver facts, in `patch` mode only (manifests.driver_annotations).")
    cluster_policy: dict[str, Any] | None = Field(
        None, description="The ClusterPolicy fields patched, in `patch` mode only (manifests.cluster_policy_spec).")

    @model_validator(mode="after")
    def _what_the_mode_sends(self) -> Self:
        if self.mode == ClusterPolicyMode.HELM and self.helm_values is None:
            raise ValueError("helm_values must be set in `helm` mode: the chart is installed with them")
        if self.mode == ClusterPolicyMode.PATCH and (self.annotations is None or self.cluster_policy is None):
            raise ValueError("annotations and cluster_policy must be set in `patch` mode: the ClusterPolicy is "
                             "patched with them")
        return self


class DriverPolicy(pulumi.ComponentResource):
    """Pins the driver and its upgrade policy cluster-wide.

    ``patch`` server-side-applies only the driver/toolkit/devicePlugin fields of the existing
    ``cluster-policy`` (force, so fields the chart's field manager owns are taken over); ``helm``
    installs the operator chart at the pinned version with the same settings as chart values.
    """

    def __init__(self, name: str, args: DriverPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:operator:DriverPolicy", name, None, opts)
        child = child_options(self, opts)
        self.resource: pulumi.CustomResource
        if args.mode == ClusterPolicyMode.HELM:
            self.resource = k8s.helm.v3.Release(
                "gpu-operator",
                name="gpu-operator",
                chart=manifests.OPERATOR_CHART,
                version=args.chart_version,
                repository_opts={"repo": manifests.OPERATOR_CHART_REPO},
                namespace=args.namespace,
                create_namespace=True,
                atomic=True,
                cleanup_on_fail=True,
                values=args.helm_values,
                opts=child,
            )
        else:
            self.resource = k8s.apiextensions.CustomResourcePatch(
                manifests.CLUSTER_POLICY_NAME,
                api_version=kinds.CLUSTER_POLICY.api_version,
                kind=kinds.CLUSTER_POLICY.kind,
                metadata={
                    "name": manifests.CLUSTER_POLICY_NAME,
                    "annotations": {"pulumi.com/patchForce": "true", **(args.annotations or {})},
                },
                spec=args.cluster_policy,
                opts=child,
            )
        self.register_outputs({"mode": args.mode.value})


class PoolDriverArgs(ComponentArgs):
    driver_name: str = Field(description="The NVIDIADriver's name (manifests.nvidia_driver_name).")
    version: str = Field(description="The driver the pool moves to (FleetSpec.pool_target).")
    labels: dict[str, str] = Field(description="The pool's facts as labels (manifests.nvidia_driver_labels).")
    annotations: dict[str, str] = Field(
        description="The driver facts the policy pack reads (manifests.driver_annotations of the pool).")
    driver_spec: dict[str, Any] = Field(description="The NVIDIADriver's spec (manifests.nvidia_driver_spec).")


class PoolDriver(pulumi.ComponentResource):
    """An NVIDIADriver pinned to one pool by its pool label, with its own version (and policy on >= 26.7)."""

    def __init__(self, name: str, args: PoolDriverArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:operator:PoolDriver", name, None, opts)
        self.version = args.version
        self.resource = k8s.apiextensions.CustomResource(
            args.driver_name,
            api_version=kinds.NVIDIA_DRIVER.api_version,
            kind=kinds.NVIDIA_DRIVER.kind,
            metadata={"name": args.driver_name, "labels": args.labels, "annotations": args.annotations},
            spec=args.driver_spec,
            opts=child_options(self, opts),
        )
        self.register_outputs({"version": self.version})
