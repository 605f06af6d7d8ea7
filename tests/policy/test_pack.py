"""The CrossGuard pack wires every registered rule, without starting the analyzer server."""

from __future__ import annotations

import json
import runpy

import pulumi_policy
from google.protobuf import json_format, struct_pb2
import pytest
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy import facts, pack
from policy.findings import Level
from policy.evaluate import POLICY_DIR, enforcement, from_registered, load_config, settings_entry
from policy.registry import POLICY_IDS, REGISTRY
from preview.run import run_program
from tests.conftest import change, stack_config
from tests.policy.variants import VARIANTS

STACK_RULES = {
    "single-driver-owner", "nvidiadriver-selectors-disjoint", "cuda-driver-compatible", "gpu-supported-by-driver",
    "fabric-manager-matches", "canary-one-node-at-a-time", "parallelism-within-spare-capacity", "spare-capacity",
    "change-ticket", "wait-for-batch-jobs", "operator-supports-os", "per-pool-mode-own-change",
    "operator-supports-driver",  # a stack rule since it reads what the fleet ran (a rollback is not blocked)
    "held-pool-pinned",
    "canary-attested",
    "facts-readable",
    "waves-in-order", "old-generation-kept", "validation-job-required", "soak-floor", "maintenance-window",  # issue 23
    "pool-hardware-matches-size",  # issue 30
    "guard-image-digest",  # issue 35
}


def test_main_builds_one_pack_with_every_policy(monkeypatch):
    captured = {}

    def fake_pack(**kwargs):
        captured.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", fake_pack)
    runpy.run_path(str(POLICY_DIR / "__main__.py"), run_name="__main__")
    assert captured["name"] == "gpu-driver-upgrade"
    assert captured["enforcement_level"] == EnforcementLevel.MANDATORY
    *policies, advice = captured["policies"]
    assert [p.name for p in policies] == list(POLICY_IDS)
    for built in policies:
        kind = StackValidationPolicy if built.name in STACK_RULES else ResourceValidationPolicy
        assert isinstance(built, kind), built.name
        assert built.enforcement_level.value == REGISTRY[built.name].level.value
        assert built.remediation_steps == REGISTRY[built.name].remediation
    assert advice.name == "policy-advice" and isinstance(advice, StackValidationPolicy)
    assert advice.enforcement_level == EnforcementLevel.ADVISORY


def _policy_resources(run):
    return [
        PolicyResource(r.type, r.props, r.urn or f"urn:{r.name}", r.name, None, None, None, [], {})
        for r in from_registered(run.resources)
    ]


def _run_stack_policy(policy_id, run, config=None):
    built = pack.build_policy(REGISTRY[policy_id])
    return _validate_stack(built, run, config)


def _validate_stack(built, run, config=None):
    if built.name == pack.ADVICE_POLICY:
        # The engine runs the pack's policies in its order, the advice policy last: the configured ones have
        # been handed their settings (the stage's pack config) by then, and the advice policy reads them.
        stage_config = load_config(run.outputs["stage"])
        for policy in REGISTRY.values():
            if policy.config is not None:
                pack.build_policy(policy).validate(
                    StackValidationArgs(_policy_resources(run), settings_entry(policy.id, stage_config)),
                    lambda msg, urn=None: None)
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


def test_advice_reaches_crossguard_through_the_advice_policy_only():
    # 580.105.08 is an R580 release that operator v26.7.0 does not list: advice, not a violation.
    unlisted = run_program(change(stack_config("canary"), "driver", lambda d: d.update(version="580.105.08")), "canary")
    assert _run_stack_policy("operator-supports-driver", unlisted) == []
    reported = _validate_stack(pack.build_advice_policy(), unlisted)
    branch_only = [m for m in reported if m.startswith("[operator-supports-driver] ")]
    assert len(branch_only) == 3  # one per canary pool's NVIDIADriver
    assert all("580.105.08" in m and "580.173.02" in m for m in branch_only)


