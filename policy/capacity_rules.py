"""Rules for runbook section 2, capacity: how many nodes an upgrade takes out at once (the canary one at a
time, prod within spare capacity) and whether each pool has room for the pods of an upgrading node."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policy import facts
from policy.facts import StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from gpu_knowledge import capacity
from engine_contracts import resource_facts as rf
from fleetspec.base import Stage
from vocabulary.policy_ids import PolicyId


def _workloads(stack: StackFacts) -> tuple[dict[str, list[capacity.Workload]], list[Finding]]:
    """Model servers per pool. A model on several pools counts in full on each (it may all land on one)."""
    per_pool: dict[str, list[capacity.Workload]] = {}
    problems = []
    for model in stack.models:
        budget = (model.facts.min_available, model.facts.max_unavailable)
        if model.facts.replicas is None or model.facts.gpus_per_replica is None or budget == (None, None):
            problems.append(advice(f"model {model.name}: replicas, GPUs per replica or minAvailable not visible"))
            continue
        workload = capacity.Workload(model.name, model.facts.replicas, model.facts.gpus_per_replica, *budget)
        try:
            workload.disruption_allowed  # noqa: B018 - validates the PDB's values
        except ValueError as error:
            # pdb-allows-drain reports the malformed PDB itself; capacity cannot be computed here.
            problems.append(advice(f"model {model.name}: cannot compute its PDB allowance: {error}", model.resource))
            continue
        for pool in model.facts.pools:
            per_pool.setdefault(pool, []).append(workload)
    return per_pool, problems


def _shape(pool: facts.Pool) -> capacity.PoolShape | None:
    if pool.nodes is None or pool.facts.gpus_per_node is None:
        return None
    return capacity.PoolShape(pool.name, pool.nodes, pool.facts.gpus_per_node)


# ---------------------------------------------------------------- canary-one-node-at-a-time


def _canary_node_group(group: facts.NodeGroupUpdate) -> Iterator[Finding]:
    """A canary node group updates one node at a time; a percentage counts too (50% of 4 nodes is two)."""
    res = group.resource
    unavailable, percentage = group.setting("maxUnavailable"), group.setting("maxUnavailablePercentage")
    if group.update_config is not None and not isinstance(group.update_config, Mapping):
        yield Finding(f"{res.name}: canary node group updateConfig {group.update_config!r} is not a mapping", res)
        return
    setting = f"maxUnavailablePercentage={percentage}" if percentage is not None else f"maxUnavailable={unavailable}"
    desired = group.desired_size
    if not isinstance(desired, int) or isinstance(desired, bool):
        # Without the group's size a percentage may mean any number of nodes: never cap it at one.
        if percentage is not None or (isinstance(unavailable, int) and unavailable > 1):
            yield Finding(f"{res.name}: canary node group must update one node at a time; {setting} with no "
                          "visible desired size may take more", res)
        return
    try:
        nodes = capacity.node_group_unavailable(unavailable, percentage, desired)
    except ValueError as error:
        yield Finding(f"{res.name}: canary node group updateConfig: {error}", res)
        return
    if nodes > 1:
        yield Finding(f"{res.name}: canary node group must update one node at a time; {setting} takes {nodes}", res)


@stack_policy(
    PolicyId.CANARY_ONE_NODE_AT_A_TIME,
    "Checks that the canary upgrades one node at a time (maxParallelUpgrades: 1).",
    severity=Severity.HIGH, topics=("disruption", "canary"),
    remediation="Set gpuOperator.upgradePolicy.maxParallelUpgrades: 1 in the canary stack (0 means unlimited), and "
    "no other value in a canary pool's own nodePools[].upgradePolicy.",
    config_keys=("gpuOperator.upgradePolicy.maxParallelUpgrades", "nodePools[].upgradePolicy.maxParallelUpgrades"),
)
def canary_one_node_at_a_time(stack: StackFacts) -> Iterator[Finding]:
    """The canary upgrades one node at a time (maxParallelUpgrades: 1; 0 means unlimited)."""
    canary = stack.stage is Stage.CANARY
    for res in stack.resources:
        driver = stack.operator_driver(res)
        if driver is not None and driver.rolling_policy is not None:
            if not canary and driver.facts.role != rf.CANARY_ROLE:
                continue
            # An unset key takes the resource kind's default (Helm renders 0, i.e. unlimited).
            parallel = driver.policy_setting("maxParallelUpgrades")
            if isinstance(parallel, bool) or parallel != 1:
                what = "0 (unlimited)" if parallel == 0 and not isinstance(parallel, bool) else repr(parallel)
                unset = "" if "maxParallelUpgrades" in driver.sent_policy else " (unset: the default of this resource)"
                yield Finding(
                    f"{res.name}: canary upgradePolicy.maxParallelUpgrades must be 1, not {what}{unset}", res
                )
        elif canary and (group := facts.node_group_update(res)) is not None:
            yield from _canary_node_group(group)
    if canary and _operator_rolls_drivers(stack) and not any(d.rolling_policy is not None for d in stack.drivers):
        yield advice(
            "upgrade policy not visible: no operator driver resource of this stack carries an upgradePolicy, so "
            "the ClusterPolicy's policy applies; make sure it has maxParallelUpgrades 1"
        )


def _operator_rolls_drivers(stack: StackFacts) -> bool:
    """The operator's driver is in play: an operator driver resource is enabled, or a pool's node image
    ships no driver (so an external ClusterPolicy's driver installs on it)."""
    if any(d.facts.enabled for d in stack.drivers):
        return True
    return any(not any(facts.node_image_owns_driver(r) for r in pool.resources) for pool in stack.pools.values())


# ---------------------------------------------------------------- parallelism-within-spare-capacity


def _policy_groups(stack: StackFacts) -> list[tuple[facts.OperatorDriver, list[facts.Pool]]]:
    """Each upgrade policy with the pools it rolls (an NVIDIADriver that carries its own upgradePolicy,
    else the cluster-wide one over every pool the operator's driver covers)."""
    cluster = [d for d in stack.drivers if d.cluster_wide and d.facts.enabled]
    groups: list[tuple[facts.OperatorDriver, list[facts.Pool]]] = []
    inherited: list[facts.Pool] = []
    for driver in stack.drivers:
        if driver.cluster_wide:
            continue
        selected = stack.pools_selected_by(driver)
        if driver.facts.upgrade_policy:
            groups.append((driver, selected))
        else:
            inherited.extend(selected)
    for driver in cluster:
        if driver.facts.upgrade_policy:
            covered = stack.pools_selected_by(driver) + inherited
            groups.append((driver, covered))
    return groups


def _count(value: Any) -> int | None:
    """A non-negative integer setting, or None when it is malformed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


@stack_policy(
    PolicyId.PARALLELISM_WITHIN_SPARE_CAPACITY,
    "Checks that prod upgrade parallelism (the operator's upgrade policy, and EKS node group updates that cannot surge) never takes more GPUs out than spare capacity covers, keeping every model at minAvailable.",
    severity=Severity.CRITICAL, topics=("capacity", "disruption"),
    remediation="Lower maxParallelUpgrades or maxUnavailable (the pool's own nodePools[].upgradePolicy where it sets them; EKS: eks.maxUnavailable), or add nodes to the pool until the spare GPUs cover the nodes upgraded at once; `gpu-rollout simulate` recommends per pool what the rule admits.",
    config_keys=(
        "gpuOperator.upgradePolicy.maxParallelUpgrades",
        "gpuOperator.upgradePolicy.maxUnavailable",
        "nodePools[].upgradePolicy.maxParallelUpgrades",
        "nodePools[].upgradePolicy.maxUnavailable",
        "nodePools[].eks.maxUnavailable",
        "nodePools[].nodeCount",
    ),
)
def parallelism_within_spare_capacity(stack: StackFacts) -> Iterator[Finding]:
    """In prod, the nodes the operator may take down at once fit in spare capacity, keeping minAvailable."""
    if not stack.stage_stated:
        yield advice("the stack's stage is not visible on its resources; cannot check upgrade parallelism")
        return
    if stack.stage is not Stage.PROD:
        return
    workloads, problems = _workloads(stack)
    yield from problems
    for driver, group in _policy_groups(stack):
        if driver.policy_setting("autoUpgrade") is False or not group:
            continue
        shapes = [(p, _shape(p)) for p in group]
        if any(shape is None for _, shape in shapes):
            yield advice(f"{driver.resource.name}: node count or GPUs per node not visible for every pool", driver.resource)
            continue
        total = sum(shape.nodes for _, shape in shapes if shape is not None)
        parallel = driver.policy_setting("maxParallelUpgrades")
        unavailable = driver.policy_setting("maxUnavailable")
        if _count(parallel) is None:
            yield Finding(
                f"{driver.resource.name}: upgradePolicy.maxParallelUpgrades {parallel!r} is not a non-negative integer",
                driver.resource,
            )
            continue
        try:
            capacity.upgrade_slots(parallel, unavailable, total)  # a malformed maxUnavailable fails here
        except ValueError as error:
            yield Finding(f"{driver.resource.name}: upgradePolicy.maxUnavailable {unavailable!r}: {error}", driver.resource)
            continue
        for pool, shape in shapes:
            assert shape is not None
            if _no_room_for_one_node(pool, shape, workloads):
                continue  # spare-capacity reports it: no parallelism setting can fix a pool with no spare node
            validating = stack.validation_gpus.get(pool.name, 0)
            try:
                nodes_out = capacity.policy_nodes_out(parallel, unavailable, total, shape.nodes)
                outcome = capacity.take_nodes_out(shape, workloads.get(pool.name, []), nodes_out, validating)
            except ValueError as error:
                yield Finding(f"pool {pool.name}: the validation job's request: {error}", pool.resources[0])
                continue
            if outcome.safe:
                continue
            yield Finding(
                f"{driver.resource.name}: maxParallelUpgrades={parallel}, maxUnavailable={unavailable} lets "
                f"{outcome.nodes_out} of {total} nodes upgrade at once; on pool {pool.name} "
                f"{_shortfall(outcome, validating)}",
                driver.resource,
            )
    yield from _node_group_parallelism(stack.pools, workloads, stack.validation_gpus)


def _shortfall(outcome: capacity.Disruption, validating: int = 0) -> str:
    """Why taking the nodes out is unsafe, in the words every parallelism finding uses."""
    reasons = []
    if not outcome.covered:
        held = (f" (the validation job's {validating} per node just upgraded included)"
                if validating and outcome.gpus_out > outcome.nodes_out * validating else "")
        reasons.append(f"{outcome.gpus_out} GPUs out{held} but only {max(0, outcome.spare_gpus)} spare")
    if outcome.below_min:
        reasons.append(f"{', '.join(outcome.below_min)} could drop below minAvailable")
    return "; ".join(reasons)


@dataclass(frozen=True)
class _Surge:
    """Whether an update of a node group launches new nodes before old ones leave; if not, why not.
    A malformed setting counts as no surge; ``malformed`` says the reason is a bad value."""

    surges: bool
    why: str = ""
    malformed: bool = False


def _group_surge(group: facts.NodeGroupUpdate, generations: bool = False) -> _Surge:
    """``generations``: the pool moves by new node groups, where updateStrategy governs no replacement;
    MINIMAL then only says GPU capacity is scarce, so no new generation fits beside the old one."""
    if group.update_config is not None and not isinstance(group.update_config, Mapping):
        return _Surge(False, f"updateConfig must be an object, not {group.update_config!r}", True)
    strategy = group.setting("updateStrategy")
    try:
        if capacity.node_group_surges(strategy, group.capacity_type):
            return _Surge(True)
    except ValueError as error:
        return _Surge(False, str(error), True)
    if group.capacity_type == "CAPACITY_BLOCK":
        return _Surge(False, "capacityType CAPACITY_BLOCK: the reservation is fixed")
    if generations:
        return _Surge(False, f"updateStrategy {strategy}: GPU capacity declared scarce, no room for a new "
                             "generation beside the old one")
    return _Surge(False, f"updateStrategy {strategy}: old nodes terminate first")


def _node_group_parallelism(
    pools: dict[str, facts.Pool], workloads: dict[str, list[capacity.Workload]], validation: dict[str, int]
) -> Iterator[Finding]:
    """EKS managed node groups take ``updateConfig.maxUnavailable`` nodes out at once during an AMI update;
    without surge the pool's spare GPUs must cover them, keeping every model at minAvailable."""
    for pool in pools.values():
        for res in pool.resources:
            group = facts.node_group_update(res)
            if group is None:
                continue
            surge = _group_surge(group)
            if surge.surges:
                continue
            if surge.malformed:
                yield Finding(f"{res.name}: {surge.why}", res)
                continue
            desired = _count(group.desired_size)
            if desired is None or pool.facts.gpus_per_node is None:
                yield advice(f"{res.name}: scalingConfig.desiredSize or GPUs per node not visible", res)
                continue
            unavailable = group.setting("maxUnavailable")
            percentage = group.setting("maxUnavailablePercentage")
            try:
                nodes_out = capacity.node_group_unavailable(unavailable, percentage, desired)
            except ValueError as error:
                yield Finding(f"{res.name}: updateConfig: {error}", res)
                continue
            # The pool's models run on all of its nodes: on a Capacity Block those of every generation
            # sharing the reservation (facts.Pool.nodes), elsewhere the group's own.
            shape = capacity.PoolShape(pool.name, max(desired, pool.nodes or 0), pool.facts.gpus_per_node)
            if _no_room_for_one_node(pool, shape, workloads):
                continue  # spare-capacity reports it
            validating = validation.get(pool.name, 0)
            try:
                outcome = capacity.take_nodes_out(shape, workloads.get(pool.name, []), nodes_out, validating)
            except ValueError as error:
                yield Finding(f"{res.name}: the validation job's request: {error}", res)
                continue
            if outcome.safe:
                continue
            setting = (
                f"maxUnavailablePercentage={percentage}" if percentage is not None
                else f"maxUnavailable={1 if unavailable is None else unavailable}"
            )
            yield Finding(
                f"{res.name}: updateConfig.{setting} lets {outcome.nodes_out} of {desired} nodes update at once "
                f"with no surge ({surge.why}); on pool {pool.name} {_shortfall(outcome, validating)}",
                res,
            )


# ---------------------------------------------------------------- spare-capacity


def _surge(pool: facts.Pool) -> tuple[bool, str]:
    """A new node arrives before an old one leaves: image generations (blue/green) where the pool's node
    groups can launch beside the old ones, or AKS image surge. Also says why a generations pool has none."""
    if pool.moves_by_generations:
        blocked: dict[str, list[str]] = {}
        for group in _node_groups(pool):
            surge = _group_surge(group, generations=True)
            if not surge.surges:
                blocked.setdefault(surge.why, []).append(group.resource.name)
        if not blocked:
            return True, ""
        reasons = [f"{', '.join(names)} ({why})" for why, names in blocked.items()]
        return False, "; its generations cannot surge: " + "; ".join(reasons)
    for res in pool.resources:
        if res.type == rf.AKS_POOL and facts.node_image_owns_driver(res):
            max_surge = str(facts.prop(res.props, "upgradeSettings", "maxSurge", default="0"))
            if max_surge not in ("0", "0%", ""):
                return True, ""
    return False, ""


def _no_room_for_one_node(
    pool: facts.Pool, shape: capacity.PoolShape, workloads: dict[str, list[capacity.Workload]]
) -> bool:
    """What spare-capacity fails: no surge and less than one node of spare GPUs. Lowering parallelism cannot
    help such a pool (one node at a time is the least), so the parallelism rules leave it to that policy."""
    return not _surge(pool)[0] and capacity.spare_nodes(shape, workloads.get(pool.name, [])) < 1


def _node_groups(pool: facts.Pool) -> list[facts.NodeGroupUpdate]:
    return [g for g in map(facts.node_group_update, pool.resources) if g is not None]


@stack_policy(
    PolicyId.SPARE_CAPACITY,
    "Checks that each pool has at least one node of spare GPU capacity, or surge enabled.",
    severity=Severity.HIGH, topics=("capacity",),
    remediation="Add a node to the pool (nodeCount) or reduce replicas; image-owned pools may rely on surge (check quota first), but not on a Capacity Block or with updateStrategy MINIMAL.",
    config_keys=("nodePools[].nodeCount", "models[].replicas"),
)
def spare_capacity(stack: StackFacts) -> Iterator[Finding]:
    """Each pool has at least one node of spare GPU capacity, or surge enabled."""
    workloads, problems = _workloads(stack)
    yield from problems
    for pool in stack.pools.values():
        surges, no_surge = _surge(pool)
        if surges:
            continue
        shape = _shape(pool)
        if shape is None:
            yield advice(f"pool {pool.name}: node count or GPUs per node not visible", pool.resources[0])
            continue
        on_pool = workloads.get(pool.name, [])
        if capacity.spare_nodes(shape, on_pool) < 1:
            spare = capacity.spare_gpus(shape, on_pool)
            yield Finding(
                f"pool {pool.name}: {max(spare, 0)} spare GPUs, less than one node ({shape.gpus_per_node}); "
                f"the pods of an upgrading node have nowhere to go{no_surge}",
                pool.resources[0],
            )
            continue
        yield from _validation_hold(pool, shape, on_pool, stack.validation_gpus.get(pool.name, 0))


def _validation_hold(
    pool: facts.Pool, shape: capacity.PoolShape, on_pool: list[capacity.Workload], validating: int
) -> Iterator[Finding]:
    """One node upgrading while the validation job holds the node upgraded before it (the upgrade controller
    moves on as soon as a node is done): preflight's spare-capacity judges the same with what it measures
    (``capacity.take_nodes_out``; fail below minAvailable, warn where only pods wait Pending). A pool that moves by
    generations validates new nodes beside the old ones, which keep serving: no hold there."""
    if not validating or pool.moves_by_generations:
        return
    try:
        outcome = capacity.take_nodes_out(shape, on_pool, min(1, shape.nodes), validating)
    except ValueError as error:
        yield Finding(f"pool {pool.name}: the validation job's request: {error}", pool.resources[0])
        return
    if outcome.safe:
        return
    text = (f"pool {pool.name}: one node upgrading and the validation job's {validating} GPUs on the node "
            f"upgraded before it: {outcome.gpus_out} GPUs out but only {max(0, outcome.spare_gpus)} spare")
    if outcome.below_min:
        yield Finding(f"{text}; {', '.join(outcome.below_min)} could drop below minAvailable", pool.resources[0])
    else:
        yield advice(f"{text}; evicted pods stay Pending until a node is free (the PDBs still hold): add a node "
                     "or surge", pool.resources[0])
