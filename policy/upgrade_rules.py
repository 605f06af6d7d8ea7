"""Rules for the GPU Operator's upgrade controller: it is on where the operator owns the driver, and it
waits for declared batch or fine-tuning jobs instead of evicting them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, Level
from policy.metadata import Severity, resource_policy, stack_policy
from spec import resource_facts as rf


@resource_policy(
    "upgrade-controller-enabled",
    "Checks that operator-owned drivers have the upgrade controller on (autoUpgrade: true).",
    resource_types=rf.DRIVER_TYPES,
    severity=Severity.MEDIUM, topics=("rollout",),
    remediation="Set gpuOperator.upgradePolicy.autoUpgrade: true, or plan to delete driver pods by hand.",
    level=Level.ADVISORY,
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
    "wait-for-batch-jobs",
    "Checks that waitForCompletion.podSelector covers the declared batch or fine-tuning selectors.",
    severity=Severity.MEDIUM, topics=("disruption", "batch"),
    remediation="Set gpuOperator.upgradePolicy.waitForCompletion.podSelector to a selector every batch pod matches.",
    level=Level.ADVISORY,
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
