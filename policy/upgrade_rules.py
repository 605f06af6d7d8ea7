"""Rules for the GPU Operator's upgrade controller: it is on where the operator owns the driver, it waits
for declared batch or fine-tuning jobs instead of evicting them, and what it installs on a held pool."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, Level, advice
from policy.metadata import Severity, resource_policy, stack_policy
from gpu_knowledge import kinds
from engine_contracts import resource_facts as rf
from vocabulary.policy_ids import PolicyId


@resource_policy(
    PolicyId.UPGRADE_CONTROLLER_ENABLED,
    "Checks that operator-owned drivers have the upgrade controller on (autoUpgrade: true).",
    resource_types=rf.DRIVER_TYPES,
    severity=Severity.MEDIUM, topics=("rollout",),
    remediation="Set gpuOperator.upgradePolicy.autoUpgrade: true (and in a pool's own upgradePolicy, where it sets "
    "it), or plan to delete driver pods by hand.",
    level=Level.ADVISORY,
    config_keys=("gpuOperator.upgradePolicy.autoUpgrade", "nodePools[].upgradePolicy.autoUpgrade"),
)
def upgrade_controller_enabled(res: Resource) -> Iterator[Finding]:
    """Operator-owned drivers with autoUpgrade: false (sent, or the resource kind's default) never roll."""
    driver = facts.operator_driver(res)
    if driver is None or driver.rolling_policy is None:
        return
    auto = driver.policy_setting("autoUpgrade")
    if auto is False:
        how = "is false" if "autoUpgrade" in driver.rolling_policy else "is unset and defaults to false here"
        yield Finding(f"{res.name}: upgradePolicy.autoUpgrade {how}; the new driver never reaches a node", res)
    elif auto is not True:
        yield Finding(f"{res.name}: upgradePolicy.autoUpgrade must be true or false, not {auto!r}", res)


def _requirements(selector: str) -> frozenset[str] | None:
    """An equality-based label selector as a set of normalised requirements; None if it uses set syntax."""
    if re.search(r"\s(in|notin)\s*\(", selector):
        return None
    parts = [p.strip().replace("==", "=").replace(" ", "") for p in selector.split(",") if p.strip()]
    return frozenset(parts)


@stack_policy(
    PolicyId.WAIT_FOR_BATCH_JOBS,
    "Checks that waitForCompletion.podSelector covers the declared batch or fine-tuning selectors.",
    severity=Severity.MEDIUM, topics=("disruption", "batch"),
    remediation="Set gpuOperator.upgradePolicy.waitForCompletion.podSelector to a selector every batch pod matches.",
    level=Level.ADVISORY,
    config_keys=("gpuOperator.upgradePolicy.waitForCompletion.podSelector",
                 "nodePools[].upgradePolicy.waitForCompletion.podSelector", "gpuOperator.batchJobSelectors"),
)
def wait_for_batch_jobs(stack: StackFacts) -> Iterator[Finding]:
    """waitForCompletion.podSelector of every visible upgrade policy covers every declared batch or
    fine-tuning selector. The selectors are stack-wide facts (PDB and driver annotations), so Helm mode,
    whose Release carries no metadata, is checked too."""
    declared = stack.batch_selectors
    if not declared:
        return
    for driver in stack.drivers:
        policy, res = driver.rolling_policy, driver.resource
        if policy is None:
            continue
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


# ---------------------------------------------------------------- held-pool-pinned


@stack_policy(
    PolicyId.HELD_POOL_PINNED,
    "Checks that a held pool's driver is pinned to its previous version, so a node the pool gains or replaces does not install the new driver.",
    severity=Severity.HIGH, topics=("rollout", "autoscaling", "node-lifecycle"),
    remediation="Set gpuOperator.useNvidiaDriverCrd: true, in a change of its own, so each held pool's NVIDIADriver pins driver.previousVersion; or record why the held pools may take the new driver on new and replaced nodes in gpuOperator.unpinnedHoldReason.",
    config_keys=("gpuOperator.useNvidiaDriverCrd", "driver.previousVersion", "gpuOperator.unpinnedHoldReason"),
)
def held_pool_pinned(stack: StackFacts) -> Iterator[Finding]:
    """In ClusterPolicy mode one driver version serves every GPU node, so a held pool is held by its skip
    label alone, which stops upgrades of the nodes it has, not installs on nodes it gains or gets back: a node
    repaired, reimaged or replaced installs the new driver whatever the pool's size."""
    cluster_wide = [d for d in stack.drivers if d.cluster_wide]
    if not cluster_wide:
        return
    reason = next((r.facts.unpinned_hold_reason for r in stack.identities if r.facts.unpinned_hold_reason), None)
    for pool in stack.pools.values():
        if not pool.facts.held:
            continue
        for driver in facts.drivers_for_pool(pool, cluster_wide):
            kind = "Helm release" if driver.resource.type == rf.HELM_RELEASE else kinds.CLUSTER_POLICY.kind
            version = driver.facts.version
            growth = {True: "; its cloud pool can grow too", None: "; nothing shows that it cannot grow either",
                      False: "; that its cloud pools cannot grow does not keep it"}[pool.can_grow]
            message = (
                f"pool {pool.name} is held, but the {kind} ({driver.resource.name}) sets one driver, {version}, for "
                f"every GPU node: the pool is held by the skip label alone, which holds the nodes it has, not a node "
                f"that boots anew, so {version} is installed at once on every node {pool.name} gains or gets back: a "
                "node repaired, reimaged or replaced (AKS node auto-repair or a node-image upgrade's surge node, an "
                "EKS instance refresh, node group update or health replacement, a machine swapped on an existing "
                f"cluster){growth}"
            )
            if reason is not None:
                yield advice(f"{message}. Accepted by gpuOperator.unpinnedHoldReason: {reason}", driver.resource)
            else:
                yield Finding(
                    f"{message}. Pin held pools with per-pool NVIDIADrivers (gpuOperator.useNvidiaDriverCrd: true, "
                    "in a change of its own), or state why not in gpuOperator.unpinnedHoldReason", driver.resource,
                )
