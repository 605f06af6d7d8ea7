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
from policy.metadata import POLICIES, PolicyDef, ResourceRule, Severity, StackRule
from vocabulary.declarations import Register
from vocabulary.policy_ids import ADVICE_POLICY_ID, ALL_POLICIES

__all__ = [
    "ADVICE_POLICY_ID", "POLICY_IDS", "REGISTRY", "RULE_MODULES", "PolicyDef", "ResourceRule", "Severity",
    "StackRule", "register",
]

# The pack-only advisory policy that carries every rule's advice into the engine (``policy.pack``), ADVICE_POLICY_ID,
# has no rule of its own, so it is not registered; pack configs may still name it.

# By runbook section: compatibility and ownership (section 1), the node platform, changes against the last
# deployment, then disruption (section 2: capacity, budgets, process, the upgrade controller), the rollout's
# discipline (waves, generations kept, validation, soak, the window: sections 2, 6, 7), then the promotion from
# the validated canary to prod (section 5).
RULE_MODULES: tuple[ModuleType, ...] = (
    compat_rules, platform_rules, transition_rules, capacity_rules, budget_rules, process_rules, upgrade_rules,
    discipline_rules, promotion_rules,
)


def _one_rule(policy: PolicyDef) -> None:
    if (policy.resource_rule is None) == (policy.stack_rule is None):
        raise ValueError(f"policy '{policy.id}' needs exactly one of resource_rule and stack_rule")


_REGISTER: Register[PolicyDef] = Register("policy", lambda policy: policy.id, reserved={
    ALL_POLICIES: "is reserved in pack config and cannot name a policy",
    ADVICE_POLICY_ID: "is the pack's advice policy and cannot name a rule",
}, check=_one_rule)
REGISTRY: dict[str, PolicyDef] = _REGISTER.by_id


def register(policy: PolicyDef) -> None:
    _REGISTER.add(policy)


def declared(module: ModuleType) -> list[PolicyDef]:
    """The policies a rule module declares, in the order its rules are written (functions it imports from
    elsewhere do not count)."""
    return POLICIES.declared(module)


_REGISTER.add_all(POLICIES.gather(RULE_MODULES))

POLICY_IDS: tuple[str, ...] = tuple(REGISTRY)
