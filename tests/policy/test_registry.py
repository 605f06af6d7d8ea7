"""policy.registry and policy.metadata: every policy declared once, beside its rule, in a stable order."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from policy import metadata, pack
from policy.findings import Level
from policy.registry import POLICY_IDS, REGISTRY, RULE_MODULES, PolicyDef, Severity, declared, register

ISSUE_IDS = {
    "driver-version-pinned", "single-driver-owner", "nvidiadriver-selectors-disjoint", "cuda-driver-compatible",
    "gpu-supported-by-driver", "operator-supports-driver", "fabric-manager-matches", "canary-one-node-at-a-time",
    "parallelism-within-spare-capacity", "spare-capacity", "eviction-respects-pdb", "pdb-allows-drain",
    "model-redundancy", "change-ticket", "upgrade-controller-enabled", "wait-for-batch-jobs",
    "operator-supports-os",  # issue 7: operator-owned drivers only on an OS the operator supports
    "cloud-pool-not-replaced", "per-pool-mode-own-change", "capacity-block-updated-empty",  # issue 7: changes
    # the cloud or the operator cannot take in one step
    "held-pool-pinned",  # issue 13: a held pool is held in every driver mode
    "canary-attested",  # issue 10: the prod gate
    "facts-readable",  # issue 22: the pack of the protected base refuses facts newer than it reads
    # issue 23: the rollout's discipline
    "waves-in-order", "old-generation-kept", "validation-job-required", "soak-floor", "maintenance-window",
    "pool-hardware-matches-size",  # issue 30: a pool's declared hardware against its VM size or instance type
    "guard-image-digest",  # issue 35: prod's in-cluster guard runs an image pinned by digest
}


def test_registry_holds_exactly_the_issue_ids_with_metadata():
    assert set(POLICY_IDS) == ISSUE_IDS
    for policy in REGISTRY.values():
        assert policy.description.startswith("Checks ") and policy.description.endswith(".")
        assert policy.remediation and policy.topics and isinstance(policy.severity, Severity)
    advisory = {p.id for p in REGISTRY.values() if p.level.value == "advisory"}
    assert advisory == {"upgrade-controller-enabled", "wait-for-batch-jobs"}


def test_registry_rejects_duplicates_and_all():
    existing = REGISTRY["change-ticket"]
    with pytest.raises(ValueError, match="registered twice"):
        register(existing)
    with pytest.raises(ValueError, match="reserved"):
        register(PolicyDef("all", "Checks x.", Severity.LOW, ("x",), "x", existing.level, stack_rule=lambda r: []))
    with pytest.raises(ValueError, match="advice policy"):
        register(PolicyDef(pack.ADVICE_POLICY, "Checks x.", Severity.LOW, ("x",), "x", existing.level,
                           stack_rule=lambda r: []))
    assert pack.ADVICE_POLICY not in REGISTRY


    with pytest.raises(ValueError, match="exactly one of resource_rule and stack_rule"):
        register(PolicyDef("neither", "Checks x.", Severity.LOW, ("x",), "x", existing.level))
    assert "neither" not in REGISTRY


def test_each_policy_is_declared_on_its_rule_in_a_rule_module():
    modules = {m.__name__ for m in RULE_MODULES}
    for policy in REGISTRY.values():
        rule = policy.stack_rule or policy.resource_rule
        assert metadata.definition(rule) is policy, policy.id
        assert rule.__module__ in modules, policy.id
        assert bool(policy.resource_types) == (policy.resource_rule is not None), policy.id


def test_the_order_is_the_modules_order_and_the_docs_follow_it():
    assert list(POLICY_IDS) == [p.id for module in RULE_MODULES for p in declared(module)]
    docs = (Path(pack.__file__).resolve().parent.parent / "docs" / "policies.md").read_text()
    sections = [line.removeprefix("## ").split(" (")[0] for line in docs.splitlines() if line.startswith("## ")]
    assert [s for s in sections if s in REGISTRY] == list(POLICY_IDS)


def test_a_module_declares_its_own_rules_in_the_order_they_are_written():
    module = types.ModuleType("policy.example_rules")

    @metadata.stack_policy("b-second", "Checks b.", severity=Severity.LOW, topics=("x",), remediation="b",
                            config_keys=())
    def second(stack):
        return []

    @metadata.resource_policy("a-first", "Checks a.", resource_types=("t",), severity=Severity.HIGH,
                              topics=("y",), remediation="a", config_keys=(), level=Level.ADVISORY)
    def first(res):
        return []

    for rule in (second, first):
        rule.__module__ = module.__name__
    imported = REGISTRY["change-ticket"].stack_rule  # a rule another module declares, imported here
    vars(module).update(second=second, first=first, change_ticket=imported, helper=lambda: None)
    assert [p.id for p in declared(module)] == ["b-second", "a-first"]
    (b, a) = declared(module)
    assert (b.stack_rule, b.resource_rule, b.level) == (second, None, Level.MANDATORY)
    assert (a.resource_rule, a.resource_types, a.level, a.severity) == (first, ("t",), Level.ADVISORY, Severity.HIGH)
    assert second([]) == []  # the decorator leaves the rule as written


def test_rules_compare_stages_with_the_stage_enum():
    for module in RULE_MODULES:
        tree = ast.parse(Path(module.__file__).read_text())
        compared = [c for n in ast.walk(tree) if isinstance(n, ast.Compare) for c in ast.walk(n)]
        literals = [c.value for c in compared if isinstance(c, ast.Constant) and c.value in ("prod", "canary")]
        assert literals == [], module.__name__


def test_each_policy_names_the_config_keys_that_fix_it() -> None:
    # A violation says what to edit: each key a real stack-config key (as docs/config.md spells it).
    from fleetspec.reference import walk

    keys = {key.path for key in walk()}
    for policy in REGISTRY.values():
        assert set(policy.config_keys) <= keys, (policy.id, set(policy.config_keys) - keys)
    # Every policy but the one whose fix is the pack itself points into the stack file.
    assert [p.id for p in REGISTRY.values() if not p.config_keys] == ["facts-readable"]


def test_a_violation_carries_its_keys_and_fix() -> None:
    from policy.evaluate import evaluate, from_registered, load_config
    from tests.conftest import as_planned, edited

    config = edited("canary", "gpuOperator", lambda op: op["upgradePolicy"].update(maxParallelUpgrades=3))
    run = as_planned("canary", config)
    found = [v for v in evaluate(from_registered(run.resources), load_config("canary"))
             if v.policy == "canary-one-node-at-a-time"]
    assert found, "a canary upgrading three nodes at once violates canary-one-node-at-a-time"
    assert found[0].config_keys == ("gpuOperator.upgradePolicy.maxParallelUpgrades",
                                    "nodePools[].upgradePolicy.maxParallelUpgrades")
    assert "maxParallelUpgrades: 1" in found[0].fix


def test_a_project_s_own_pack_config_is_the_one_applied(tmp_path: Path) -> None:
    # `gpu-rollout init --trust-key` edits the team's policy/prod.json: plan judges by the project's folder,
    # not by the pack this code was installed with.
    from rollout.plan import policy_report
    from tests.conftest import as_planned, edited

    run = as_planned("canary", edited("canary", "gpuOperator",
                                      lambda op: op["upgradePolicy"].update(maxParallelUpgrades=3)))
    gate = "canary-one-node-at-a-time"
    assert any(v.policy == gate for v in policy_report(run))  # the installed pack: mandatory
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "canary.json").write_text(f'{{"{gate}": "disabled"}}')
    assert not any(v.policy == gate for v in policy_report(run, project_dir=tmp_path))
    # A project without a policy/ folder of its own is judged by the installed pack's configs.
    assert any(v.policy == gate for v in policy_report(run, project_dir=tmp_path / "elsewhere"))
