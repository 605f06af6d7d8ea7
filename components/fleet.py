"""GpuFleet: the whole stack from one FleetSpec: pools, operator driver policy, pool drivers, PDBs."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.cluster import ClusterIdentity, ClusterIdentityArgs, kubernetes_provider
from components.disruption import ModelBudget, ModelBudgetArgs
from components.gpu_operator import DriverPolicy, DriverPolicyArgs, PoolDriver, PoolDriverArgs
from components import previous
from components.node_pools import AksGpuPool, EksGpuPool, ExistingGpuPool, GpuPoolArgs
from components.previous import PreviousDeployment
from components.promotion import CanaryGate, CanaryGateArgs
from components.validation import ValidationJob, ValidationJobArgs
from spec import manifests
from spec.model import Cloud, ClusterPolicyMode, DriverOwner, FleetSpec, NodePool, Stage


@dataclass(frozen=True)
class GpuFleetArgs:
    spec: FleetSpec


def pool_summary(spec: FleetSpec, pool: NodePool) -> dict[str, object]:
    """What a reviewer wants per pool: the driver it is pinned to, its image, and whether it is held."""
    generations = [
        {
            "id": g.id,
            "driverVersion": g.driverVersion,
            "image": g.releaseVersion or g.nodeImageVersion,
            "retired": g.retired,
        }
        for g in pool.generations or []
    ]
    newest = max(pool.live_generations, key=lambda g: g.id) if pool.live_generations else None
    if spec.driver.owner == DriverOwner.IMAGE and newest is not None:
        driver = newest.driverVersion
    else:
        driver = spec.pool_driver_version(pool)
    if newest is not None:
        image = newest.releaseVersion or newest.nodeImageVersion
    else:
        image = pool.eks.releaseVersion if pool.eks else None
    return {
        "role": pool.role,
        "wave": pool.rollout.wave,
        "held": spec.pool_held(pool),
        "driverVersion": driver,
        "image": image,
        "generations": generations,
    }


class GpuFleet(pulumi.ComponentResource):
    stage: str
    cluster: str
    driver_version: str
    pools: dict[str, dict[str, object]]
    released_pools: list[str]
    held_pools: list[str]
    cloud_pools: dict[str, str]  # cloud pool -> replace-only fields it is deployed with (spec.replacement)
    operator_version: str
    per_pool_drivers: str
    previous_driver_version: str

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

        self.cloud_pools = {
            name: record
            for component in pool_components.values()
            for name, record in getattr(component, "records", {}).items()
        }
        self.operator_version = spec.gpuOperator.chartVersion
        self.per_pool_drivers = manifests.per_pool_drivers(spec)
        self.previous_driver_version = spec.driver.previousVersion or ""
        self.stage = spec.stage.value
        self.cluster = spec.cluster.name
        self.driver_version = spec.driver.version
        self.pools = {pool.name: pool_summary(spec, pool) for pool in spec.nodePools}
        ordered = sorted(spec.nodePools, key=lambda p: (p.rollout.wave, p.name))
        self.released_pools = [p.name for p in ordered if not spec.pool_held(p)]
        self.held_pools = [p.name for p in ordered if spec.pool_held(p)]
        self.register_outputs(
            {
                "stage": self.stage,
                "cluster": self.cluster,
                "driverVersion": self.driver_version,
                "pools": self.pools,
                "releasedPools": self.released_pools,
                "heldPools": self.held_pools,
                previous.CLOUD_POOLS: self.cloud_pools,
                previous.OPERATOR_VERSION: self.operator_version,
                previous.PER_POOL_DRIVERS: self.per_pool_drivers,
                previous.PREVIOUS_DRIVER_VERSION: self.previous_driver_version,
            }
        )
