"""Rules for runbook sections 2-3 (capacity, disruption, upgrade controller) and the change ticket."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy import facts
from policy.facts import Resource
from policy.findings import Finding, advice
from spec import capacity, labels


def _policy_of(res: Resource) -> tuple[facts.OperatorDriver, Mapping[str, Any]] | None:
    driver = facts.operator_driver(res)
    if driver is None or not driver.enabled or not isinstance(driver.upgrade_policy, Mapping):
        return None
    return driver, driver.upgrade_policy


def _workloads(resources: Sequence[Resource]) -> tuple[dict[str, list[capacity.Workload]], list[Finding]]:
    """Model servers per pool. A model on several pools counts in full on each (it may all land on one)."""
    per_pool: dict[str, list[capacity.Workload]] = {}
    problems = []
    for model in facts.model_budgets(resources):
        budget = (model.min_available, model.max_unavailable)
        if model.replicas is None or model.gpus_per_replica is None or budget == (None, None):
            problems.append(advice(f"model {model.name}: replicas, GPUs per replica or minAvailable not visible"))
            continue
        workload = capacity.Workload(model.name, model.replicas, model.gpus_per_replica, *budget)
        try:
            workload.disruption_allowed  # noqa: B018 - validates the PDB's values
        except ValueError as error:
            # pdb-allows-drain reports the malformed PDB itself; capacity cannot be computed here.
            problems.append(advice(f"model {model.name}: cannot compute its PDB allowance: {error}", model.resource))
            continue
        for pool in model.pools:
            per_pool.setdefault(pool, []).append(workload)
    return per_pool, problems


def _shape(pool: facts.Pool) -> capacity.PoolShape | None:
    if pool.nodes is None or pool.gpus_per_node is None:
        return None
    return capacity.PoolShape(pool.name, pool.nodes, pool.gpus_per_node)


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


def canary_one_node_at_a_time(resources: Sequence[Resource]) -> Iterator[Finding]:
    """The canary upgrades one node at a time (maxParallelUpgrades: 1; 0 means unlimited)."""
    stage = facts.stage(resources)
    for res in resources:
        found = _policy_of(res)
        if found is not None:
            driver, _ = found
            role = (facts.prop(res.props, "metadata", "labels", default={}) or {}).get(labels.ROLE)
            if stage != "canary" and role != "canary":
                continue
            # An unset key takes the resource kind's default (Helm renders 0, i.e. unlimited).
            parallel = driver.policy_setting("maxParallelUpgrades")
            if isinstance(parallel, bool) or parallel != 1:
                what = "0 (unlimited)" if parallel == 0 and not isinstance(parallel, bool) else repr(parallel)
                unset = "" if "maxParallelUpgrades" in _sent(driver) else " (unset: the default of this resource)"
                yield Finding(
                    f"{res.name}: canary upgradePolicy.maxParallelUpgrades must be 1, not {what}{unset}", res
                )
        elif stage == "canary" and (group := facts.node_group_update(res)) is not None:
            yield from _canary_node_group(group)
    if stage == "canary" and _operator_rolls_drivers(resources) and not any(
        _policy_of(r) is not None for r in resources
    ):
        yield advice(
            "upgrade policy not visible: no operator driver resource of this stack carries an upgradePolicy, so "
            "the ClusterPolicy's policy applies; make sure it has maxParallelUpgrades 1"
        )


def _sent(driver: facts.OperatorDriver) -> Mapping[str, Any]:
    return driver.upgrade_policy if isinstance(driver.upgrade_policy, Mapping) else {}


def _operator_rolls_drivers(resources: Sequence[Resource]) -> bool:
    """The operator's driver is in play: an operator driver resource is enabled, or a pool's node image
    ships no driver (so an external ClusterPolicy's driver installs on it)."""
    if any(d.enabled for d in facts.operator_drivers(resources)):
        return True
    return any(
        not any(facts.node_image_owns_driver(r) for r in pool.resources) for pool in facts.pools(resources).values()
    )


def _policy_groups(
    resources: Sequence[Resource], pools: dict[str, facts.Pool]
) -> list[tuple[facts.OperatorDriver, list[facts.Pool]]]:
    """Each upgrade policy with the pools it rolls (an NVIDIADriver that carries its own upgradePolicy,
    else the cluster-wide one over every pool the operator's driver covers)."""
    drivers = facts.operator_drivers(resources)
    cluster = [d for d in drivers if d.cluster_wide and d.enabled]
    groups: list[tuple[facts.OperatorDriver, list[facts.Pool]]] = []
    inherited: list[facts.Pool] = []
    for driver in drivers:
        if driver.cluster_wide:
            continue
        selected = [p for p in pools.values() if driver.selects(p.labels)]
        if driver.upgrade_policy:
            groups.append((driver, selected))
        else:
            inherited.extend(selected)
    for driver in cluster:
        if driver.upgrade_policy:
            covered = [p for p in pools.values() if driver.selects(p.labels)] + inherited
            groups.append((driver, covered))
    return groups


def _count(value: Any) -> int | None:
    """A non-negative integer setting, or None when it is malformed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def parallelism_within_spare_capacity(resources: Sequence[Resource]) -> Iterator[Finding]:
    """In prod, the nodes the operator may take down at once fit in spare capacity, keeping minAvailable."""
    stage = facts.stage(resources)
    if stage is None:
        yield advice("the stack's stage is not visible on its resources; cannot check upgrade parallelism")
        return
    if stage != "prod":
        return
    pools = facts.pools(resources)
    workloads, problems = _workloads(resources)
    yield from problems
    for driver, group in _policy_groups(resources, pools):
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
            slots = capacity.upgrade_slots(parallel, unavailable, total)
        except ValueError as error:
            yield Finding(f"{driver.resource.name}: upgradePolicy.maxUnavailable {unavailable!r}: {error}", driver.resource)
            continue
        for pool, shape in shapes:
            assert shape is not None
            outcome = capacity.take_nodes_out(shape, workloads.get(pool.name, []), min(slots, shape.nodes))
            if outcome.safe:
                continue
            yield Finding(
                f"{driver.resource.name}: maxParallelUpgrades={parallel}, maxUnavailable={unavailable} lets "
                f"{outcome.nodes_out} of {total} nodes upgrade at once; on pool {pool.name} {_shortfall(outcome)}",
                driver.resource,
            )
    yield from _node_group_parallelism(pools, workloads)


def _shortfall(outcome: capacity.Disruption) -> str:
    """Why taking the nodes out is unsafe, in the words every parallelism finding uses."""
    reasons = []
    if not outcome.covered:
        reasons.append(f"{outcome.gpus_out} GPUs out but only {max(0, outcome.spare_gpus)} spare")
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
    pools: dict[str, facts.Pool], workloads: dict[str, list[capacity.Workload]]
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
            if desired is None or pool.gpus_per_node is None:
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
            shape = capacity.PoolShape(pool.name, max(desired, pool.nodes or 0), pool.gpus_per_node)
            outcome = capacity.take_nodes_out(shape, workloads.get(pool.name, []), nodes_out)
            if outcome.safe:
                continue
            setting = (
                f"maxUnavailablePercentage={percentage}" if percentage is not None
                else f"maxUnavailable={1 if unavailable is None else unavailable}"
            )
            yield Finding(
                f"{res.name}: updateConfig.{setting} lets {outcome.nodes_out} of {desired} nodes update at once "
                f"with no surge ({surge.why}); on pool {pool.name} {_shortfall(outcome)}",
                res,
            )


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
        if res.type == facts.AKS_POOL and facts.node_image_owns_driver(res):
            surge = str(facts.prop(res.props, "upgradeSettings", "maxSurge", default="0"))
            if surge not in ("0", "0%", ""):
                return True, ""
    return False, ""


def _node_groups(pool: facts.Pool) -> list[facts.NodeGroupUpdate]:
    return [g for g in map(facts.node_group_update, pool.resources) if g is not None]


def spare_capacity(resources: Sequence[Resource]) -> Iterator[Finding]:
    """Each pool has at least one node of spare GPU capacity, or surge enabled."""
    workloads, problems = _workloads(resources)
    yield from problems
    for pool in facts.pools(resources).values():
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


def _block(policy: Mapping[str, Any], key: str, res: Resource) -> tuple[Mapping[str, Any], list[Finding]]:
    value = policy.get(key)
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [Finding(f"{res.name}: upgradePolicy.{key} must be an object, not {value!r}", res)]
    return value, []


def eviction_respects_pdb(res: Resource) -> Iterator[Finding]:
    """Pod deletion and drain never force past PDBs; a timeout of 0 waits forever on a blocking PDB."""
    found = _policy_of(res)
    if found is None:
        driver = facts.operator_driver(res)
        if driver is not None and driver.enabled and driver.upgrade_policy is not None:
            yield Finding(f"{res.name}: upgradePolicy must be an object, not {driver.upgrade_policy!r}", res)
        return
    _, policy = found
    deletion, problems = _block(policy, "podDeletion", res)
    drain, more = _block(policy, "drain", res)
    yield from problems + more
    for where, block in (("podDeletion", deletion), ("drain", drain)):
        if block.get("force") is True:
            yield Finding(f"{res.name}: upgradePolicy.{where}.force must be false (it deletes pods PDBs protect)", res)
        elif "force" in block and not isinstance(block.get("force"), bool):
            yield Finding(f"{res.name}: upgradePolicy.{where}.force must be false, not {block.get('force')!r}", res)
    if deletion.get("timeoutSeconds") == 0:
        yield advice(f"{res.name}: podDeletion.timeoutSeconds 0 waits forever on a PDB that blocks eviction", res)
    if drain.get("enable") and drain.get("timeoutSeconds") == 0:
        yield advice(f"{res.name}: drain.timeoutSeconds 0 waits forever on a PDB that blocks the drain", res)


def pdb_allows_drain(res: Resource) -> Iterator[Finding]:
    """Every PDB lets at least one pod go."""
    model = facts.model_budget(res)
    if model is None:
        return
    if model.replicas is None:
        yield advice(f"{res.name}: the model's replicas are not visible; cannot check the PDB", res)
        return
    try:
        allowed = capacity.pdb_disruptions_allowed(model.min_available, model.max_unavailable, model.replicas)
    except ValueError as error:
        yield Finding(f"{res.name}: malformed PodDisruptionBudget: {error}", res)
        return
    if allowed >= 1:
        return
    if model.max_unavailable is not None:
        yield Finding(f"{res.name}: maxUnavailable {model.max_unavailable} lets no pod go; every drain blocks", res)
    elif model.min_available is not None:
        yield Finding(
            f"{res.name}: minAvailable {model.min_available} of {model.replicas} replicas lets no pod go; "
            "the upgrade stalls on the first node",
            res,
        )
    # Neither set: the PDB protects nothing, every pod may go.


def model_redundancy(res: Resource) -> Iterator[Finding]:
    """Every model has more than one replica. The resource is the model's PDB: the program renders one per
    model, so "has a PDB" holds by construction; this rule checks the replicas the PDB declares."""
    model = facts.model_budget(res)
    if model is None:
        return
    if model.replicas is None:
        yield advice(f"model {model.name}: its replicas are not visible on its PDB; cannot check redundancy", res)
    elif model.replicas < 2:
        yield Finding(f"model {model.name}: {model.replicas} replica is gone the moment its node drains", res)


def change_ticket(resources: Sequence[Resource]) -> Iterator[Finding]:
    """The prod stage names a change ticket."""
    stage = facts.stage(resources)
    if stage is None:
        yield advice("the stack's stage is not visible on its resources; cannot check the change ticket")
    elif stage == "prod" and not facts.change_ticket(resources):
        yield Finding("the prod stage must name a change ticket (changeTicket)")


def upgrade_controller_enabled(res: Resource) -> Iterator[Finding]:
    """Operator-owned drivers with autoUpgrade: false (sent, or the resource kind's default) never roll."""
    found = _policy_of(res)
    if found is None:
        return
    driver, policy = found
    auto = driver.policy_setting("autoUpgrade")
    if auto is False:
        how = "is false" if "autoUpgrade" in policy else "is unset and defaults to false here"
        yield Finding(f"{res.name}: upgradePolicy.autoUpgrade {how}; the new driver never reaches a node", res)
    elif auto is not True:
        yield Finding(f"{res.name}: upgradePolicy.autoUpgrade must be true or false, not {auto!r}", res)


def _requirements(selector: str) -> frozenset[str] | None:
    """An equality-based label selector as a set of normalised requirements; None if it uses set syntax."""
    if re.search(r"\s(in|notin)\s*\(", selector):
        return None
    parts = [p.strip().replace("==", "=").replace(" ", "") for p in selector.split(",") if p.strip()]
    return frozenset(parts)


def wait_for_batch_jobs(resources: Sequence[Resource]) -> Iterator[Finding]:
    """waitForCompletion.podSelector of every visible upgrade policy covers every declared batch or
    fine-tuning selector. The selectors are stack-wide facts (PDB and driver annotations), so Helm mode,
    whose Release carries no metadata, is checked too."""
    declared = facts.batch_selectors(resources)
    if not declared:
        return
    for res in resources:
        found = _policy_of(res)
        if found is None:
            continue
        _, policy = found
        wait_block = policy.get("waitForCompletion")
        if wait_block is not None and not isinstance(wait_block, Mapping):
            yield Finding(f"{res.name}: upgradePolicy.waitForCompletion must be an object, not {wait_block!r}", res)
            continue
        wait = str((wait_block or {}).get("podSelector") or "")
        waits_for = _requirements(wait)
        for selector in declared:
            wanted = _requirements(selector)
            # The upgrade waits for a batch pod when the batch selector implies every requirement of podSelector.
            if not wait or waits_for is None or wanted is None or not waits_for <= wanted:
                yield Finding(
                    f"{res.name}: waitForCompletion.podSelector '{wait}' does not cover batch selector '{selector}'; "
                    "those jobs are evicted instead of finishing",
                    res,
                )
