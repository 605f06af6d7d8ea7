"""GpuFleet: the whole stack from one FleetSpec: pools, operator driver policy, pool drivers, PDBs.

The one component that reads the whole spec: it builds each child component's args from it (the ``*_args``
functions below), so every other component's inputs show in its signature.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components import guard, validation
from components.args import ComponentArgs
from components.cluster import ClusterIdentity, ClusterIdentityArgs, kubernetes_provider
from components.disruption import ModelBudget, ModelBudgetArgs
from components.guard import Guard, GuardArgs
from components.gpu_operator import DriverPolicy, DriverPolicyArgs, PoolDriver, PoolDriverArgs
from components.node_pools import (
    AksGpuPool,
    AksGpuPoolArgs,
    CloudPool,
    EksGpuPool,
    EksGpuPoolArgs,
    ExistingGpuPool,
    ExistingGpuPoolArgs,
)
from components.options import child_options
from components.previous import PreviousDeployment, PreviousDeploymentArgs
from components.promotion import CanaryGate, CanaryGateArgs
from components.validation import ValidationJob, ValidationJobArgs
from renderers import manifests
from engine_contracts import resource_facts as rf
from fleetspec.discipline import utc_now
from fleetspec.model import Cloud, ClusterPolicyMode, DriverOwner, FleetSpec, Model, NodePool, Stage


class GpuFleetArgs(ComponentArgs):
    spec: FleetSpec = Field(description="The stack's FleetSpec (fleetspec.load.spec_from_config).")
    clock: Callable[[], datetime] = Field(
        utc_now, description="When this deployment's changes take effect, for the times it records (the stack "
        "output ``timeline``).")


# ---------------------------------------------------------------- each component's args, from the spec


def identity_args(spec: FleetSpec) -> ClusterIdentityArgs:
    return ClusterIdentityArgs(
        cluster=spec.cluster.name,
        record_name=manifests.identity_name(spec),
        metadata=manifests.identity_metadata(spec),
        data=manifests.identity_data(spec),
    )


def budget_args(spec: FleetSpec, model: Model) -> ModelBudgetArgs:
    return ModelBudgetArgs(
        namespace=model.namespace,
        pdb_name=manifests.pdb_name(model),
        metadata=manifests.pdb_metadata(spec, model),
        budget=manifests.pdb_spec(model),
        min_available=model.minAvailable,
    )


def _deployed_with(previous: PreviousDeployment | None, cloud_name: str, record: str) -> pulumi.Input[str]:
    """The tag the pack compares against: the record of the last deployment, else what this one sends."""
    return previous.cloud_pool_record(cloud_name, record) if previous is not None else record


def _cloud_pools(spec: FleetSpec, pool: NodePool, previous: PreviousDeployment | None) -> tuple[CloudPool, ...]:
    """The cloud pools ``pool`` renders to (one per live generation, or the pool itself), each with its tags."""
    cloud_pools = []
    on_eks = pool.eks is not None
    for generation in manifests.pool_generations(pool):
        name = pool.cloud_name(generation)
        record = manifests.cloud_pool_record(spec, pool, generation)
        cloud_pools.append(CloudPool(
            name=name,
            nodes=pool.generation_nodes(generation),
            labels=manifests.pool_labels(spec, pool, generation),
            record=record,
            # AKS takes no node image as input, so a generation's image rides on its tags; EKS pins the AMI release.
            tags=manifests.cloud_pool_tags(spec, pool, _deployed_with(previous, name, record),
                                           None if on_eks else generation),
            release_version=manifests.eks_release_version(pool, generation) if on_eks else None,
            adopt=pool.adopted[1] if pool.adopted is not None and pool.adopted[0] == name else None,
        ))
    return tuple(cloud_pools)


def aks_pool_args(spec: FleetSpec, pool: NodePool, previous: PreviousDeployment | None) -> AksGpuPoolArgs:
    assert spec.cluster.aks is not None and pool.aks is not None  # FleetSpec guarantees both for AKS
    return AksGpuPoolArgs(cluster=spec.cluster.aks, pool=pool.aks, gpu_driver=manifests.aks_gpu_driver(spec),
                          cloud_pools=_cloud_pools(spec, pool, previous))


def eks_pool_args(spec: FleetSpec, pool: NodePool, previous: PreviousDeployment | None) -> EksGpuPoolArgs:
    assert spec.cluster.eks is not None and pool.eks is not None  # FleetSpec guarantees both for EKS
    return EksGpuPoolArgs(
        cluster=spec.cluster.eks,
        pool=pool.eks,
        ami_type=manifests.eks_ami_type(spec, pool),
        launch_template=manifests.eks_launch_template(pool),
        disk_size=manifests.eks_disk_size(pool),
        cloud_pools=_cloud_pools(spec, pool, previous),
    )


def existing_pool_args(spec: FleetSpec, pool: NodePool) -> ExistingGpuPoolArgs:
    return ExistingGpuPoolArgs(
        record_name=manifests.pool_record_name(pool),
        metadata=manifests.pool_record_metadata(spec, pool),
        data=manifests.pool_record_data(pool),
    )


def driver_policy_args(spec: FleetSpec) -> DriverPolicyArgs:
    op = spec.gpuOperator
    mode = op.clusterPolicy
    assert mode is not ClusterPolicyMode.EXTERNAL  # no DriverPolicy then: another stack owns the ClusterPolicy
    helm = mode is ClusterPolicyMode.HELM
    return DriverPolicyArgs(
        mode=mode,
        chart_version=op.chartVersion,
        namespace=op.namespace,
        helm_values=manifests.helm_values(spec) if helm else None,
        annotations=None if helm else manifests.driver_annotations(spec),
        cluster_policy=None if helm else manifests.cluster_policy_spec(spec),
    )


def pool_driver_args(spec: FleetSpec, pool: NodePool) -> PoolDriverArgs:
    return PoolDriverArgs(
        driver_name=manifests.nvidia_driver_name(pool),
        version=spec.pool_target(pool).driver,
        labels=manifests.nvidia_driver_labels(spec, pool),
        annotations=manifests.driver_annotations(spec, pool),
        driver_spec=manifests.nvidia_driver_spec(spec, pool),
    )


def validation_job_args(spec: FleetSpec) -> ValidationJobArgs:
    return ValidationJobArgs(
        namespace=validation.namespace_name(spec),
        cluster_scoped_name=validation.cluster_scoped_name(spec),
        namespace_labels=validation.namespace_labels(spec),
        admission_policy=validation.admission_policy_spec(spec),
        program_data=validation.program_config_map_data(spec),
        daemon_sets={pool.name: validation.daemonset_body(spec, pool, target)
                     for pool, target in validation.validated_pools(spec)},
    )


def guard_args(spec: FleetSpec, stack: str) -> GuardArgs:
    """``stack``: the stack's own name, which the guard's process loads (Pulumi.<stack>.yaml)."""
    files = guard.project_files(spec, stack)
    return GuardArgs(
        namespace=spec.guard.namespace,
        cluster_scoped_name=guard.cluster_scoped_name(spec),
        cluster_role_rules=guard.cluster_role_rules(),
        roles=guard.namespaced_roles(spec),
        admission_policy=guard.admission_policy_spec(spec),
        project_files=files,
        deployment=guard.deployment_body(spec, stack, files) if spec.guard.image is not None else None,
        monitoring_labels=dict(spec.guard.monitoringLabels) if spec.guard.prometheusOperator else None,
    )


def canary_gate_args(spec: FleetSpec) -> CanaryGateArgs:
    assert spec.promotion is not None
    return CanaryGateArgs(
        stage=spec.stage,
        promotion=spec.promotion,
        # The drivers its pools move to or are pinned to, and the stack's own.
        drivers=frozenset({target.driver for target in map(spec.pool_target, spec.nodePools)} | {spec.driver.version}),
        install=manifests.install_facts(spec).as_data(),
    )


# ---------------------------------------------------------------- the fleet


class GpuFleet(pulumi.ComponentResource):
    # What the stack exports (__main__.py), registered as this component's outputs too: ``rf.StackOutputs`` by
    # name, the timeline an Output of the last deployment's.
    outputs: dict[str, Any]

    def __init__(self, name: str, args: GpuFleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:fleet:GpuFleet", name, None, opts)
        spec = args.spec
        # Kubernetes objects go only to the stack's own cluster, never to the shell's current context.
        provider = kubernetes_provider(spec.cluster, self)
        k8s_opts = child_options(self, opts, providers=[provider])
        this_stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        last = PreviousDeployment("previous", PreviousDeploymentArgs(stack=this_stack), opts=child_options(self, opts))
        cluster_identity = ClusterIdentity("cluster-identity", identity_args(spec), opts=k8s_opts)

        # PDBs first: nothing may evict a model server before its budget exists. Each pool and pool driver
        # waits for the budgets of the models that run on it (not every budget: the plan stays linear in
        # the fleet's size, and an unrelated model's PDB never holds up a pool).
        budgets: dict[str, list[pulumi.Resource]] = {pool.name: [] for pool in spec.nodePools}
        all_budgets: list[pulumi.Resource] = []
        for model in spec.models:
            budget = ModelBudget(f"{model.namespace}-{model.name}", budget_args(spec, model), opts=k8s_opts)
            all_budgets.append(budget)
            for pool_name in model.nodePools:
                budgets[pool_name].append(budget)

        # A pool update (node image, Kubernetes version) drains nodes: it waits for its models' budgets.
        pool_components: dict[str, pulumi.Resource] = {}
        for pool in spec.nodePools:
            waits = budgets[pool.name]
            if spec.cluster.cloud == Cloud.AKS:
                pool_components[pool.name] = AksGpuPool(
                    pool.name, aks_pool_args(spec, pool, last), child_options(self, opts, depends_on=waits))
            elif spec.cluster.cloud == Cloud.EKS:
                pool_components[pool.name] = EksGpuPool(
                    pool.name, eks_pool_args(spec, pool, last), child_options(self, opts, depends_on=waits))
            else:
                pool_components[pool.name] = ExistingGpuPool(
                    pool.name, existing_pool_args(spec, pool),
                    child_options(self, opts, depends_on=waits, providers=[provider]))

        # The driver policy reaches every pool: it waits for every budget and every pool, so a pool held in
        # the same change carries its skip label before a new cluster-wide driver version can reach it.
        policy: DriverPolicy | None = None
        if spec.gpuOperator.clusterPolicy != ClusterPolicyMode.EXTERNAL:
            policy = DriverPolicy(
                "driver-policy",
                driver_policy_args(spec),
                opts=child_options(self, opts, depends_on=[*all_budgets, *pool_components.values()],
                                   providers=[provider]),
            )

        # A pool's driver waits for its models' budgets, the driver policy (per-pool mode must be on) and its
        # pool (labels, the skip label of a held pool).
        if spec.driver.owner == DriverOwner.OPERATOR and spec.gpuOperator.useNvidiaDriverCrd:
            for pool in spec.nodePools:
                depends: list[pulumi.Resource] = [*budgets[pool.name], pool_components[pool.name]]
                if policy is not None:
                    depends.append(policy)
                PoolDriver(
                    manifests.nvidia_driver_name(pool),
                    pool_driver_args(spec, pool),
                    opts=child_options(self, opts, depends_on=depends, providers=[provider]),
                )

        # The post-upgrade validation job (docs/validation.md): its pods place themselves on upgraded nodes.
        if spec.validation is not None:
            ValidationJob("validation", validation_job_args(spec), opts=k8s_opts)

        # The in-cluster guard (on by default in prod): it watches every rollout and the fleet between them.
        if spec.guard_enabled:
            Guard("guard", guard_args(spec, pulumi.get_stack()), opts=k8s_opts)
        # The webhook URL, a Pulumi secret the engine decrypts, goes where the deploy step and the in-cluster guard
        # both read it (announcements/): the Secret the stack names, in kube-system.
        webhook = manifests.webhook_secret(spec)
        if webhook is not None:
            metadata, data = webhook
            k8s.core.v1.Secret("notifications-webhook", metadata=metadata,
                               string_data={k: pulumi.Output.secret(v) for k, v in data.items()}, opts=k8s_opts)

        # The prod gate (canary-attested): the canary's attestations and drivers, where the pack sees them.
        if spec.stage == Stage.PROD and spec.promotion is not None:
            CanaryGate("promotion", canary_gate_args(spec), opts=k8s_opts)

        # A preview deploys nothing, so it records no time; an update records its own moment for what it releases
        # or deploys first, and carries every earlier record forward unchanged (a second `up` changes nothing).
        now = None if pulumi.runtime.is_dry_run() else args.clock()
        recorded = last.timeline(spec, now)
        self.outputs = {**manifests.stack_outputs(spec).as_outputs(),
                        rf.TIMELINE: recorded.apply(lambda timeline: timeline.as_output())}
        # Which stack and cluster this is, as the engine names the stack: a prod gate compares its canary's.
        self.outputs[rf.IDENTITY] = cluster_identity.kube_system_uid.apply(
            lambda uid: manifests.stack_identity(spec, this_stack, uid).as_output())
        self.register_outputs(self.outputs)
