"""Rules for runbook sections 2-3 (capacity, disruption, upgrade controller) and the change ticket."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
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
        if model.replicas is None or model.gpus_per_replica is None or model.min_available is None:
            problems.append(advice(f"model {model.name}: replicas, GPUs per replica or minAvailable not visible"))
            continue
        workload = capacity.Workload(model.name, model.replicas, model.gpus_per_replica, model.min_available)
        for pool in model.pools:
            per_pool.setdefault(pool, []).append(workload)
    return per_pool, problems


def _shape(pool: facts.Pool) -> capacity.PoolShape | None:
    if pool.nodes is None or pool.gpus_per_node is None:
        return None
    return capacity.PoolShape(pool.name, pool.nodes, pool.gpus_per_node)


def canary_one_node_at_a_time(resources: Sequence[Resource]) -> Iterator[Finding]:
    """The canary upgrades one node at a time (maxParallelUpgrades: 1; 0 means unlimited)."""
    stage = facts.stage(resources)
    for res in resources:
        found = _policy_of(res)
        if found is not None:
            driver, policy = found
            role = (facts.prop(res.props, "metadata", "labels", default={}) or {}).get(labels.ROLE)
            if stage != "canary" and role != "canary":
                continue
            parallel = policy.get("maxParallelUpgrades")
            if parallel != 1:
                what = "0 (unlimited)" if parallel == 0 else repr(parallel)
                yield Finding(f"{res.name}: canary upgradePolicy.maxParallelUpgrades must be 1, not {what}", res)
        elif stage == "canary" and res.type == facts.EKS_NODE_GROUP:
            unavailable = facts.prop(res.props, "updateConfig", "maxUnavailable")
            if isinstance(unavailable, int) and unavailable > 1:
                yield Finding(f"{res.name}: canary node group updateConfig.maxUnavailable must be 1, not {unavailable}", res)


def _policy_groups(
    resources: Sequence[Resource], pools: dict[str, facts.Pool]
) -> list[tuple[facts.OperatorDriver, list[facts.Pool]]]:
    """Each upgrade policy with the pools it rolls (an NVIDIADriver's own policy on operator >= 26.7,
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


def parallelism_within_spare_capacity(resources: Sequence[Resource]) -> Iterator[Finding]:
    """In prod, the nodes the operator may take down at once fit in spare capacity, keeping minAvailable."""
    if facts.stage(resources) != "prod":
        return
    pools = facts.pools(resources)
    workloads, problems = _workloads(resources)
    yield from problems
    for driver, group in _policy_groups(resources, pools):
        policy = driver.upgrade_policy or {}
        if policy.get("autoUpgrade") is False or not group:
            continue
        shapes = [(p, _shape(p)) for p in group]
        if any(shape is None for _, shape in shapes):
            yield advice(f"{driver.resource.name}: node count or GPUs per node not visible for every pool", driver.resource)
            continue
        total = sum(shape.nodes for _, shape in shapes if shape is not None)
        parallel, unavailable = policy.get("maxParallelUpgrades", 1), policy.get("maxUnavailable", "25%")
        slots = capacity.upgrade_slots(int(parallel), unavailable, total)
        for pool, shape in shapes:
            assert shape is not None
            outcome = capacity.take_nodes_out(shape, workloads.get(pool.name, []), min(slots, shape.nodes))
            if outcome.safe:
                continue
            reasons = []
            if not outcome.covered:
                reasons.append(f"{outcome.gpus_out} GPUs out but only {max(0, outcome.spare_gpus)} spare")
            if outcome.below_min:
                reasons.append(f"{', '.join(outcome.below_min)} could drop below minAvailable")
            yield Finding(
                f"{driver.resource.name}: maxParallelUpgrades={parallel}, maxUnavailable={unavailable} lets "
                f"{outcome.nodes_out} of {total} nodes upgrade at once; on pool {pool.name} "
                f"{'; '.join(reasons)}",
                driver.resource,
            )


def _surge(pool: facts.Pool) -> bool:
    """A new node arrives before an old one leaves: image generations (blue/green) or AKS image surge."""
    if pool.moves_by_generations:
        return True
    for res in pool.resources:
        if res.type == facts.AKS_POOL and facts.node_image_owns_driver(res):
            surge = str(facts.prop(res.props, "upgradeSettings", "maxSurge", default="0"))
            if surge not in ("0", "0%", ""):
                return True
    return False


def spare_capacity(resources: Sequence[Resource]) -> Iterator[Finding]:
    """Each pool has at least one node of spare GPU capacity, or surge enabled."""
    workloads, problems = _workloads(resources)
    yield from problems
    for pool in facts.pools(resources).values():
        if _surge(pool):
            continue
        shape = _shape(pool)
        if shape is None:
            yield advice(f"pool {pool.name}: node count or GPUs per node not visible", pool.resources[0])
            continue
        spare = capacity.spare_gpus(shape, workloads.get(pool.name, []))
        if spare < shape.gpus_per_node:
            yield Finding(
                f"pool {pool.name}: {max(spare, 0)} spare GPUs, less than one node ({shape.gpus_per_node}); "
                "the pods of an upgrading node have nowhere to go",
                pool.resources[0],
            )


def eviction_respects_pdb(res: Resource) -> Iterator[Finding]:
    """Pod deletion and drain never force past PDBs; a timeout of 0 waits forever on a blocking PDB."""
    found = _policy_of(res)
    if found is None:
        return
    _, policy = found
    deletion = policy.get("podDeletion") or {}
    drain = policy.get("drain") or {}
    for where, block in (("podDeletion", deletion), ("drain", drain)):
        if block.get("force") is True:
            yield Finding(f"{res.name}: upgradePolicy.{where}.force must be false (it deletes pods PDBs protect)", res)
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
    if model.max_unavailable is not None:
        if capacity.scaled_value(model.max_unavailable, model.replicas, round_up=True) < 1:
            yield Finding(f"{res.name}: maxUnavailable {model.max_unavailable} lets no pod go; every drain blocks", res)
        return
    if model.min_available is not None:
        needed = capacity.min_available_replicas(model.min_available, model.replicas)
        if needed >= model.replicas:
            yield Finding(
                f"{res.name}: minAvailable {model.min_available} of {model.replicas} replicas lets no pod go; "
                "the upgrade stalls on the first node",
                res,
            )


def model_redundancy(res: Resource) -> Iterator[Finding]:
    """Every model has more than one replica (its PDB is this resource)."""
    model = facts.model_budget(res)
    if model is not None and model.replicas is not None and model.replicas < 2:
        yield Finding(f"model {model.name}: {model.replicas} replica is gone the moment its node drains", res)


def change_ticket(resources: Sequence[Resource]) -> Iterator[Finding]:
    """The prod stage names a change ticket."""
    stage = facts.stage(resources)
    if stage is None:
        yield advice("the stack's stage is not visible on its resources; cannot check the change ticket")
    elif stage == "prod" and not facts.change_ticket(resources):
        yield Finding("the prod stage must name a change ticket (changeTicket)")


def upgrade_controller_enabled(res: Resource) -> Iterator[Finding]:
    """Operator-owned drivers with autoUpgrade: false never roll."""
    found = _policy_of(res)
    if found is not None and found[1].get("autoUpgrade") is False:
        yield Finding(f"{res.name}: upgradePolicy.autoUpgrade is false; the new driver never reaches a node", res)


def _requirements(selector: str) -> frozenset[str] | None:
    """An equality-based label selector as a set of normalised requirements; None if it uses set syntax."""
    if re.search(r"\s(in|notin)\s*\(", selector):
        return None
    parts = [p.strip().replace("==", "=").replace(" ", "") for p in selector.split(",") if p.strip()]
    return frozenset(parts)


def wait_for_batch_jobs(res: Resource) -> Iterator[Finding]:
    """waitForCompletion.podSelector covers every declared batch or fine-tuning selector."""
    found = _policy_of(res)
    if found is None:
        return
    driver, policy = found
    declared = [s for s in (driver.annotations.get(labels.ANNOTATION_BATCH_SELECTORS) or "").split("\n") if s]
    wait = str((policy.get("waitForCompletion") or {}).get("podSelector") or "")
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
