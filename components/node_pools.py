"""GPU node pools: an AKS agent pool or an EKS managed node group per pool (per generation when the
node image owns the driver, so a new image runs beside the old one until the old one is retired), or,
on a cluster this stack does not create, a record of the pool."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from components.options import child_options
from components.previous import PreviousDeployment
from renderers import manifests
from fleetspec.model import AksCluster, EksCluster, FleetSpec, NodePool


@dataclass(frozen=True)
class GpuPoolArgs:
    spec: FleetSpec
    pool: NodePool
    previous: PreviousDeployment | None = None  # the last deployment (cloud pools compare against it)


def _deployed_with(args: GpuPoolArgs, cloud_name: str, record: str) -> pulumi.Input[str]:
    """The tag the pack compares against: the record of the last deployment, else what this one sends."""
    return args.previous.cloud_pool_record(cloud_name, record) if args.previous is not None else record


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


class AksGpuPool(pulumi.ComponentResource):
    """A User-mode AKS agent pool with a GPU taint, pool labels and surge-based upgrade settings."""

    agent_pools: list[azure_native.containerservice.AgentPool]

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:AksGpuPool", name, None, opts)
        spec, pool = args.spec, args.pool
        cluster: AksCluster | None = spec.cluster.aks
        assert cluster is not None and pool.aks is not None  # FleetSpec guarantees both for AKS
        key, value, effect = manifests.gpu_taint()
        self.agent_pools = []
        self.records: dict[str, str] = {}
        gpu_profile = {"driver": manifests.aks_gpu_driver(spec)}
        for generation in manifests.pool_generations(pool):
            cloud_name = pool.cloud_name(generation)
            self.records[cloud_name] = manifests.cloud_pool_record(spec, pool, generation)
            # AKS takes no node image as input: a generation's version is recorded as a tag and checked live.
            tags = manifests.cloud_pool_tags(spec, pool, _deployed_with(args, cloud_name, self.records[cloud_name]), generation)
            self.agent_pools.append(
                azure_native.containerservice.AgentPool(
                    cloud_name,
                    resource_group_name=cluster.resourceGroup,
                    resource_name_=cluster.clusterName,
                    agent_pool_name=cloud_name,
                    mode="User",
                    os_type="Linux",
                    os_sku=pool.aks.osSku,
                    vm_size=pool.aks.vmSize,
                    count=pool.generation_nodes(generation),
                    orchestrator_version=cluster.kubernetesVersion,
                    availability_zones=pool.aks.availabilityZones,
                    node_labels=manifests.pool_labels(spec, pool, generation),
                    node_taints=[f"{key}={value}:{effect}"],
                    gpu_profile=gpu_profile,
                    upgrade_settings={
                        "max_surge": pool.aks.maxSurge,
                        "drain_timeout_in_minutes": pool.aks.drainTimeoutMinutes,
                        "node_soak_duration_in_minutes": pool.aks.nodeSoakMinutes,
                        # A node whose PDBs never let go is quarantined, not force-drained.
                        "undrainable_node_behavior": "Cordon",
                    },
                    tags=tags,
                    opts=pulumi.ResourceOptions.merge(
                        child_options(self, opts), pulumi.ResourceOptions(transformations=[_without_api_version_aliases])
                    ),
                )
            )
        self.register_outputs({"agentPoolNames": [p.name for p in self.agent_pools], "records": self.records})


class EksGpuPool(pulumi.ComponentResource):
    """An EKS managed node group per live generation, with a pinned AMI release and updateConfig."""

    node_groups: list[aws.eks.NodeGroup]

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:EksGpuPool", name, None, opts)
        spec, pool = args.spec, args.pool
        cluster: EksCluster | None = spec.cluster.eks
        assert cluster is not None and pool.eks is not None  # FleetSpec guarantees both for EKS
        key, value, _ = manifests.gpu_taint()
        self.node_groups = []
        self.records: dict[str, str] = {}
        ami_type = manifests.eks_ami_type(spec, pool)
        launch_template = manifests.eks_launch_template(pool)
        disk_size = manifests.eks_disk_size(pool)
        for generation in manifests.pool_generations(pool):
            cloud_name = pool.cloud_name(generation)
            release = manifests.eks_release_version(pool, generation)
            self.records[cloud_name] = manifests.cloud_pool_record(spec, pool, generation)
            self.node_groups.append(
                aws.eks.NodeGroup(
                    cloud_name,
                    cluster_name=cluster.clusterName,
                    node_group_name=cloud_name,
                    region=cluster.region,
                    node_role_arn=cluster.nodeRoleArn,
                    subnet_ids=cluster.subnetIds,
                    instance_types=pool.eks.instanceTypes,  # None where the launch template sets it
                    ami_type=ami_type,
                    release_version=release,
                    # A custom AMI (no amiType) carries its own kubelet: EKS refuses a version beside it.
                    version=cluster.kubernetesVersion if ami_type else None,
                    capacity_type=pool.eks.capacityType,
                    launch_template=launch_template,
                    disk_size=disk_size,
                    scaling_config={
                        "desired_size": pool.generation_nodes(generation),
                        "min_size": pool.generation_nodes(generation),
                        "max_size": pool.generation_nodes(generation) + pool.eks.maxUnavailable,
                    },
                    update_config={
                        "max_unavailable": pool.eks.maxUnavailable,
                        "update_strategy": pool.eks.updateStrategy,
                    },
                    labels=manifests.pool_labels(spec, pool, generation),
                    taints=[{"key": key, "value": value, "effect": "NO_SCHEDULE"}],
                    tags=manifests.cloud_pool_tags(spec, pool, _deployed_with(args, cloud_name, self.records[cloud_name])),
                    opts=child_options(self, opts),
                )
            )
        self.register_outputs({"nodeGroupNames": [g.node_group_name for g in self.node_groups], "records": self.records})



class ExistingGpuPool(pulumi.ComponentResource):
    """A pool of a ``cloud: existing`` cluster: its nodes and their cloud pool belong to someone else, so
    the stack records the pool (declared hardware, selector, held or released) in a ConfigMap, where the
    policy pack sees the same facts it reads from the labels of AKS and EKS pools."""

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:pools:ExistingGpuPool", name, None, opts)
        spec, pool = args.spec, args.pool
        self.record = k8s.core.v1.ConfigMap(
            manifests.pool_record_name(pool),
            metadata=manifests.pool_record_metadata(spec, pool),
            data=manifests.pool_record_data(pool),
            opts=child_options(self, opts),
        )
        self.register_outputs({"record": manifests.pool_record_name(pool)})
