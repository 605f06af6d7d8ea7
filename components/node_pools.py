"""GPU node pools: an AKS agent pool or an EKS managed node group per pool (per generation when the
node image owns the driver, so a new image runs beside the old one until the old one is retired), or,
on a cluster this stack does not create, a record of the pool."""

from __future__ import annotations

import copy
import re
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options
from renderers import manifests
from fleetspec.model import AksCluster, EksCluster
from fleetspec.pools import AksPool, EksPool


class CloudPool(ComponentArgs):
    """One cloud pool a pool renders to: one per live generation, or the pool itself (manifests.pool_generations)."""

    name: str = Field(description="The cloud pool's name: the agent pool or node group (NodePool.cloud_name).")
    nodes: int = Field(description="Its node count (NodePool.generation_nodes).")
    labels: dict[str, str] = Field(description="Node labels: the pool's facts (manifests.pool_labels).")
    record: str = Field(description="The record of its replace-only fields as sent (manifests.cloud_pool_record).")
    tags: dict[str, Any] = Field(
        description="Its tags (manifests.cloud_pool_tags), with the record as last deployed: an Output of the "
        "stack's previous deployment.")
    release_version: str | None = Field(
        None, description="EKS: the AMI release its node group is pinned to (manifests.eks_release_version).")
    adopt: str | None = Field(
        None, description="The import ID of the cloud pool the cluster runs already, adopted rather than created "
        "(NodePool.adopted): declared with Pulumi's `import` resource option.")


_AKS_API_VERSION_TYPE = re.compile(r"^azure-native:containerservice/v[0-9a-z]+:AgentPool$")


