"""The GPU Operator's driver settings: the ClusterPolicy (patched, or installed by a pinned chart) and
one NVIDIADriver per operator-owned pool."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.options import child_options
from gpu_knowledge import kinds
from renderers import manifests
from fleetspec.model import ClusterPolicyMode, FleetSpec, NodePool


@dataclass(frozen=True)
class DriverPolicyArgs:
    spec: FleetSpec


class DriverPolicy(pulumi.ComponentResource):
    """Pins the driver and its upgrade policy cluster-wide.

    ``patch`` server-side-applies only the driver/toolkit/devicePlugin fields of the existing
    ``cluster-policy`` (force, so fields the chart's field manager owns are taken over); ``helm``
    installs the operator chart at the pinned version with the same settings as chart values.
    """

    def __init__(self, name: str, args: DriverPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:operator:DriverPolicy", name, None, opts)
        spec = args.spec
        op = spec.gpuOperator
        child = child_options(self, opts)
        self.resource: pulumi.CustomResource
        if op.clusterPolicy == ClusterPolicyMode.HELM:
            self.resource = k8s.helm.v3.Release(
                "gpu-operator",
                name="gpu-operator",
                chart=manifests.OPERATOR_CHART,
                version=op.chartVersion,
                repository_opts={"repo": manifests.OPERATOR_CHART_REPO},
                namespace=op.namespace,
                create_namespace=True,
                atomic=True,
                cleanup_on_fail=True,
                values=manifests.helm_values(spec),
                opts=child,
            )
        else:
            self.resource = k8s.apiextensions.CustomResourcePatch(
                manifests.CLUSTER_POLICY_NAME,
                api_version=kinds.CLUSTER_POLICY.api_version,
                kind=kinds.CLUSTER_POLICY.kind,
                metadata={
                    "name": manifests.CLUSTER_POLICY_NAME,
                    "annotations": {"pulumi.com/patchForce": "true", **manifests.driver_annotations(spec)},
                },
                spec=manifests.cluster_policy_spec(spec),
                opts=child,
            )
        self.register_outputs({"mode": op.clusterPolicy.value})


@dataclass(frozen=True)
class PoolDriverArgs:
    spec: FleetSpec
    pool: NodePool


class PoolDriver(pulumi.ComponentResource):
    """An NVIDIADriver pinned to one pool by its pool label, with its own version (and policy on >= 26.7)."""

    def __init__(self, name: str, args: PoolDriverArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:operator:PoolDriver", name, None, opts)
        spec, pool = args.spec, args.pool
        self.version = spec.pool_target(pool).driver
        self.resource = k8s.apiextensions.CustomResource(
            manifests.nvidia_driver_name(pool),
            api_version=kinds.NVIDIA_DRIVER.api_version,
            kind=kinds.NVIDIA_DRIVER.kind,
            metadata={
                "name": manifests.nvidia_driver_name(pool),
                "labels": manifests.nvidia_driver_labels(spec, pool),
                "annotations": manifests.driver_annotations(spec, pool),
            },
            spec=manifests.nvidia_driver_spec(spec, pool),
            opts=child_options(self, opts),
        )
        self.register_outputs({"version": self.version})
