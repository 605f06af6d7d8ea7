"""Capacity arithmetic for a driver rollout: how many nodes may go down at once, and what that costs.

Pure functions over plain numbers, shared by the policy pack (planned capacity from the config), the
live preflight check (measured capacity from the nodes) and watch. No Pulumi, no Kubernetes.

Resolving settings
  ``scaled_value(value, total, round_up=)``     int-or-percent -> int, as Kubernetes' intstr does
  ``max_unavailable_nodes(value, total)``        the operator's maxUnavailable (percent rounds UP)
  ``min_available_replicas(value, replicas)``    a PDB's minAvailable (percent rounds UP)
  ``pdb_disruptions_allowed(min_available, max_unavailable, replicas)``
                                                 pods a PDB lets go at once (the disruption
                                                 controller's arithmetic; both percentages round UP)
  ``upgrade_slots(max_parallel, max_unavailable, total, ...)``
                                                 nodes the operator's upgrade controller may take
                                                 down at once (``GetUpgradesAvailable``)
  ``node_group_unavailable(max_unavailable, max_unavailable_percentage, desired_size)``
                                                 nodes an EKS managed node group update takes down
                                                 at once (``updateConfig``; a percentage rounds UP)
  ``node_group_surges(update_strategy, capacity_type)``
                                                 whether that update launches new nodes before old
                                                 ones leave (DEFAULT on ON_DEMAND/SPOT only)
Planned capacity (from the config)
  ``PoolShape(name, nodes, gpus_per_node)`` and ``Workload(name, replicas, gpus_per_replica,
  min_available)``; ``spare_gpus(pool, workloads)``, ``spare_nodes(pool, workloads)`` and
  ``take_nodes_out(pool, workloads, nodes_out, validation_gpus_per_node) -> Disruption`` (is the loss
  covered by spare capacity, and which workloads would drop below minAvailable in the worst case), whose
  GPUs out are ``gpus_out_of_service`` (the nodes upgrading, and what the validation job holds meanwhile);
  ``nodes_out_within_budgets(pool, workloads)``: the most nodes that can be out at once while the
  replicas every PDB keeps still fit on the others (what no schedule can beat: the simulator's lower
  bound); ``validation_gpus(gpus_per_node)``: what the post-upgrade validation job's pod holds.
Measured capacity (from live nodes)
  ``spare_capacity([NodeGpus(name, allocatable, requested), ...]) -> SpareCapacity``: spare GPUs
  of a pool against its largest node.

All GPU counts are ``nvidia.com/gpu`` units. The planned model counts GPUs, not placements: it
assumes an evicted replica fits wherever enough GPUs are free on one node of the pool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import get_args

import re
from typing import Literal

IntOrPercent = int | str

# An EKS managed node group's update strategy and capacity type (the node group's own enums): whether an update
# surges depends on both (node_group_surges).
EksUpdateStrategy = Literal["DEFAULT", "MINIMAL"]
EksCapacityType = Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"]

PERCENT = re.compile(r"^(100|[1-9]?\d)%$")


def percent_of(value: str) -> int | None:
    """The number of a percentage such as ``"25%"`` (0-100, no sign, no spaces), else None: the one grammar
    for every int-or-percent field, read by the spec and by the capacity arithmetic alike."""
    match = PERCENT.fullmatch(value)
    return int(match.group(1)) if match else None



def scaled_value(value: IntOrPercent, total: int, *, round_up: bool) -> int:
    """An int-or-percent against ``total``: ``"25%"`` of 6 is 2 rounded up, 1 rounded down."""
    if total < 0:
        raise ValueError(f"total must not be negative, got {total}")
    if isinstance(value, bool):
        raise ValueError(f"expected an integer or a percentage such as '25%', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a non-negative integer, got {value}")
        return value
    percent = percent_of(value) if isinstance(value, str) else None
    if percent is None:
        raise ValueError(f"expected an integer or a percentage from 0% to 100% such as '25%', got {value!r}")
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def max_unavailable_nodes(max_unavailable: IntOrPercent, total_nodes: int) -> int:
    """The upgrade controller's maxUnavailable in nodes: a percentage of the managed nodes, rounded up."""
    return scaled_value(max_unavailable, total_nodes, round_up=True)


