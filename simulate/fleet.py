"""What the simulator is given: a fleet's nodes, its model servers and their budgets, and the upgrade policies that
roll its nodes, as plain values. :func:`fleet_from_spec` builds one from a stack (the nodes it declares, the
replicas placed by the simulator's scheduler); ``checks.snapshot`` builds one from a live cluster.

Nothing here reads a cluster or imports Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from gpu_knowledge import capacity
from renderers import manifests
from gpu_knowledge.capacity import IntOrPercent
from fleetspec.base import ClusterPolicyMode, Stage
from fleetspec.model import DriverOwner, FleetSpec, NodePool, UpgradePolicy
from fleetspec.simulation import Simulation

CLUSTER_POLICY = "ClusterPolicy"
NVIDIA_DRIVER = "NVIDIADriver"


class NotSimulated(ValueError):
    """The stack's driver is not rolled by the GPU Operator's upgrade controller (the node image owns it)."""


@dataclass(frozen=True)
class Policy:
    """One ``upgradePolicy`` as the upgrade controller reads it (the CRD's spelling in the comments)."""

    auto_upgrade: bool = True  # autoUpgrade
    max_parallel: int = 1  # maxParallelUpgrades; 0 is unlimited
    max_unavailable: IntOrPercent = "25%"  # maxUnavailable
    wait_selector: str = ""  # waitForCompletion.podSelector
    wait_timeout: int = 0  # waitForCompletion.timeoutSeconds; 0 waits forever
    deletion_force: bool = False  # podDeletion.force: delete GPU pods no controller owns
    deletion_timeout: int = 300  # podDeletion.timeoutSeconds; 0 waits forever
    drain_enable: bool = False  # drain.enable
    drain_force: bool = False  # drain.force
    drain_timeout: int = 300  # drain.timeoutSeconds

    @classmethod
    def from_spec(cls, policy: UpgradePolicy) -> Policy:
        return cls(policy.autoUpgrade, policy.maxParallelUpgrades, policy.maxUnavailable,
                   policy.waitForCompletion.podSelector, policy.waitForCompletion.timeoutSeconds,
                   policy.podDeletion.force, policy.podDeletion.timeoutSeconds, policy.drain.enable,
                   policy.drain.force, policy.drain.timeoutSeconds)

    def with_parallelism(self, max_parallel: int, max_unavailable: IntOrPercent) -> Policy:
        return Policy(self.auto_upgrade, max_parallel, max_unavailable, self.wait_selector, self.wait_timeout,
                      self.deletion_force, self.deletion_timeout, self.drain_enable, self.drain_force,
                      self.drain_timeout)


@dataclass(frozen=True)
class Group:
    """The nodes one upgrade policy rolls: an NVIDIADriver's (one pool) or the ClusterPolicy's (every pool)."""

    kind: str  # ClusterPolicy | NVIDIADriver
    name: str
    pools: tuple[str, ...]
    policy: Policy
    # The policy pack sees this policy: the stack sends it (not an external ClusterPolicy another stack owns)
    judged_by_pack: bool = True

    @property
    def title(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Pool:
    name: str
    wave: int
    gpus_per_node: int
    validation_job: bool = False  # this project's validation job takes each node's GPUs after its upgrade
    # canary-one-node-at-a-time binds the policy that rolls it: maxParallelUpgrades must be exactly 1 (autoUpgrade
    # on or off), whatever the capacity
    one_at_a_time: bool = False
    judged_validation_gpus: int = 0  # what the pack counts the validation job holding per node (0 while held)
    held: bool = False  # rollout.released false: this change does not release it (a later one will)


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    gpus: int
    needs_upgrade: bool = True  # its driver is not the pool's target yet
    state: str = ""  # the upgrade-state label now ("" none): a node seen mid-upgrade starts that step over
    cordoned: bool = False  # unschedulable before the rollout (stays so: the operator records it)
    ready: bool = True
    skip: bool = False  # a skip label nobody removes in this rollout (paused, held by hand)
    jobs: int = 0  # pods matching waitForCompletion.podSelector running on it


@dataclass(frozen=True)
class Model:
    """A model server: its replicas and the budget its PDB enforces (None: no PDB protects it)."""

    name: str  # namespace/name
    replicas: int
    gpus_per_replica: int
    minimum: int  # the available replicas it must keep (minAvailable); reported against
    pools: tuple[str, ...]
    load_seconds: int  # a rescheduled replica until Ready
    pdb: tuple[IntOrPercent | None, IntOrPercent | None] | None  # (minAvailable, maxUnavailable); None: no PDB
    pdb_name: str = ""

    def disruptions_allowed(self, ready: int) -> int:
        """Evictions its PDB allows now (the disruption controller's arithmetic, ``gpu_knowledge.capacity``)."""
        if self.pdb is None:
            return self.replicas
        return max(0, ready - self._desired_healthy)

    @cached_property
    def _desired_healthy(self) -> int:
        """What its PDB keeps healthy (``capacity.pdb_desired_healthy``): asked on every eviction, worked out once."""
        assert self.pdb is not None
        return capacity.pdb_desired_healthy(self.pdb[0], self.pdb[1], self.replicas)

    @cached_property
    def kept(self) -> int:
        """Replicas its PDB keeps while every one is healthy (0 without a PDB)."""
        return 0 if self.pdb is None else self.replicas - self.disruptions_allowed(self.replicas)


@dataclass(frozen=True)
class Pod:
    """A GPU pod placed on a node: a model's replica (``model`` its index) or another GPU pod (``model`` None)."""

    node: str
    gpus: int
    model: int | None = None
    ready: bool = True
    managed: bool = True  # owned by a controller (a bare pod blocks pod deletion unless force)
    name: str = ""


@dataclass(frozen=True)
class Fleet:
    pools: tuple[Pool, ...]
    nodes: tuple[Node, ...]
    models: tuple[Model, ...]
    groups: tuple[Group, ...]
    durations: Simulation = field(default_factory=Simulation)
    pods: tuple[Pod, ...] = ()  # placed pods; with ``place_replicas`` the simulator places the models' replicas
    place_replicas: bool = False  # the stack's case: no placement is known, the scheduler places every replica
    source: str = "stack"
    per_pool_policies: bool = False  # the stack can give each pool its own policy (nodePools[].upgradePolicy)
    wave_dwell_hours: float = 0.0  # rollout.waveDwellHours: how long a wave runs before the next is released

    def group_of_pool(self) -> dict[str, int]:
        return {pool: index for index, group in enumerate(self.groups) for pool in group.pools}

    def with_policy(self, group: int, policy: Policy) -> Fleet:
        groups = tuple(policy if i == group else g.policy for i, g in enumerate(self.groups))
        return self.with_policies(groups)

    def with_policies(self, policies: tuple[Policy, ...]) -> Fleet:
        groups = tuple(replace(g, policy=p) for g, p in zip(self.groups, policies, strict=True))
        return replace(self, groups=groups)


def node_name(pool: str, index: int) -> str:
    """The stack's nodes are not known by name; they sort by pool, then index."""
    return f"{pool}-{index:05d}"


def fleet_from_spec(spec: FleetSpec) -> Fleet:
    """The stack as the simulator sees it: every pool's ``nodeCount`` nodes needing the new driver, every model's
    replicas (placed by the simulator's scheduler, as a fresh cluster would spread them) and its PDB, and the
    upgrade policies: one per NVIDIADriver (operator v26.7.0+ in per-pool mode) or the ClusterPolicy's."""
    if spec.driver.owner != DriverOwner.OPERATOR:
        raise NotSimulated("the node image owns the driver (driver.owner: image): pools move by generations, not "
                           "by the GPU Operator's upgrade controller, so there is nothing to simulate")
    durations = spec.simulation
    validated = spec.validation is not None
    # Every wave is played, held pools included, so the validation job follows every pool's upgrade.
    pools = tuple(spec_pool(spec, p, validated) for p in spec.nodePools)
    nodes = tuple(Node(node_name(p.name, i), p.name, p.gpusPerNode) for p in spec.nodePools
                  for i in range(p.nodeCount))
    models = tuple(
        Model(f"{m.namespace}/{m.name}", m.replicas, m.gpusPerReplica,
              capacity.min_available_replicas(m.minAvailable, m.replicas), tuple(m.nodePools),
              durations.load_seconds(m.weightsCached, m.loadSeconds), (m.minAvailable, None),
              f"{m.namespace}/{m.name}-pdb")
        for m in spec.models
    )
    return Fleet(pools, nodes, models, spec_groups(spec), durations, place_replicas=True,
                 per_pool_policies=spec.per_pool_upgrade_policies, wave_dwell_hours=spec.rollout.waveDwellHours)


def spec_pool(spec: FleetSpec, pool: NodePool, validated: bool) -> Pool:
    """A pool of the stack, with what the policy pack judges its parallelism by: ``one_at_a_time`` where
    canary-one-node-at-a-time binds the policy that rolls it (every pool of a canary stack; in prod a canary pool's
    own NVIDIADriver, which carries the canary role, and never the ClusterPolicy, which carries none), the
    validation job's GPUs as the pack counts them (parallelism-within-spare-capacity: ``FleetSpec.validation_gpus``,
    none on a held pool)."""
    return Pool(pool.name, pool.rollout.wave, pool.gpusPerNode, validated,
                one_at_a_time=spec.stage == Stage.CANARY or (pool.role == "canary" and spec.per_pool_upgrade_policies),
                judged_validation_gpus=spec.validation_gpus(pool), held=spec.pool_held(pool))


def spec_groups(spec: FleetSpec) -> tuple[Group, ...]:
    """Who rolls which pool: from operator v26.7.0 each NVIDIADriver by its pool's policy
    (``FleetSpec.upgrade_policy``: the stack's, with the pool's own keys in their place); otherwise the
    ClusterPolicy's policy (``gpuOperator.upgradePolicy``) over every pool."""
    op = spec.gpuOperator
    if spec.per_pool_upgrade_policies:
        return tuple(Group(NVIDIA_DRIVER, manifests.nvidia_driver_name(p), (p.name,),
                           Policy.from_spec(spec.upgrade_policy(p))) for p in spec.nodePools)
    return (Group(CLUSTER_POLICY, manifests.CLUSTER_POLICY_NAME, tuple(p.name for p in spec.nodePools),
                  Policy.from_spec(op.upgradePolicy), judged_by_pack=op.clusterPolicy != ClusterPolicyMode.EXTERNAL),)



__all__ = ["CLUSTER_POLICY", "NVIDIA_DRIVER", "Fleet", "Group", "Model", "Node", "NotSimulated", "Pod", "Policy",
           "Pool", "fleet_from_spec", "node_name", "spec_groups", "spec_pool"]
