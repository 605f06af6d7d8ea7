"""The CrossGuard pack wires every registered rule, without starting the analyzer server."""

from __future__ import annotations

import runpy

import pulumi_policy
import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy import pack
from policy.evaluate import POLICY_DIR, from_registered
from policy.registry import POLICY_IDS, REGISTRY, PolicyDef, Severity, register
from preview.run import run_program
from tests.conftest import change, stack_config
from tests.policy.variants import VARIANTS

ISSUE_IDS = {
    "driver-version-pinned", "single-driver-owner", "nvidiadriver-selectors-disjoint", "cuda-driver-compatible",
    "gpu-supported-by-driver", "operator-supports-driver", "fabric-manager-matches", "canary-one-node-at-a-time",
    "parallelism-within-spare-capacity", "spare-capacity", "eviction-respects-pdb", "pdb-allows-drain",
    "model-redundancy", "change-ticket", "upgrade-controller-enabled", "wait-for-batch-jobs",
}
STACK_RULES = {
    "single-driver-owner", "nvidiadriver-selectors-disjoint", "cuda-driver-compatible", "gpu-supported-by-driver",
    "fabric-manager-matches", "canary-one-node-at-a-time", "parallelism-within-spare-capacity", "spare-capacity",
    "change-ticket",
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


def test_main_builds_one_pack_with_every_policy(monkeypatch):
    captured = {}

    def fake_pack(**kwargs):
        captured.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", fake_pack)
    runpy.run_path(str(POLICY_DIR / "__main__.py"), run_name="__main__")
    assert captured["name"] == "gpu-driver-upgrade"
    assert captured["enforcement_level"] == EnforcementLevel.MANDATORY
    policies = captured["policies"]
    assert [p.name for p in policies] == list(POLICY_IDS)
    for built in policies:
        kind = StackValidationPolicy if built.name in STACK_RULES else ResourceValidationPolicy
        assert isinstance(built, kind), built.name
        assert built.enforcement_level.value == REGISTRY[built.name].level.value
        assert built.remediation_steps == REGISTRY[built.name].remediation


def _policy_resources(run):
    return [
        PolicyResource(r.type, r.props, r.urn or f"urn:{r.name}", r.name, None, None, None, [], {})
        for r in from_registered(run.resources)
    ]


def _run_stack_policy(policy_id, run, config=None):
    built = pack.build_policy(REGISTRY[policy_id])
    reported = []
    built.validate(StackValidationArgs(_policy_resources(run), config), lambda msg, urn=None: reported.append(msg))
    return reported


def _run_resource_policy(policy_id, run, config=None):
    built = pack.build_policy(REGISTRY[policy_id])
    reported = []
    for res in _policy_resources(run):
        args = ResourceValidationArgs(res.resource_type, res.props, res.urn, res.name, None, None, config)
        built.validate(args, lambda msg, urn=None: reported.append(msg))
    return reported


def test_stack_policy_reports_through_crossguard():
    stack, build, _ = VARIANTS["parallelism-within-spare-capacity"]
    reported = _run_stack_policy("parallelism-within-spare-capacity", run_program(build(), stack))
    assert any("2 GPUs out but only 1 spare" in m for m in reported)


def test_resource_policy_reports_through_crossguard():
    stack, build, _ = VARIANTS["eviction-respects-pdb"]
    reported = _run_resource_policy("eviction-respects-pdb", run_program(build(), stack))
    assert any("podDeletion.force must be false" in m for m in reported)


def test_advice_only_reaches_crossguard_when_asked():
    # 580.105.08 is an R580 release that operator v26.7.0 does not list: advice, not a violation.
    unlisted = run_program(change(stack_config("canary"), "driver", lambda d: d.update(version="580.105.08")), "canary")
    assert _run_resource_policy("operator-supports-driver", unlisted) == []
    asked = _run_resource_policy("operator-supports-driver", unlisted, {pack.ADVICE_SETTING: True})
    assert len(asked) == 1 and "580.105.08" in asked[0]


def test_pulumi_policy_yaml_uses_the_python_runtime():
    import yaml

    document = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert document["runtime"]["name"] == "python"
    assert (POLICY_DIR / document["runtime"]["options"]["virtualenv"]).resolve() == (POLICY_DIR.parent / ".venv")