def min_available_replicas(min_available: IntOrPercent, replicas: int) -> int:
    """A PDB's minAvailable in pods: Kubernetes rounds a percentage up (``"50%"`` of 3 is 2)."""
    return scaled_value(min_available, replicas, round_up=True)


def pdb_disruptions_allowed(
    min_available: IntOrPercent | None,
    max_unavailable: IntOrPercent | None,
    replicas: int,
    *,
    healthy: int | None = None,
) -> int:
    """Pods a PodDisruptionBudget lets go at once, as the Kubernetes disruption controller computes
    ``status.disruptionsAllowed`` (``getExpectedPodCount``, then ``currentHealthy - desiredHealthy``).

    - ``maxUnavailable`` (int or percent of ``replicas``, a percentage rounded UP): desiredHealthy is
      ``replicas - maxUnavailable``, never below 0.
    - ``minAvailable`` (int, or percent of ``replicas`` rounded UP): desiredHealthy is that number.
    - neither: desiredHealthy is 0 (the PDB protects nothing); both: Kubernetes rejects the PDB.

    ``healthy`` is the number of healthy pods (default: every replica, the plan-time case). Raises
    ``ValueError`` for a malformed value or both fields set.
    """
    desired = pdb_desired_healthy(min_available, max_unavailable, replicas)
    current = replicas if healthy is None else healthy
    return max(0, current - desired)


def pdb_desired_healthy(min_available: IntOrPercent | None, max_unavailable: IntOrPercent | None,
                        replicas: int) -> int:
    """The disruption controller's ``desiredHealthy`` (:func:`pdb_disruptions_allowed`): the healthy pods the PDB
    keeps, whatever number are healthy now."""
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    if min_available is not None and max_unavailable is not None:
        raise ValueError("a PodDisruptionBudget sets minAvailable or maxUnavailable, not both")
    if max_unavailable is not None:
        return max(0, replicas - scaled_value(max_unavailable, replicas, round_up=True))
    if min_available is not None:
        return scaled_value(min_available, replicas, round_up=True)
    return 0


def upgrade_slots(
    max_parallel_upgrades: int,
    max_unavailable: IntOrPercent,
    total_nodes: int,
    *,
    upgrade_required: int | None = None,
    in_progress: int = 0,
    unavailable: int = 0,
) -> int:
    """Nodes the operator may start upgrading now, as ``GetUpgradesAvailable`` computes it.

    ``maxParallelUpgrades: 0`` means unlimited (every node waiting in ``upgrade-required``).
    ``upgrade_required`` defaults to every node (the plan-time worst case: a new version makes every
    node out of date); ``unavailable`` counts nodes already cordoned or NotReady for any reason.
    """
    if max_parallel_upgrades < 0:
        raise ValueError(f"maxParallelUpgrades must not be negative, got {max_parallel_upgrades}")
    waiting = total_nodes if upgrade_required is None else upgrade_required
    limit = max_unavailable_nodes(max_unavailable, total_nodes)
    avail = waiting if max_parallel_upgrades == 0 else max_parallel_upgrades - in_progress
    avail = min(avail, limit)
    if unavailable >= limit:
        avail = 0
    elif limit < total_nodes and unavailable + avail > limit:
        avail = limit - unavailable
    # Slots only turn into nodes that are waiting for an upgrade.
    return max(0, min(avail, waiting))


# EKS managed node group updates (``updateConfig`` of the node group; reference peers.md section 4).
EKS_UPDATE_STRATEGIES = get_args(EksUpdateStrategy)
EKS_CAPACITY_TYPES = get_args(EksCapacityType)


