"""policy.evaluate: enforcement from the stage's pack config, advice, disabled policies."""

from __future__ import annotations

import pytest

from policy.evaluate import check_config, enforcement, evaluate, load_config
from policy.findings import Level
from policy.registry import REGISTRY
from preview.run import run_program
from tests.conftest import stack_config
from tests.policy.rules import resources
from tests.policy.variants import change, pool


def test_canary_pool_without_a_spare_node_fails_spare_capacity_and_config_can_downgrade_it(rendered):
    found = [v for v in evaluate(resources(rendered["canary"]), load_config("canary")) if v.policy == "spare-capacity"]
    # Only the advice that the validation job's hold leaves pods Pending (preflight warns there too).
    assert [(v.enforcement, "validation job" in v.message) for v in found] == [(Level.ADVISORY, True)]
    config = change(stack_config("canary"), "nodePools", pool("gpucanary", nodeCount=2))
    items = resources(run_program(config, "canary"))
    spare = [v for v in evaluate(items, load_config("canary")) if v.policy == "spare-capacity"]
    assert spare and {v.enforcement for v in spare} == {Level.MANDATORY}
    relaxed = evaluate(items, {**load_config("canary"), "spare-capacity": "advisory"})
    assert {v.enforcement for v in relaxed if v.policy == "spare-capacity"} == {Level.ADVISORY}


def test_enforcement_resolution_and_config_errors():
    policy = REGISTRY["change-ticket"]
    assert enforcement(policy, {}) == Level.MANDATORY
    assert enforcement(policy, {"all": "advisory"}) == Level.ADVISORY
    assert enforcement(policy, {"all": "advisory", "change-ticket": {"enforcementLevel": "disabled"}}) == Level.DISABLED
    # An object without enforcementLevel (it may carry other policy config) falls back to all, then the default.
    assert enforcement(policy, {"all": "advisory", "change-ticket": {"note": "x"}}) == Level.ADVISORY
    assert enforcement(policy, {"change-ticket": {}}) == Level.MANDATORY
    check_config({"all": "advisory", "change-ticket": {"note": "x"}})
    with pytest.raises(ValueError, match="advice must never block"):
        check_config({"all": "mandatory"})  # "all" would make the pack's advice policy mandatory too
    with pytest.raises(ValueError, match="advice must never block"):
        check_config({"policy-advice": "mandatory"})
    check_config({"all": "mandatory", "policy-advice": {"enforcementLevel": "disabled"}})
    with pytest.raises(ValueError, match="unknown policies: chnage-ticket"):
        check_config({"chnage-ticket": "mandatory"})
    with pytest.raises(ValueError, match="change-ticket: enforcement level 'loud'"):
        check_config({"change-ticket": "loud"})


def test_disabled_policy_reports_nothing(rendered):
    config = change(stack_config("prod"), "models", lambda models: models[0].update(replicas=1, minAvailable=1))
    items = resources(run_program(config, "prod"))
    assert any(v.policy == "model-redundancy" for v in evaluate(items, {}))
    assert not any(v.policy == "model-redundancy" for v in evaluate(items, {"model-redundancy": "disabled"}))


def test_stage_config_files_are_valid():
    for stage in ("canary", "prod"):
        config = load_config(stage)
        assert config["all"] == "mandatory"
    assert load_config(None) == {}


def test_disabling_the_advice_policy_hides_advice_in_plan_too(rendered):
    items = resources(rendered["prod"])
    assert any(v.enforcement == Level.ADVISORY for v in evaluate(items, load_config("prod")))
    quiet = evaluate(items, {**load_config("prod"), "policy-advice": "disabled"})
    assert quiet == []
    assert all(v.enforcement == Level.MANDATORY for v in quiet)
