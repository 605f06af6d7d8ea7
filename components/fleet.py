"""GpuFleet: the whole stack from one FleetSpec: pools, operator driver policy, pool drivers, PDBs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pulumi

from components.cluster import ClusterIdentity, ClusterIdentityArgs, kubernetes_provider
from components.disruption import ModelBudget, ModelBudgetArgs
from components.gpu_operator import DriverPolicy, DriverPolicyArgs, PoolDriver, PoolDriverArgs
from components.node_pools import AksGpuPool, EksGpuPool, ExistingGpuPool, GpuPoolArgs
from components.previous import PreviousDeployment
from components.promotion import CanaryGate, CanaryGateArgs
from components.validation import ValidationJob, ValidationJobArgs
from renderers import manifests
from engine_contracts import resource_facts as rf
from fleetspec.discipline import utc_now
from fleetspec.model import Cloud, ClusterPolicyMode, DriverOwner, FleetSpec, Stage


@dataclass(frozen=True)
class GpuFleetArgs:
    spec: FleetSpec
    # When this deployment's changes take effect, for the times it records (the stack output ``timeline``).
    clock: Callable[[], datetime] = field(default=utc_now)


class GpuFleet(pulumi.ComponentResource):
    # What the stack exports (__main__.py), registered as this component's outputs too: ``rf.StackOutputs`` by
    # name, the timeline an Output of the last deployment's.
    outputs: dict[str, Any]

    def __init__(self, name: str, args: GpuFleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:fleet:GpuFleet", name, None, opts)
        spec = args.spec
        # Kubernetes objects go only to the stack's own cluster, never to the shell's current context.
        k8s_opts = pulumi.ResourceOptions(parent=self, providers=[kubernetes_provider(spec, self)])
        last = PreviousDeployment("previous", opts=pulumi.ResourceOptions(parent=self))
        ClusterIdentity("cluster-identity", ClusterIdentityArgs(spec), opts=k8s_opts)

        # PDBs first: nothing may evict a model server before its budget exists. Each pool and pool driver
        # waits for the budgets of the models that run on it (not every budget: the plan stays linear in
        # the fleet's size, and an unrelated model's PDB never holds up a pool).
        budgets: dict[str, list[pulumi.Resource]] = {pool.name: [] for pool in spec.nodePools}
        all_budgets: list[pulumi.Resource] = []
        for model in spec.models:
            budget = ModelBudget(f"{model.namespace}-{model.name}", ModelBudgetArgs(spec, model), opts=k8s_opts)
            all_budgets.append(budget)
            for pool_name in model.nodePools:
                budgets[pool_name].append(budget)

        # A pool update (node image, Kubernetes version) drains nodes: it waits for its models' budgets.
        pool_components: dict[str, pulumi.Resource] = {}
        for pool in spec.nodePools:
            pool_args = GpuPoolArgs(spec, pool, last)
            pool_opts = pulumi.ResourceOptions(parent=self, depends_on=budgets[pool.name])
            if spec.cluster.cloud == Cloud.AKS:
                pool_components[pool.name] = AksGpuPool(pool.name, pool_args, pool_opts)
            elif spec.cluster.cloud == Cloud.EKS:
                pool_components[pool.name] = EksGpuPool(pool.name, pool_args, pool_opts)
            else:
                pool_components[pool.name] = ExistingGpuPool(pool.name, pool_args, k8s_opts.merge(pool_opts))

        # The driver policy reaches every pool: it waits for every budget and every pool, so a pool held in
        # the same change carries its skip label before a new cluster-wide driver version can reach it.
        policy: DriverPolicy | None = None
        if spec.gpuOperator.clusterPolicy != ClusterPolicyMode.EXTERNAL:
            policy = DriverPolicy(
                "driver-policy",
                DriverPolicyArgs(spec),
                opts=k8s_opts.merge(pulumi.ResourceOptions(depends_on=[*all_budgets, *pool_components.values()])),
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
                    PoolDriverArgs(spec, pool),
                    opts=k8s_opts.merge(pulumi.ResourceOptions(depends_on=depends)),
                )

        # The post-upgrade validation job (docs/validation.md): its pods place themselves on upgraded nodes.
        if spec.validation is not None:
            ValidationJob("validation", ValidationJobArgs(spec), opts=k8s_opts)

        # The prod gate (canary-attested): the canary's attestations and drivers, where the pack sees them.
        if spec.stage == Stage.PROD and spec.promotion is not None:
            CanaryGate("promotion", CanaryGateArgs(spec), opts=k8s_opts)

        # A preview deploys nothing, so it records no time; an update records its own moment for what it releases
        # or deploys first, and carries every earlier record forward unchanged (a second `up` changes nothing).
        now = None if pulumi.runtime.is_dry_run() else args.clock()
        recorded = last.timeline(spec, now)
        self.outputs = {**manifests.stack_outputs(spec).as_outputs(),
                        rf.TIMELINE: recorded.apply(lambda timeline: timeline.as_output())}
        self.register_outputs(self.outputs)