def _eks_update_limit(value: object, what: str) -> int:
    # EKS takes 1-100 for both maxUnavailable and maxUnavailablePercentage.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise ValueError(f"{what} must be an integer from 1 to 100, got {value!r}")
    return value


def node_group_unavailable(
    max_unavailable: object | None, max_unavailable_percentage: object | None, desired_size: int
) -> int:
    """Nodes an EKS managed node group update takes out at once: ``updateConfig.maxUnavailable``, or
    ``maxUnavailablePercentage`` of the desired size rounded up; neither set is the EKS default of 1.
    Never more than the group has. Raises ``ValueError`` for a malformed value or both set."""
    if desired_size < 0:
        raise ValueError(f"desired size must not be negative, got {desired_size}")
    if max_unavailable is not None and max_unavailable_percentage is not None:
        raise ValueError("updateConfig sets maxUnavailable or maxUnavailablePercentage, not both")
    if max_unavailable_percentage is not None:
        percent = _eks_update_limit(max_unavailable_percentage, "maxUnavailablePercentage")
        nodes = scaled_value(f"{percent}%", desired_size, round_up=True)
    elif max_unavailable is not None:
        nodes = _eks_update_limit(max_unavailable, "maxUnavailable")
    else:
        nodes = 1
    return min(nodes, desired_size)


def node_group_surges(update_strategy: object | None, capacity_type: object | None) -> bool:
    """Whether an EKS managed node group update launches new nodes before old ones leave.

    DEFAULT launches first (surge) on ON_DEMAND and SPOT capacity; MINIMAL terminates old nodes
    first (no surge); a CAPACITY_BLOCK group never surges, whatever the strategy (the reservation
    is fixed). Unset values take the EKS defaults (DEFAULT, ON_DEMAND). Raises ``ValueError`` for
    a value EKS does not know.
    """
    strategy = "DEFAULT" if update_strategy is None else update_strategy
    capacity_type = "ON_DEMAND" if capacity_type is None else capacity_type
    if strategy not in EKS_UPDATE_STRATEGIES:
        raise ValueError(f"updateStrategy must be one of {', '.join(EKS_UPDATE_STRATEGIES)}, got {strategy!r}")
    if capacity_type not in EKS_CAPACITY_TYPES:
        raise ValueError(f"capacityType must be one of {', '.join(EKS_CAPACITY_TYPES)}, got {capacity_type!r}")
    return strategy == "DEFAULT" and capacity_type != "CAPACITY_BLOCK"


# ---------------------------------------------------------------- planned capacity (from the config)


@dataclass(frozen=True)
class PoolShape:
    """A pool as the config declares it: identical nodes with ``gpus_per_node`` GPUs each."""

    name: str
    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Workload:
    """A model server on the pool: its replicas, GPUs per replica and its PDB (minAvailable, or
    maxUnavailable for a PDB written that way)."""

    name: str
    replicas: int
    gpus_per_replica: int
    min_available: IntOrPercent | None
    max_unavailable: IntOrPercent | None = None

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def disruption_allowed(self) -> int:
        """Replicas the PDB lets go at once (``pdb_disruptions_allowed``)."""
        return pdb_disruptions_allowed(self.min_available, self.max_unavailable, self.replicas)

    @property
    def min_replicas(self) -> int:
        """Replicas the PDB keeps running while every replica is healthy."""
        return self.replicas - self.disruption_allowed


def requested_gpus(workloads: Iterable[Workload]) -> int:
    return sum(w.gpus for w in workloads)


def spare_gpus(pool: PoolShape, workloads: Iterable[Workload]) -> int:
    """GPUs left free when every replica runs; negative when the pool is over-committed."""
    return pool.gpus - requested_gpus(workloads)


def spare_nodes(pool: PoolShape, workloads: Iterable[Workload]) -> int:
    """Whole nodes' worth of spare GPUs (0 when the pool is full or over-committed)."""
    return max(0, spare_gpus(pool, workloads)) // pool.gpus_per_node


