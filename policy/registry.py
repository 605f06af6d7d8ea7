"""Every policy of the pack, registered once under its stable kebab-case id.

Each policy's metadata is declared on its rule function (``policy.metadata``), in the rule module of its
concern. This registry gathers them in one fixed order (the modules in ``RULE_MODULES``, each in the order
its rules are written), which the pack, ``gpu-rollout plan`` and the docs list, and refuses what would make
an id ambiguous. The CrossGuard pack (``policy.pack``) and ``gpu-rollout plan`` (``policy.evaluate``) both
read it, so a policy id, its rule and its default enforcement exist in exactly one place.
"""

from __future__ import annotations

from types import ModuleType

from policy import (
    budget_rules, capacity_rules, compat_rules, discipline_rules, platform_rules, process_rules, promotion_rules,
    transition_rules, upgrade_rules,
)
from policy.metadata import PolicyDef, ResourceRule, Severity, StackRule, definition

__all__ = [
    "ADVICE_POLICY_ID", "POLICY_IDS", "REGISTRY", "RULE_MODULES", "PolicyDef", "ResourceRule", "Severity",
    "StackRule", "register",
]

REGISTRY: dict[str, PolicyDef] = {}

# The pack-only advisory policy that carries every rule's advice into the engine (``policy.pack``). It
# has no rule of its own, so it is not registered; pack configs may still name it.
ADVICE_POLICY_ID = "policy-advice"

# By runbook section: compatibility and ownership (section 1), the node platform, changes against the last
# deployment, then disruption (section 2: capacity, budgets, process, the upgrade controller), the rollout's
# discipline (waves, generations kept, validation, soak, the window: sections 2, 6, 7), then the promotion from
# the validated canary to prod (section 5).
RULE_MODULES: tuple[ModuleType, ...] = (
    compat_rules, platform_rules, transition_rules, capacity_rules, budget_rules, process_rules, upgrade_rules,
    discipline_rules, promotion_rules,
)


def register(policy: PolicyDef) -> None:
    if policy.id == "all":
        raise ValueError("'all' is reserved in pack config and cannot name a policy")
    if policy.id == ADVICE_POLICY_ID:
        raise ValueError(f"'{ADVICE_POLICY_ID}' is the pack's advice policy and cannot name a rule")
    if policy.id in REGISTRY:
        raise ValueError(f"policy '{policy.id}' is registered twice")
    if (policy.resource_rule is None) == (policy.stack_rule is None):
        raise ValueError(f"policy '{policy.id}' needs exactly one of resource_rule and stack_rule")
    REGISTRY[policy.id] = policy


def declared(module: ModuleType) -> list[PolicyDef]:
    """The policies a rule module declares, in the order its rules are written (functions it imports from
    elsewhere do not count)."""
    found = []
    for value in vars(module).values():
        policy = definition(value)
        if policy is not None and getattr(value, "__module__", None) == module.__name__:
            found.append(policy)
    return found


for _module in RULE_MODULES:
    for _policy in declared(_module):
        register(_policy)

POLICY_IDS: tuple[str, ...] = tuple(REGISTRY)