def test_advice_policy_reports_every_rules_advice_and_no_violation(rendered):
    # prod holds gpua100 and gpuh100 on 570.195.03, which operator v26.7.0 does not list: the deliberate
    # held-pool exception is advice, and the engine shows it under policy-advice.
    reported = _validate_stack(pack.build_advice_policy(), rendered["prod"])
    held = [m for m in reported if m.startswith("[operator-supports-driver] ") and "held pool" in m]
    assert len(held) == 2 and all("570" in m for m in held)
    # A mandatory violation never travels through the advice policy.
    stack, build, _ = VARIANTS["eviction-respects-pdb"]
    forced = _validate_stack(pack.build_advice_policy(), run_program(build(), stack))
    assert not any("force must be false" in m for m in forced)
    assert any("force must be false" in m for m in _run_resource_policy("eviction-respects-pdb", run_program(build(), stack)))


def test_advice_in_plan_matches_the_advice_policy(rendered):
    from policy.evaluate import evaluate, load_config

    run = rendered["prod"]
    planned = sorted(
        f"[{v.policy}] {v.message}" for v in evaluate(from_registered(run.resources), load_config("prod"))
        if v.enforcement.value == "advisory" and REGISTRY[v.policy].level.value == "mandatory"
    )
    assert planned and planned == sorted(_validate_stack(pack.build_advice_policy(), run))


def test_pulumi_policy_yaml_uses_the_python_runtime():
    import yaml

    document = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert document["runtime"]["name"] == "python"
    assert (POLICY_DIR / document["runtime"]["options"]["virtualenv"]).resolve() == (POLICY_DIR.parent / ".venv")


def _as_the_engine_sends(props):
    """Props as the analyzer receives them: a protobuf Struct, where every number is a double."""
    wire = struct_pb2.Struct()
    wire.update(json.loads(json.dumps(props)))
    return deserialize_properties(json_format.MessageToDict(wire))


@pytest.mark.parametrize("stack", ["canary", "prod", "eks-canary", "eks-prod"])
def test_the_pack_passes_the_examples_on_engine_shaped_props(rendered, stack):
    run = rendered[stack]
    engine_resources = [
        PolicyResource(r.type, _as_the_engine_sends(r.props), r.urn, r.name, None, None, None, [], {})
        for r in from_registered(run.resources)
    ]
    assert any(isinstance(v, float) for r in engine_resources for v in _numbers(r.props))  # the wire did its thing
    config = load_config(run.outputs["stage"])
    blocking = []
    for policy in REGISTRY.values():
        if enforcement(policy, config) != Level.MANDATORY:
            continue
        built = pack.build_policy(policy)
        report = lambda msg, urn=None, policy_id=policy.id: blocking.append(f"{policy_id}: {msg}")  # noqa: E731
        if isinstance(built, StackValidationPolicy):
            built.validate(StackValidationArgs(engine_resources, settings_entry(policy.id, config)), report)
        else:
            for res in engine_resources:
                built.validate(ResourceValidationArgs(res.resource_type, res.props, res.urn, res.name, None, None,
                                                      settings_entry(policy.id, config)), report)
    assert blocking == []


def test_engine_doubles_read_back_as_ints():
    props = facts.EngineProps(_as_the_engine_sends({"spec": {"minAvailable": 1, "ratio": 0.5, "items": [{"n": 2}]}}))
    assert props["spec"]["minAvailable"] == 1 and isinstance(props["spec"]["minAvailable"], int)
    assert props["spec"]["ratio"] == 0.5
    assert isinstance(props["spec"]["items"][0]["n"], int)


def _numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_every_policy_has_its_section_in_the_docs():
    text = (POLICY_DIR.parent / "docs" / "policies.md").read_text()
    sections = {line.removeprefix("## ").split(" (")[0] for line in text.splitlines() if line.startswith("## ")}
    assert set(POLICY_IDS) <= sections, set(POLICY_IDS) - sections
    assert f"the {len(POLICY_IDS)} policies report only their" in text.replace("\n", " ")