@dataclass(frozen=True)
class Disruption:
    """What taking ``nodes_out`` nodes of a pool out at once does, in the worst case."""

    pool: str
    nodes_out: int
    gpus_out: int
    spare_gpus: int
    below_min: tuple[str, ...]  # workloads that could drop below minAvailable

    @property
    def covered(self) -> bool:
        """The spare capacity can host every replica evicted from the nodes that are out."""
        return self.gpus_out <= self.spare_gpus

    @property
    def safe(self) -> bool:
        return self.covered and not self.below_min

    @property
    def pending_only(self) -> bool:
        """Not covered, yet no workload drops below minAvailable: the evicted pods wait Pending for a node while
        the PDBs hold. Preflight's spare-capacity warns here and the pack's spare-capacity advises (one node at a
        time); below minAvailable both refuse."""
        return not self.covered and not self.below_min


def _worst_case_lost(workload: Workload, pool: PoolShape, nodes_out: int) -> int:
    """Replicas of ``workload`` on the nodes that are out, if the scheduler packed them there."""
    per_node = max(1, pool.gpus_per_node // workload.gpus_per_replica)
    return min(workload.replicas, nodes_out * per_node)


def gpus_out_of_service(pool: PoolShape, nodes_out: int, validation_gpus_per_node: int = 0) -> int:
    """GPUs the model servers cannot use while ``nodes_out`` nodes of ``pool`` upgrade at once: those nodes' GPUs
    and, on a pool the validation job validates, what its pods hold (``validation_gpus``) on as many nodes just
    upgraded. The upgrade controller starts the next node as soon as one is done, while the job still holds
    that one, so both are out together (never more nodes than the pool has)."""
    if nodes_out < 0 or nodes_out > pool.nodes:
        raise ValueError(f"nodes_out must be between 0 and {pool.nodes} (the pool's nodes), got {nodes_out}")
    if validation_gpus_per_node < 0 or validation_gpus_per_node > pool.gpus_per_node:
        raise ValueError(f"a validation pod holds between 0 and {pool.gpus_per_node} GPUs of a node, "
                         f"got {validation_gpus_per_node}")
    validating = min(nodes_out, pool.nodes - nodes_out)
    return nodes_out * pool.gpus_per_node + validating * validation_gpus_per_node


def take_nodes_out(
    pool: PoolShape, workloads: Sequence[Workload], nodes_out: int, validation_gpus_per_node: int = 0
) -> Disruption:
    """Worst case of ``nodes_out`` nodes of ``pool`` down at once (cordoned and their GPU pods evicted), with
    the validation job holding ``validation_gpus_per_node`` on as many nodes just upgraded
    (``gpus_out_of_service``).

    A workload stays at or above minAvailable if the replicas it can lose fit in its PDB's allowance,
    or if the pool's spare GPUs can host every evicted replica elsewhere.
    """
    gpus_out = gpus_out_of_service(pool, nodes_out, validation_gpus_per_node)
    spare = spare_gpus(pool, workloads)
    covered = gpus_out <= spare
    below = []
    for workload in workloads:
        # A replica larger than a node never schedules, whatever is taken out.
        fits = workload.gpus_per_replica <= pool.gpus_per_node
        lost = _worst_case_lost(workload, pool, nodes_out) if fits else workload.replicas
        if not fits or (lost > workload.disruption_allowed and not covered):
            below.append(workload.name)
    return Disruption(pool.name, nodes_out, gpus_out, spare, tuple(below))


def policy_nodes_out(max_parallel_upgrades: int, max_unavailable: IntOrPercent, policy_nodes: int, pool_nodes: int) -> int:
    """Nodes of one pool an upgrade policy may take out at once, in the worst case: its slots over every node it
    rolls (``upgrade_slots``), never more than the pool has. What the pack's parallelism rule judges a pool by."""
    return min(upgrade_slots(max_parallel_upgrades, max_unavailable, policy_nodes), pool_nodes)


def most_nodes_out_safely(pool: PoolShape, workloads: Sequence[Workload], validation_gpus_per_node: int = 0) -> int:
    """The most nodes of ``pool`` that ``take_nodes_out`` judges safe to take out at once (0: not even one). Safety
    only shrinks as more nodes go out (more GPUs out, more replicas lost), so a bisection finds it."""
    good, bad = 0, pool.nodes + 1
    while bad - good > 1:
        middle = (good + bad) // 2
        if take_nodes_out(pool, workloads, middle, validation_gpus_per_node).safe:
            good = middle
        else:
            bad = middle
    return good


def nodes_out_within_budgets(pool: PoolShape, workloads: Iterable[Workload], *, unavailable: int = 0) -> int:
    """The most nodes of ``pool`` that can be out at once (evicted, upgrading) while every replica the PDBs keep
    (``Workload.min_replicas``) still runs on the other nodes, ``unavailable`` of which are out for other reasons
    (cordoned, NotReady). Counted in GPUs, so it can only overstate what fits: a bound no schedule that honours
    the PDBs beats. 0 when even the kept replicas do not fit on the nodes in service."""
    kept = sum(w.min_replicas * w.gpus_per_replica for w in workloads)
    in_service = pool.nodes - unavailable
    if pool.gpus_per_node <= 0 or in_service <= 0:
        return 0
    return max(0, in_service - math.ceil(kept / pool.gpus_per_node))


def validation_gpus(gpus_per_node: int) -> int:
    """``nvidia.com/gpu`` the post-upgrade validation job's pod requests on a node (components/validation.py): every
    GPU of the node, so it measures the whole node and runs only where no model replica has landed yet."""
    if gpus_per_node <= 0:
        raise ValueError(f"gpus per node must be positive, got {gpus_per_node}")
    return gpus_per_node


# ---------------------------------------------------------------- measured capacity (from live nodes)


@dataclass(frozen=True)
class NodeGpus:
    """One node's ``nvidia.com/gpu``: allocatable, and requested by the pods scheduled on it."""

    name: str
    allocatable: int
    requested: int

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.requested)


