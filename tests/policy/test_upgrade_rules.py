"""policy.upgrade_rules called directly: the upgrade controller is on and waits for batch jobs."""

from __future__ import annotations

from policy import upgrade_rules
from policy.facts import Resource
from preview.run import run_program
from gpu_knowledge import labels
from engine_contracts import resource_facts as rf
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
    stage_canary = next(d for d in of_type(resources(rendered["canary"]), rf.NVIDIA_DRIVER) if d.name == "gpu-gpucanary")
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


# ---------------------------------------------------------------- held-pool-pinned


def _cluster_policy_mode(stack_name: str, **operator) -> list[Resource]:
    config = change(stack_config(stack_name), "gpuOperator", lambda op: op.update(useNvidiaDriverCrd=False, **operator))
    return resources(run_program(config, stack_name))


def _held_findings(items: list[Resource]) -> dict[str, tuple[str, str]]:
    """pool -> (level, message) of each held-pool-pinned finding."""
    found = {}
    for finding in upgrade_rules.held_pool_pinned(stack(items)):
        pool = finding.message.split()[1]
        found[pool] = ("advisory" if finding.advisory else "enforced", finding.message)
    return found


def test_per_pool_mode_pins_held_pools_so_nothing_is_found(rendered):
    items = resources(rendered["prod"])
    held = [p for p in stack(items).pools.values() if p.facts.held]
    assert {p.name for p in held} == {"gpua100", "gpuh100"}
    assert list(upgrade_rules.held_pool_pinned(stack(items))) == []


def test_cluster_policy_mode_holds_by_the_skip_label_alone_and_says_so():
    # Issue 20 point 5: AKS agent pools with no autoscaler cannot grow, but a node AKS repairs, reimages or
    # replaces installs the ClusterPolicy's driver all the same: enforced, naming the events and the version.
    found = _held_findings(_cluster_policy_mode("prod"))
    assert set(found) == {"gpua100", "gpuh100"}
    for _pool, (level, message) in found.items():
        assert level == "enforced", message
        assert "580.173.02" in message and "skip label alone" in message
        assert "AKS node auto-repair" in message and "EKS instance refresh" in message and "replaced" in message
        assert "cannot grow does not keep it" in message


def test_a_held_pool_is_enforced_whether_or_not_it_can_grow():
    items = _cluster_policy_mode("prod")
    grown = []
    for res in items:
        if res.type == rf.AKS_POOL and res.props["nodeLabels"].get(labels.POOL) == "gpuh100":
            res = Resource(res.type, res.name, {**res.props, "enableAutoScaling": True, "maxCount": res.props["count"] + 2})
        grown.append(res)
    found = _held_findings(grown)
    assert found["gpuh100"][0] == "enforced" and "its cloud pool can grow too" in found["gpuh100"][1]
    assert found["gpua100"][0] == "enforced"
    # Autoscaling on but already at its maximum: it cannot grow, and it is held no better for that.
    at_max = [
        Resource(r.type, r.name, {**r.props, "maxCount": r.props["count"]}, r.urn)
        if r.type == rf.AKS_POOL and r.props.get("enableAutoScaling") else r
        for r in grown
    ]
    assert _held_findings(at_max)["gpuh100"][0] == "enforced"


def test_an_existing_clusters_pool_may_grow_so_it_is_enforced():
    found = _held_findings(_cluster_policy_mode("existing-prod"))
    assert found and all(level == "enforced" for level, _ in found.values())
    assert all("nothing shows that it cannot grow" in message for _, message in found.values())


def test_a_stated_reason_turns_the_finding_into_advice():
    reason = "GPU pools are fixed-size by contract; CHG-4711"
    found = _held_findings(_cluster_policy_mode("existing-prod", unpinnedHoldReason=reason))
    assert found and all(level == "advisory" and reason in message for level, message in found.values())


def test_helm_mode_is_a_cluster_wide_driver_too():
    found = _held_findings(_cluster_policy_mode("existing-prod", clusterPolicy="helm"))
    assert found and all("Helm release" in message for _, message in found.values())


def test_can_grow_per_cloud():
    assert rf.can_grow(rf.AKS_POOL, {"count": 3}) is False  # autoscaler off: AKS keeps count
    assert rf.can_grow(rf.AKS_POOL, {"count": 3, "enableAutoScaling": True, "maxCount": 4}) is True
    assert rf.can_grow(rf.AKS_POOL, {"count": 3, "enableAutoScaling": True, "maxCount": 3}) is False
    assert rf.can_grow(rf.AKS_POOL, {"enableAutoScaling": True}) is None
    assert rf.can_grow(rf.EKS_NODE_GROUP, {"scalingConfig": {"desiredSize": 3, "maxSize": 4}}) is True
    assert rf.can_grow(rf.EKS_NODE_GROUP, {"scalingConfig": {"desiredSize": 3.0, "maxSize": 3.0}}) is False
    assert rf.can_grow(rf.EKS_NODE_GROUP, {}) is None
    assert rf.can_grow(rf.CONFIG_MAP, {"data": {"nodeCount": "3"}}) is None
