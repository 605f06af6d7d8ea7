"""Rules for runbook section 2, disruption budgets: every model keeps redundancy and a PodDisruptionBudget
that lets a pod go, and the operator's upgrade never forces an eviction past one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policy import facts
from policy.facts import Resource
from policy.findings import Finding, advice
from policy.metadata import Severity, resource_policy
from gpu_knowledge import capacity
from engine_contracts import resource_facts as rf
from vocabulary.policy_ids import PolicyId


def _block(policy: Mapping[str, Any], key: str, res: Resource) -> tuple[Mapping[str, Any], list[Finding]]:
    value = policy.get(key)
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [Finding(f"{res.name}: upgradePolicy.{key} must be an object, not {value!r}", res)]
    return value, []


@resource_policy(
    PolicyId.EVICTION_RESPECTS_PDB,
    "Checks that GPU pod deletion and drain never force past PodDisruptionBudgets (advice when a timeout is 0).",
    resource_types=rf.DRIVER_TYPES,
    severity=Severity.CRITICAL, topics=("disruption",),
    remediation="Set upgradePolicy.podDeletion.force and drain.force to false, and give both a timeout (e.g. 300-900 s).",
    config_keys=(
        "gpuOperator.upgradePolicy.podDeletion.force",
        "gpuOperator.upgradePolicy.drain.force",
        "gpuOperator.upgradePolicy.podDeletion.timeoutSeconds",
        "gpuOperator.upgradePolicy.drain.timeoutSeconds",
        "nodePools[].upgradePolicy.podDeletion.force",
        "nodePools[].upgradePolicy.drain.force",
    ),
)
def eviction_respects_pdb(res: Resource) -> Iterator[Finding]:
    """Pod deletion and drain never force past PDBs; a timeout of 0 waits forever on a blocking PDB."""
    driver = facts.operator_driver(res)
    policy = driver.rolling_policy if driver is not None else None
    if policy is None:
        if driver is not None and driver.facts.enabled and driver.facts.upgrade_policy is not None:
            yield Finding(f"{res.name}: upgradePolicy must be an object, not {driver.facts.upgrade_policy!r}", res)
        return
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


@resource_policy(
    PolicyId.PDB_ALLOWS_DRAIN,
    "Checks that every PodDisruptionBudget lets at least one pod go.",
    resource_types=(rf.PDB,),
    severity=Severity.HIGH, topics=("disruption",),
    remediation="Set models[].minAvailable below replicas (or add a replica).",
    config_keys=("models[].minAvailable", "models[].replicas"),
)
def pdb_allows_drain(res: Resource) -> Iterator[Finding]:
    """Every PDB lets at least one pod go."""
    budget = facts.model_budget(res)
    if budget is None:
        return
    model = budget.facts
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


@resource_policy(
    PolicyId.MODEL_REDUNDANCY,
    "Checks that every model has more than one replica and a PodDisruptionBudget.",
    resource_types=(rf.PDB,),
    severity=Severity.HIGH, topics=("disruption", "availability"),
    remediation="Run at least two replicas of every model (models[].replicas >= 2).",
    config_keys=("models[].replicas",),
)
def model_redundancy(res: Resource) -> Iterator[Finding]:
    """Every model has more than one replica. The resource is the model's PDB: the program renders one per
    model, so "has a PDB" holds by construction; this rule checks the replicas the PDB declares."""
    model = facts.model_budget(res)
    if model is None:
        return
    if model.facts.replicas is None:
        yield advice(f"model {model.name}: its replicas are not visible on its PDB; cannot check redundancy", res)
    elif model.facts.replicas < 2:
        yield Finding(f"model {model.name}: {model.facts.replicas} replica is gone the moment its node drains", res)