@dataclass(frozen=True)
class SpareCapacity:
    """A pool's spare GPUs measured against its largest node (the most one upgrade can take out)."""

    allocatable: int
    requested: int
    largest_node: int

    @property
    def spare(self) -> int:
        return self.allocatable - self.requested

    @property
    def spare_nodes(self) -> int:
        """Whole largest-nodes' worth of spare GPUs."""
        if self.largest_node <= 0:
            return 0
        return max(0, self.spare) // self.largest_node

    @property
    def covers_one_node(self) -> bool:
        """Every GPU pod of any one node could move to the other nodes (by GPU count)."""
        return self.largest_node > 0 and self.spare >= self.largest_node


def spare_capacity(nodes: Iterable[NodeGpus]) -> SpareCapacity:
    """Sum a pool's nodes: spare = allocatable - requested, compared with the largest node's allocatable."""
    listed = list(nodes)
    return SpareCapacity(
        allocatable=sum(n.allocatable for n in listed),
        requested=sum(n.requested for n in listed),
        largest_node=max((n.allocatable for n in listed), default=0),
    )


__all__ = [
    "Disruption",
    "IntOrPercent",
    "NodeGpus",
    "PoolShape",
    "SpareCapacity",
    "Workload",
    "gpus_out_of_service",
    "max_unavailable_nodes",
    "min_available_replicas",
    "most_nodes_out_safely",
    "nodes_out_within_budgets",
    "node_group_surges",
    "node_group_unavailable",
    "pdb_desired_healthy",
    "pdb_disruptions_allowed",
    "policy_nodes_out",
    "requested_gpus",
    "scaled_value",
    "spare_capacity",
    "spare_gpus",
    "spare_nodes",
    "take_nodes_out",
    "upgrade_slots",
    "validation_gpus",
]