def _without_api_version_aliases(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult:
    """Drop the aliases azure-native gives every AgentPool to its ~110 API-version types.

    They let state written by a versioned resource (``containerservice/v20240101:AgentPool``) move to the
    unversioned one. This program only ever registers the unversioned type, so they match nothing in its
    stacks, while resolving them (alias URNs computed in the SDK) was four fifths of the cost of planning
    a large AKS fleet (benchmarks/plan_scale.py). Any alias not of that shape is kept.
    """
    kept = [
        alias for alias in args.opts.aliases or []
        if not (isinstance(alias, pulumi.Alias) and isinstance(alias.type_, str) and _AKS_API_VERSION_TYPE.match(alias.type_))
    ]
    opts = copy.copy(args.opts)
    opts.aliases = kept
    return pulumi.ResourceTransformationResult(args.props, opts)


class AksGpuPoolArgs(ComponentArgs):
    cluster: AksCluster = Field(description="The AKS cluster the agent pools join (cluster.aks).")
    pool: AksPool = Field(description="The pool's AKS settings: VM size, OS, zones, surge and drain (the pool's `aks`).")
    gpu_driver: str = Field(description="gpuProfile.driver: `None` when the operator owns the driver "
                            "(manifests.aks_gpu_driver).")
    cloud_pools: tuple[CloudPool, ...] = Field(description="The agent pools, one per live generation or the pool.")


class AksGpuPool(pulumi.ComponentResource):
    """A User-mode AKS agent pool with a GPU taint, pool labels and surge-based upgrade settings."""

    agent_pools: list[azure_native.containerservice.AgentPool]

    def __init__(self, name: str, args: AksGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:AksGpuPool", name, None, opts)
        cluster, pool = args.cluster, args.pool
        key, value, effect = manifests.gpu_taint()
        self.agent_pools = []
        self.records: dict[str, str] = {}
        gpu_profile = {"driver": args.gpu_driver}
        for cloud_pool in args.cloud_pools:
            self.records[cloud_pool.name] = cloud_pool.record
            self.agent_pools.append(
                azure_native.containerservice.AgentPool(
                    cloud_pool.name,
                    resource_group_name=cluster.resourceGroup,
                    resource_name_=cluster.clusterName,
                    agent_pool_name=cloud_pool.name,
                    mode="User",
                    os_type="Linux",
                    os_sku=pool.osSku,
                    vm_size=pool.vmSize,
                    count=cloud_pool.nodes,
                    orchestrator_version=cluster.kubernetesVersion,
                    availability_zones=pool.availabilityZones,
                    node_labels=cloud_pool.labels,
                    node_taints=[f"{key}={value}:{effect}"],
                    gpu_profile=gpu_profile,
                    upgrade_settings={
                        "max_surge": pool.maxSurge,
                        "drain_timeout_in_minutes": pool.drainTimeoutMinutes,
                        "node_soak_duration_in_minutes": pool.nodeSoakMinutes,
                        # A node whose PDBs never let go is quarantined, not force-drained.
                        "undrainable_node_behavior": "Cordon",
                    },
                    # AKS takes no node image as input: a generation's version is recorded as a tag and checked live.
                    tags=cloud_pool.tags,
                    opts=child_options(self, opts, transformations=[_without_api_version_aliases],
                                       import_=cloud_pool.adopt),
                )
            )
        self.register_outputs({"agentPoolNames": [p.name for p in self.agent_pools], "records": self.records})


class EksGpuPoolArgs(ComponentArgs):
    cluster: EksCluster = Field(description="The EKS cluster the node groups join (cluster.eks).")
    pool: EksPool = Field(description="The pool's EKS settings: instance types, capacity, update config (the pool's "
                          "`eks`).")
    ami_type: str | None = Field(description="The AMI type; None beside a custom AMI (manifests.eks_ami_type).")
    launch_template: dict[str, str] | None = Field(description="manifests.eks_launch_template.")
    disk_size: int | None = Field(description="None beside a launch template (manifests.eks_disk_size).")
    cloud_pools: tuple[CloudPool, ...] = Field(description="The node groups, one per live generation or the pool.")


class EksGpuPool(pulumi.ComponentResource):
    """An EKS managed node group per live generation, with a pinned AMI release and updateConfig."""

    node_groups: list[aws.eks.NodeGroup]

    def __init__(self, name: str, args: EksGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:EksGpuPool", name, None, opts)
        cluster, pool = args.cluster, args.pool
        key, value, _ = manifests.gpu_taint()
        self.node_groups = []
        self.records: dict[str, str] = {}
        for cloud_pool in args.cloud_pools:
            self.records[cloud_pool.name] = cloud_pool.record
            self.node_groups.append(
                aws.eks.NodeGroup(
                    cloud_pool.name,
                    cluster_name=cluster.clusterName,
                    node_group_name=cloud_pool.name,
                    region=cluster.region,
                    node_role_arn=cluster.nodeRoleArn,
                    subnet_ids=cluster.subnetIds,
                    instance_types=pool.instanceTypes,  # None where the launch template sets it
                    ami_type=args.ami_type,
                    release_version=cloud_pool.release_version,
                    # A custom AMI (no amiType) carries its own kubelet: EKS refuses a version beside it.
                    version=cluster.kubernetesVersion if args.ami_type else None,
                    capacity_type=pool.capacityType,
                    launch_template=args.launch_template,
                    disk_size=args.disk_size,
                    scaling_config={
                        "desired_size": cloud_pool.nodes,
                        "min_size": cloud_pool.nodes,
                        "max_size": cloud_pool.nodes + pool.maxUnavailable,
                    },
                    update_config={
                        "max_unavailable": pool.maxUnavailable,
                        "update_strategy": pool.updateStrategy,
                    },
                    labels=cloud_pool.labels,
                    taints=[{"key": key, "value": value, "effect": "NO_SCHEDULE"}],
                    tags=cloud_pool.tags,
                    opts=child_options(self, opts, import_=cloud_pool.adopt),
                )
            )
        self.register_outputs({"nodeGroupNames": [g.node_group_name for g in self.node_groups], "records": self.records})


class ExistingGpuPoolArgs(ComponentArgs):
    record_name: str = Field(description="The pool record's name (manifests.pool_record_name).")
    metadata: dict[str, Any] = Field(
        description="The record's metadata: the pool's facts and selector (manifests.pool_record_metadata).")
    data: dict[str, str] = Field(description="The record's data: the pool's node count (manifests.pool_record_data).")


class ExistingGpuPool(pulumi.ComponentResource):
    """A pool of a ``cloud: existing`` cluster: its nodes and their cloud pool belong to someone else, so
    the stack records the pool (declared hardware, selector, held or released) in a ConfigMap, where the
    policy pack sees the same facts it reads from the labels of AKS and EKS pools."""

    def __init__(self, name: str, args: ExistingGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:ExistingGpuPool", name, None, opts)
        self.record = k8s.core.v1.ConfigMap(
            args.record_name,
            metadata=args.metadata,
            data=args.data,
            opts=child_options(self, opts),
        )
        self.register_outputs({"record": args.record_name})
