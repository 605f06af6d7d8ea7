"""policy.upgrade_rules called directly: the upgrade controller is on and waits for batch jobs."""

from __future__ import annotations

from policy import upgrade_rules
from policy.facts import Resource
from preview.run import run_program
from spec import labels
from spec import resource_facts as rf
from tests.conftest import stack_config
from tests.policy.rules import of_type, resources, spec_edit, stack
from tests.policy.variants import change


# ---------------------------------------------------------------- wait-for-batch-jobs


def test_batch_selector_covered_by_a_broader_wait_selector():
    def edit(op):
        op["batchJobSelectors"] = ["workload-class=batch,team=ml", "workload-class==batch"]

    items = resources(run_program(change(stack_config("prod"), "gpuOperator", edit), "prod"))
    assert list(upgrade_rules.wait_for_batch_jobs(stack(items))) == []


def test_batch_selectors_are_seen_in_helm_mode_through_the_pdbs():
    from tests.policy.variants import _helm_without_nvidiadrivers

    items = resources(run_program(_helm_without_nvidiadrivers(["workload-class=finetune"]), "prod"))
    (release,) = of_type(items, rf.HELM_RELEASE)
    assert "metadata" not in release.props  # the Release itself cannot carry the selectors
    (finding,) = upgrade_rules.wait_for_batch_jobs(stack(items))
    assert finding.resource is release and "workload-class=finetune" in finding.message
    covered = resources(run_program(_helm_without_nvidiadrivers(["workload-class=batch"]), "prod"))
    assert list(upgrade_rules.wait_for_batch_jobs(stack(covered))) == []


# ---------------------------------------------------------------- upgrade-controller-enabled


def test_unset_auto_upgrade_takes_the_default_of_the_resource_kind(rendered, helm_release):
    # (test_capacity_rules.py checks maxParallelUpgrades' defaults on the same resources.)
    (stage_canary,) = of_type(resources(rendered["canary"]), rf.NVIDIA_DRIVER)
    # NVIDIADriver CRD: autoUpgrade defaults to true.
    crd = spec_edit(stage_canary, ("spec", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None)
    assert list(upgrade_rules.upgrade_controller_enabled(crd)) == []
    # Helm values: the chart renders autoUpgrade false.
    notes = {**helm_release.props.get("metadata", {}), "labels": {labels.ROLE: "canary"}}
    helm = spec_edit(
        Resource(helm_release.type, helm_release.name, {**helm_release.props, "metadata": notes}, helm_release.urn),
        ("values", "driver", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None,
    )
    (off,) = upgrade_rules.upgrade_controller_enabled(helm)
    assert "defaults to false" in off.message
    # ClusterPolicy CRD: autoUpgrade defaults to false.
    (patch,) = of_type(resources(rendered["prod"]), rf.CLUSTER_POLICY_PATCH)
    cp = spec_edit(patch, ("spec", "driver", "upgradePolicy"), autoUpgrade=None)
    (cp_off,) = upgrade_rules.upgrade_controller_enabled(cp)
    assert "defaults to false" in cp_off.message


def test_malformed_auto_upgrade_is_a_finding_not_an_exception(rendered):
    (patch,) = of_type(resources(rendered["prod"]), rf.CLUSTER_POLICY_PATCH)
    odd_auto = spec_edit(patch, ("spec", "driver", "upgradePolicy"), autoUpgrade="yes")
    (finding,) = upgrade_rules.upgrade_controller_enabled(odd_auto)
    assert "true or false" in finding.message
