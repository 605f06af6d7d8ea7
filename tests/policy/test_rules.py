"""Rules called directly on rendered resources, for cases no config can produce, and edge cases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy import compat_rules, disruption_rules, facts
from policy.evaluate import check_config, enforcement, evaluate, from_registered, load_config
from policy.facts import Resource
from policy.findings import Level
from policy.registry import REGISTRY
from preview.run import run_program
from tests.conftest import stack_config
from tests.policy.variants import change, pool, upgrade_policy


def resources(run) -> list[Resource]:
    return from_registered(run.resources)


def of_type(items: list[Resource], type_token: str) -> list[Resource]:
    return [r for r in items if r.type == type_token]


def test_a_second_nvidiadriver_over_the_same_pool_is_reported(rendered):
    items = resources(rendered["prod"])
    original = of_type(items, facts.NVIDIA_DRIVER)[0]
    catch_all = Resource(
        original.type, "gpu-everything", {**original.props, "spec": {**original.props["spec"], "nodeSelector": {}}}
    )
    assert list(compat_rules.nvidiadriver_selectors_disjoint(items)) == []
    findings = list(compat_rules.nvidiadriver_selectors_disjoint([*items, catch_all]))
    assert len(findings) == 3  # overlaps each of the three pool drivers
    assert all("gpu-everything" in f.message for f in findings)


def test_an_aks_pool_with_its_own_driver_under_the_operator_is_reported(rendered):
    items = resources(rendered["prod"])
    agent = of_type(items, facts.AKS_POOL)[0]
    installed = Resource(agent.type, agent.name, {**agent.props, "gpuProfile": {"driver": "Install"}})
    swapped = [installed if r is agent else r for r in items]
    (finding,) = compat_rules.single_driver_owner(swapped)
    assert "gpuProfile.driver 'Install'" in finding.message and finding.resource is installed


def test_forward_compat_bridges_a_newer_cuda_on_an_ltsb_branch():
    def edit(models):
        models[0].update(cudaVersion="13.1", cudaForwardCompat=True)

    run = run_program(change(stack_config("canary"), "models", edit), "canary")
    assert list(compat_rules.cuda_driver_compatible(resources(run))) == []


def test_host_fabric_manager_pinned_to_the_pool_driver_passes_and_a_mismatch_fails():
    pinned = change(stack_config("prod"), "nodePools", pool("gpuh100", fabricManager="host", fabricManagerVersion="570.195.03"))
    assert list(compat_rules.fabric_manager_matches(resources(run_program(pinned, "prod")))) == []
    wrong = change(stack_config("prod"), "nodePools", pool("gpuh100", fabricManager="host", fabricManagerVersion="580.173.02"))
    (finding,) = compat_rules.fabric_manager_matches(resources(run_program(wrong, "prod")))
    assert "must equal driver 570.195.03" in finding.message


def unlisted_release_canary() -> list:
    """The canary on 580.105.08: a real R580 release that operator v26.7.0 does not list (it lists 580.173.02)."""
    config = change(stack_config("canary"), "driver", lambda d: d.update(version="580.105.08"))
    return resources(run_program(config, "canary"))


def test_branch_only_operator_support_is_advice(rendered):
    (listed,) = of_type(resources(rendered["canary"]), facts.NVIDIA_DRIVER)
    assert list(compat_rules.operator_supports_driver(listed)) == []
    (driver,) = of_type(unlisted_release_canary(), facts.NVIDIA_DRIVER)
    (finding,) = compat_rules.operator_supports_driver(driver)
    assert finding.advisory and "580.105.08" in finding.message and "580.173.02" in finding.message


def test_zero_eviction_timeout_is_advice_not_mandatory():
    config = change(stack_config("prod"), "gpuOperator", upgrade_policy(podDeletion__timeoutSeconds=0))
    items = resources(run_program(config, "prod"))
    found = [f for r in items for f in disruption_rules.eviction_respects_pdb(r)]
    assert found and all(f.advisory for f in found)


def test_batch_selector_covered_by_a_broader_wait_selector():
    def edit(op):
        op["batchJobSelectors"] = ["workload-class=batch,team=ml", "workload-class==batch"]

    items = resources(run_program(change(stack_config("prod"), "gpuOperator", edit), "prod"))
    assert [f for r in items for f in disruption_rules.wait_for_batch_jobs(r)] == []


def test_unknown_gpu_product_is_reported_as_advice_never_passed():
    config = change(stack_config("prod"), "nodePools", pool("gput4", gpuProduct="NVIDIA-Mystery-9000"))
    findings = list(compat_rules.gpu_supported_by_driver(resources(run_program(config, "prod"))))
    assert findings and all(f.advisory for f in findings)
    assert "NVIDIA-Mystery-9000" in findings[0].message


def test_canary_without_a_spare_node_fails_spare_capacity_unless_config_downgrades_it(rendered):
    assert not [v for v in evaluate(resources(rendered["canary"]), load_config("canary")) if v.policy == "spare-capacity"]
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


def test_resource_with_missing_facts_is_advice(rendered):
    (pdb, *_) = of_type(resources(rendered["prod"]), facts.PDB)
    bare = replace(pdb, props={**pdb.props, "metadata": {"name": "x"}})
    (finding,) = disruption_rules.pdb_allows_drain(bare)
    assert finding.advisory and "not visible" in finding.message
