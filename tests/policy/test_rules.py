"""Rules called directly on rendered resources, for cases no config can produce, and edge cases."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from policy import compat_rules, disruption_rules, facts, platform_rules, transition_rules
from policy.evaluate import check_config, enforcement, evaluate, from_registered, load_config
from policy.facts import Resource
from policy.findings import Level
from policy.registry import REGISTRY
from preview.run import run_program
from spec import labels
from tests.conftest import eks_operator_owned, stack_config
from tests.policy.variants import change, eks_pool, pool, upgrade_policy


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


def test_an_nvidia_ami_node_group_under_the_operator_is_reported():
    items = resources(run_program(eks_operator_owned(), "eks-prod"))
    assert list(compat_rules.single_driver_owner(items)) == []
    group = of_type(items, facts.EKS_NODE_GROUP)[0]
    nvidia = Resource(group.type, group.name, {**group.props, "amiType": "AL2023_x86_64_NVIDIA"})
    (finding,) = compat_rules.single_driver_owner([nvidia if r is group else r for r in items])
    assert "amiType AL2023_x86_64_NVIDIA" in finding.message and finding.resource is nvidia


def test_operator_owned_pool_on_an_os_without_a_driver_image_is_reported(rendered):
    items = resources(rendered["prod"])
    assert [f for f in platform_rules.operator_supports_os(items) if not f.advisory] == []
    agent = of_type(items, facts.AKS_POOL)[0]
    azure_linux = Resource(agent.type, agent.name, {**agent.props, "osSKU": "AzureLinux3"})
    (finding,) = platform_rules.operator_supports_os([azure_linux if r is agent else r for r in items])
    assert not finding.advisory and finding.resource is azure_linux
    assert "no driver container for Azure Linux" in finding.message


def test_os_support_follows_the_operator_release_and_the_declared_custom_ami():
    items = resources(run_program(eks_operator_owned(), "eks-prod"))
    assert list(platform_rules.operator_supports_os(items)) == []
    group = of_type(items, facts.EKS_NODE_GROUP)[0]
    labels_26_04 = {**group.props["labels"], "gpu-driver-upgrade.io/os": "ubuntu26.04"}
    newer = Resource(group.type, group.name, {**group.props, "labels": labels_26_04})
    swapped = [newer if r is group else r for r in items]
    assert list(platform_rules.operator_supports_os(swapped)) == []  # 26.7 lists Ubuntu 26.04
    older = [_with_operator(r, "v25.10.1") for r in swapped]
    (finding,) = platform_rules.operator_supports_os(older)
    assert not finding.advisory and "not ubuntu26.04" in finding.message
    unknown = [_with_operator(r, "v25.3.3") for r in swapped]
    assert all(f.advisory for f in platform_rules.operator_supports_os(unknown))


def _with_operator(res: Resource, chart: str) -> Resource:
    """A driver object annotated as running under another operator release (others unchanged)."""
    if res.type == facts.HELM_RELEASE:
        return Resource(res.type, res.name, {**res.props, "version": chart})
    if res.type != facts.NVIDIA_DRIVER:
        return res
    meta = res.props["metadata"]
    notes = {**meta["annotations"], "gpu-driver-upgrade.io/operator-version": chart}
    return Resource(res.type, res.name, {**res.props, "metadata": {**meta, "annotations": notes}})


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
    assert list(compat_rules.operator_supports_driver([listed])) == []
    (driver,) = of_type(unlisted_release_canary(), facts.NVIDIA_DRIVER)
    (finding,) = compat_rules.operator_supports_driver([driver])
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
    assert list(disruption_rules.wait_for_batch_jobs(items)) == []


def test_batch_selectors_are_seen_in_helm_mode_through_the_pdbs():
    from tests.policy.variants import _helm_without_nvidiadrivers

    items = resources(run_program(_helm_without_nvidiadrivers(["workload-class=finetune"]), "prod"))
    (release,) = of_type(items, facts.HELM_RELEASE)
    assert "metadata" not in release.props  # the Release itself cannot carry the selectors
    (finding,) = disruption_rules.wait_for_batch_jobs(items)
    assert finding.resource is release and "workload-class=finetune" in finding.message
    covered = resources(run_program(_helm_without_nvidiadrivers(["workload-class=batch"]), "prod"))
    assert list(disruption_rules.wait_for_batch_jobs(covered)) == []


def test_unknown_gpu_product_is_reported_as_advice_never_passed():
    config = change(stack_config("prod"), "nodePools", pool("gput4", gpuProduct="NVIDIA-Mystery-9000"))
    findings = list(compat_rules.gpu_supported_by_driver(resources(run_program(config, "prod"))))
    assert findings and all(f.advisory for f in findings)
    assert "NVIDIA-Mystery-9000" in findings[0].message


def test_canary_pool_without_a_spare_node_fails_spare_capacity_and_config_can_downgrade_it(rendered):
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


def test_resource_with_missing_facts_is_advice(rendered):
    (pdb, *_) = of_type(resources(rendered["prod"]), facts.PDB)
    bare = replace(pdb, props={**pdb.props, "metadata": {"name": "x"}})
    (finding,) = disruption_rules.pdb_allows_drain(bare)
    assert finding.advisory and "not visible" in finding.message


def test_disabling_the_advice_policy_hides_advice_in_plan_too(rendered):
    items = resources(rendered["prod"])
    assert any(v.enforcement == Level.ADVISORY for v in evaluate(items, load_config("prod")))
    quiet = evaluate(items, {**load_config("prod"), "policy-advice": "disabled"})
    assert quiet == []


# ---------------------------------------------------------------- cuda-driver-compatible: forward compat


def _canary_model(**changes) -> list[Resource]:
    return resources(run_program(change(stack_config("canary"), "models", lambda m: m[0].update(changes)), "canary"))


def test_forward_compat_package_older_than_the_driver_is_a_violation():
    (finding,) = compat_rules.cuda_driver_compatible(_canary_model(cudaVersion="12.9", cudaForwardCompat=True))
    assert not finding.advisory
    assert "remove cuda-compat" in finding.message and "cudaForwardCompat: false" in finding.message
    # Without the package the same CUDA runs natively on 580.173.02.
    assert list(compat_rules.cuda_driver_compatible(_canary_model(cudaVersion="12.9"))) == []


def test_forward_compat_on_an_unreadable_cuda_is_advice():
    items = _canary_model(cudaForwardCompat=True)
    (pdb,) = of_type(items, facts.PDB)
    notes = {**pdb.props["metadata"]["annotations"], labels.ANNOTATION_CUDA: "12.x"}
    odd = replace(pdb, props={**pdb.props, "metadata": {**pdb.props["metadata"], "annotations": notes}})
    (finding,) = compat_rules.cuda_driver_compatible([odd if r is pdb else r for r in items])
    assert finding.advisory and "12.x" in finding.message


# ---------------------------------------------------------------- gpu-supported-by-driver


def test_gpu_support_without_a_visible_driver_is_advice(rendered):
    items = [r for r in resources(rendered["canary"]) if r.type != facts.NVIDIA_DRIVER]
    (finding,) = compat_rules.gpu_supported_by_driver(items)
    assert finding.advisory and "no driver version is visible" in finding.message


# ---------------------------------------------------------------- driver-version-pinned (hand-edited props)


def _driver_spec_edit(res: Resource, path: tuple[str, ...], **changes) -> Resource:
    """``res`` with the mapping at ``path`` of its props updated (a key set to None is removed)."""
    props = copy.deepcopy(dict(res.props))
    target = props
    for key in path:
        target = target[key]
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return Resource(res.type, res.name, props, res.urn)


def _pinned(res: Resource) -> list:
    return list(compat_rules.driver_version_pinned(res))


@pytest.fixture(scope="module")
def helm_release() -> Resource:
    config = change(stack_config("prod"), "gpuOperator", lambda op: op.update(clusterPolicy="helm"))
    (release,) = of_type(resources(run_program(config, "prod")), facts.HELM_RELEASE)
    return release


@pytest.mark.parametrize("kind", ["nvidiadriver", "clusterpolicy", "helm"])
def test_driver_version_missing_or_a_bare_branch_is_mandatory_and_precompiled_branch_is_advice(
    rendered, helm_release, kind
):
    items = resources(rendered["prod"])
    res, path = {
        "nvidiadriver": (of_type(items, facts.NVIDIA_DRIVER)[0], ("spec",)),
        "clusterpolicy": (of_type(items, facts.CLUSTER_POLICY)[0], ("spec", "driver")),
        "helm": (helm_release, ("values", "driver")),
    }[kind]
    assert _pinned(res) == []
    (missing,) = _pinned(_driver_spec_edit(res, path, version=None))
    assert not missing.advisory and "must be set" in missing.message
    (branch,) = _pinned(_driver_spec_edit(res, path, version="580", usePrecompiled=False))
    assert not branch.advisory and "exact release" in branch.message
    (precompiled,) = _pinned(_driver_spec_edit(res, path, version="580", usePrecompiled=True))
    assert precompiled.advisory and "pins a branch" in precompiled.message
    (floating,) = _pinned(_driver_spec_edit(res, path, version="latest"))
    assert not floating.advisory


def test_an_nvidia_ami_node_group_without_release_version_is_mandatory(rendered):
    group = of_type(resources(rendered["eks-prod"]), facts.EKS_NODE_GROUP)[0]
    assert group.props["amiType"].endswith("_NVIDIA") and _pinned(group) == []
    unpinned = Resource(group.type, group.name, {k: v for k, v in group.props.items() if k != "releaseVersion"})
    (finding,) = _pinned(unpinned)
    assert not finding.advisory and "releaseVersion" in finding.message
    # A standard AMI carries no driver: its release need not be pinned for the driver's sake.
    plain = Resource(group.type, group.name, {**unpinned.props, "amiType": "AL2023_x86_64_STANDARD"})
    assert _pinned(plain) == []


# ---------------------------------------------------------------- canary-one-node-at-a-time, parallelism


def test_canary_without_a_visible_upgrade_policy_is_advice():
    # Before operator v26.7.0 NVIDIADrivers carry no upgradePolicy: the external ClusterPolicy's applies.
    config = change(stack_config("canary"), "gpuOperator", lambda op: op.update(chartVersion="v26.3.2"))
    items = resources(run_program(config, "canary"))
    assert all("upgradePolicy" not in r.props.get("spec", {}) for r in of_type(items, facts.NVIDIA_DRIVER))
    (finding,) = disruption_rules.canary_one_node_at_a_time(items)
    assert finding.advisory and "maxParallelUpgrades 1" in finding.message


def test_image_owned_canary_needs_no_operator_upgrade_policy(rendered):
    assert list(disruption_rules.canary_one_node_at_a_time(resources(rendered["eks-canary"]))) == []


@pytest.mark.parametrize(
    ("update_config", "flagged"),
    [
        ({"maxUnavailable": 2}, "maxUnavailable=2 takes 2"),
        ({"maxUnavailablePercentage": 50}, "maxUnavailablePercentage=50 takes 1"),  # 50% of 2 nodes is one
        ({"maxUnavailablePercentage": 100}, "maxUnavailablePercentage=100 takes 2"),
        ({"maxUnavailable": 1, "maxUnavailablePercentage": 50}, "not both"),
    ],
)
def test_canary_node_groups_update_one_node_at_a_time(rendered, update_config, flagged):
    items = [copy.deepcopy(r) for r in resources(rendered["eks-canary"])]
    group = of_type(items, facts.EKS_NODE_GROUP)[0]
    group.props["updateConfig"] = update_config
    findings = list(disruption_rules.canary_one_node_at_a_time(items))
    if "takes 1" in flagged:
        assert findings == []
    else:
        (finding,) = findings
        assert flagged in finding.message and not finding.advisory


@pytest.mark.parametrize("update_config", [{"maxUnavailable": 3}, {"maxUnavailablePercentage": 10}])
def test_canary_node_group_without_a_visible_size_is_not_capped_at_one(rendered, update_config):
    items = [copy.deepcopy(r) for r in resources(rendered["eks-canary"])]
    group = of_type(items, facts.EKS_NODE_GROUP)[0]
    group.props["updateConfig"] = update_config
    del group.props["scalingConfig"]
    (finding,) = disruption_rules.canary_one_node_at_a_time(items)
    assert "no visible desired size" in finding.message and not finding.advisory


def _without_stage(items: list[Resource]) -> list[Resource]:
    out = []
    for res in items:
        props = copy.deepcopy(dict(res.props))
        (props.get("metadata") or {}).get("annotations", {}).pop(labels.ANNOTATION_STAGE, None)
        (props.get("tags") or {}).pop(labels.TAG_STAGE, None)
        out.append(Resource(res.type, res.name, props, res.urn))
    return out


def test_parallelism_without_a_visible_stage_is_advice(rendered):
    items = _without_stage(resources(rendered["prod"]))
    assert facts.stage(items) is None
    (finding,) = disruption_rules.parallelism_within_spare_capacity(items)
    assert finding.advisory and "stage" in finding.message


# ---------------------------------------------------------------- defaults per resource kind, malformed values


def _canary_driver(rendered) -> Resource:
    (driver,) = of_type(resources(rendered["canary"]), facts.NVIDIA_DRIVER)
    return driver


def test_unset_policy_keys_take_the_defaults_of_the_resource_kind(rendered, helm_release):
    stage_canary = _canary_driver(rendered)
    # NVIDIADriver CRD: maxParallelUpgrades defaults to 1 and autoUpgrade to true.
    crd = _driver_spec_edit(stage_canary, ("spec", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None)
    assert list(disruption_rules.canary_one_node_at_a_time([crd])) == []
    assert list(disruption_rules.upgrade_controller_enabled(crd)) == []
    # Helm values: the chart renders maxParallelUpgrades 0 (unlimited) and autoUpgrade false.
    notes = {**helm_release.props.get("metadata", {}), "labels": {labels.ROLE: "canary"}}
    helm = _driver_spec_edit(
        Resource(helm_release.type, helm_release.name, {**helm_release.props, "metadata": notes}, helm_release.urn),
        ("values", "driver", "upgradePolicy"), maxParallelUpgrades=None, autoUpgrade=None,
    )
    (unlimited,) = disruption_rules.canary_one_node_at_a_time([helm])
    assert "0 (unlimited)" in unlimited.message and "unset" in unlimited.message
    (off,) = disruption_rules.upgrade_controller_enabled(helm)
    assert "defaults to false" in off.message
    # ClusterPolicy CRD: autoUpgrade defaults to false.
    (patch,) = of_type(resources(rendered["prod"]), facts.CLUSTER_POLICY)
    cp = _driver_spec_edit(patch, ("spec", "driver", "upgradePolicy"), autoUpgrade=None)
    (cp_off,) = disruption_rules.upgrade_controller_enabled(cp)
    assert "defaults to false" in cp_off.message


def test_malformed_policy_values_are_findings_not_exceptions(rendered):
    items = resources(rendered["prod"])
    (patch,) = of_type(items, facts.CLUSTER_POLICY)
    drivers = of_type(items, facts.NVIDIA_DRIVER)
    bad_parallel = [_driver_spec_edit(d, ("spec", "upgradePolicy"), maxParallelUpgrades="two") for d in drivers]
    swapped = [r for r in items if r.type != facts.NVIDIA_DRIVER] + bad_parallel
    found = list(disruption_rules.parallelism_within_spare_capacity(swapped))
    assert found and all("'two' is not a non-negative integer" in f.message and not f.advisory for f in found)
    bad_unavailable = [_driver_spec_edit(d, ("spec", "upgradePolicy"), maxUnavailable="lots") for d in drivers]
    swapped = [r for r in items if r.type != facts.NVIDIA_DRIVER] + bad_unavailable
    found = list(disruption_rules.parallelism_within_spare_capacity(swapped))
    assert found and all("maxUnavailable 'lots'" in f.message for f in found)
    odd_deletion = _driver_spec_edit(patch, ("spec", "driver", "upgradePolicy"), podDeletion="force")
    (finding,) = disruption_rules.eviction_respects_pdb(odd_deletion)
    assert "podDeletion must be an object" in finding.message and not finding.advisory
    not_a_policy = _driver_spec_edit(patch, ("spec", "driver"), upgradePolicy="fast")
    (finding,) = disruption_rules.eviction_respects_pdb(not_a_policy)
    assert "upgradePolicy must be an object" in finding.message
    odd_auto = _driver_spec_edit(patch, ("spec", "driver", "upgradePolicy"), autoUpgrade="yes")
    (finding,) = disruption_rules.upgrade_controller_enabled(odd_auto)
    assert "true or false" in finding.message


def test_malformed_pdb_is_a_finding_and_capacity_rules_stay_quiet_about_it(rendered):
    items = resources(rendered["prod"])
    pdb = next(r for r in of_type(items, facts.PDB) if "embed-triton" in r.name)
    bad = replace(pdb, props={**pdb.props, "spec": {**pdb.props["spec"], "minAvailable": "most"}})
    (finding,) = disruption_rules.pdb_allows_drain(bad)
    assert not finding.advisory and "malformed" in finding.message
    swapped = [bad if r is pdb else r for r in items]
    spare = list(disruption_rules.spare_capacity(swapped))
    assert spare and all(f.advisory for f in spare)


def test_pdb_with_max_unavailable_uses_the_disruption_controller_arithmetic(rendered):
    pdb = next(r for r in of_type(resources(rendered["prod"]), facts.PDB) if "embed-triton" in r.name)
    spec = {k: v for k, v in pdb.props["spec"].items() if k != "minAvailable"}
    allows = replace(pdb, props={**pdb.props, "spec": {**spec, "maxUnavailable": "1%"}})  # 1% of 4 rounds up to 1
    assert list(disruption_rules.pdb_allows_drain(allows)) == []
    blocks = replace(pdb, props={**pdb.props, "spec": {**spec, "maxUnavailable": 0}})
    (finding,) = disruption_rules.pdb_allows_drain(blocks)
    assert "maxUnavailable 0 lets no pod go" in finding.message


# ---------------------------------------------------------------- model-redundancy


def test_model_redundancy_without_visible_replicas_is_advice(rendered):
    (pdb, *_) = of_type(resources(rendered["prod"]), facts.PDB)
    bare = replace(pdb, props={**pdb.props, "metadata": {"name": "x"}})
    (finding,) = disruption_rules.model_redundancy(bare)
    assert finding.advisory and "replicas are not visible" in finding.message


# ---------------------------------------------------------------- EKS node group update parallelism and surge


def _eks_prod(*edits) -> list[Resource]:
    config = stack_config("eks-prod")
    for edit in edits:
        config = change(config, "nodePools", edit)
    return resources(run_program(config, "eks-prod"))


def _policy_findings(rule, items: list[Resource], group: str) -> list:
    return [f for f in rule(items) if f.resource is not None and f.resource.name == group]


# Leaving the Capacity Block: no launch template, so the node group names its instance type itself.
ON_DEMAND_DEFAULT = {
    "capacityType": "ON_DEMAND", "updateStrategy": "DEFAULT", "launchTemplate": None, "instanceTypes": ["p5.48xlarge"]
}


def test_node_group_beyond_spare_capacity_names_its_numbers():
    items = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2))
    (finding,) = disruption_rules.parallelism_within_spare_capacity(items)
    assert finding.resource.name == "gpu-h100-g1" and not finding.advisory
    assert finding.message == (
        "gpu-h100-g1: updateConfig.maxUnavailable=2 lets 2 of 3 nodes update at once with no surge "
        "(capacityType CAPACITY_BLOCK: the reservation is fixed); on pool gpu-h100 16 GPUs out but only 8 spare; "
        "llm-chat could drop below minAvailable"
    )


def test_default_strategy_on_demand_surge_passes_and_minimal_does_not():
    surging = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **ON_DEMAND_DEFAULT))
    assert list(disruption_rules.parallelism_within_spare_capacity(surging)) == []
    spot = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **{**ON_DEMAND_DEFAULT, "capacityType": "SPOT"}))
    assert list(disruption_rules.parallelism_within_spare_capacity(spot)) == []
    minimal = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, **{**ON_DEMAND_DEFAULT, "updateStrategy": "MINIMAL"}))
    (finding,) = disruption_rules.parallelism_within_spare_capacity(minimal)
    assert "(updateStrategy MINIMAL: old nodes terminate first)" in finding.message
    # A Capacity Block never surges, whatever the strategy.
    block_default = _eks_prod(eks_pool("gpu-h100", maxUnavailable=2, updateStrategy="DEFAULT"))
    (finding,) = disruption_rules.parallelism_within_spare_capacity(block_default)
    assert "CAPACITY_BLOCK" in finding.message


def test_node_group_without_surge_needs_its_nodes_covered_by_spare_gpus():
    # 2 nodes, both full: one node out keeps llm-chat at minAvailable but its evicted replica has nowhere to go.
    items = _eks_prod(pool("gpu-h100", nodeCount=2))
    (finding,) = disruption_rules.parallelism_within_spare_capacity(items)
    assert "lets 1 of 2 nodes update at once" in finding.message
    assert finding.message.endswith("on pool gpu-h100 8 GPUs out but only 0 spare")


def test_node_group_parallelism_is_a_prod_rule():
    # The canary has its own rule (canary-one-node-at-a-time); eks-canary's MINIMAL group is not checked here.
    config = change(stack_config("eks-canary"), "nodePools", eks_pool("gpu-canary", maxUnavailable=2))
    items = resources(run_program(config, "eks-canary"))
    assert list(disruption_rules.parallelism_within_spare_capacity(items)) == []


def _edit_group(items: list[Resource], name: str, **props) -> list[Resource]:
    """``items`` with the named node group's props changed (a value of None removes the key)."""
    out = []
    for res in items:
        if res.name == name:
            edited_props = {k: v for k, v in {**res.props, **props}.items() if v is not None}
            res = Resource(res.type, res.name, edited_props, res.urn)
        out.append(res)
    return out


@pytest.mark.parametrize(
    ("update_config", "nodes_out"),
    [({"maxUnavailablePercentage": 50}, 2), ({"maxUnavailablePercentage": 34}, 2), ({"maxUnavailablePercentage": 33}, 1),
     ({}, 1), (None, 1)],
)
def test_node_group_percentage_rounds_up_against_the_desired_size(rendered, update_config, nodes_out):
    items = resources(rendered["eks-prod"])
    config = None if update_config is None else {**update_config, "updateStrategy": "MINIMAL"}
    items = _edit_group(items, "gpu-h100-g1", updateConfig=config)
    found = _policy_findings(disruption_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    if nodes_out == 1:
        assert found == []  # 8 GPUs out, 8 spare, llm-chat keeps minAvailable
    else:
        (finding,) = found
        assert f"lets {nodes_out} of 3 nodes" in finding.message and "maxUnavailablePercentage=" in finding.message


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"updateConfig": "fast"}, "updateConfig must be an object, not 'fast'"),
        ({"updateConfig": {"maxUnavailable": "two"}}, "maxUnavailable must be an integer from 1 to 100, got 'two'"),
        ({"updateConfig": {"maxUnavailable": 0}}, "maxUnavailable must be an integer from 1 to 100, got 0"),
        ({"updateConfig": {"maxUnavailablePercentage": 150}}, "maxUnavailablePercentage must be an integer from 1 to 100"),
        ({"updateConfig": {"maxUnavailable": 1, "maxUnavailablePercentage": 10}}, "not both"),
        ({"updateConfig": {"maxUnavailable": 1, "updateStrategy": "FAST"}}, "updateStrategy must be one of DEFAULT, MINIMAL"),
        ({"capacityType": "RESERVED"}, "capacityType must be one of"),
    ],
)
def test_malformed_node_group_values_are_findings_not_exceptions(rendered, props, expected):
    items = _edit_group(resources(rendered["eks-prod"]), "gpu-h100-g1", **props)
    (finding,) = _policy_findings(disruption_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    assert expected in finding.message and not finding.advisory


def test_node_group_size_not_visible_is_advice(rendered):
    items = resources(rendered["eks-prod"])
    group = next(r for r in items if r.name == "gpu-h100-g1")
    items = _edit_group(items, "gpu-h100-g1", scalingConfig={**group.props["scalingConfig"], "desiredSize": "three"})
    (finding,) = _policy_findings(disruption_rules.parallelism_within_spare_capacity, items, "gpu-h100-g1")
    assert finding.advisory and "desiredSize" in finding.message


def test_generations_count_as_surge_only_where_the_node_groups_can_surge(rendered):
    assert list(disruption_rules.spare_capacity(resources(rendered["eks-prod"]))) == []
    (block,) = disruption_rules.spare_capacity(_eks_prod(pool("gpu-h100", nodeCount=2)))
    assert block.message.startswith("pool gpu-h100: 0 spare GPUs, less than one node (8)")
    why = "its generations cannot surge: gpu-h100-g1 (capacityType CAPACITY_BLOCK: the reservation is fixed)"
    assert why in block.message
    canary = change(stack_config("eks-canary"), "nodePools", pool("gpu-canary", nodeCount=1))
    (minimal,) = disruption_rules.spare_capacity(resources(run_program(canary, "eks-canary")))
    assert "gpu-canary-g1, gpu-canary-g2 (updateStrategy MINIMAL: GPU capacity declared scarce" in minimal.message
    # On-demand capacity with the DEFAULT strategy launches the new generation beside the old one.
    surging = _eks_prod(pool("gpu-h100", nodeCount=2), eks_pool("gpu-h100", **ON_DEMAND_DEFAULT))
    assert list(disruption_rules.spare_capacity(surging)) == []
    # A malformed strategy is no surge, and the message says why.
    items = _edit_group(surging, "gpu-h100-g1", updateConfig={"maxUnavailable": 1, "updateStrategy": "FAST"})
    (odd,) = disruption_rules.spare_capacity(items)
    assert "gpu-h100-g1 (updateStrategy must be one of DEFAULT, MINIMAL, got 'FAST')" in odd.message


# ---------------------------------------------------------------- changes against the last deployment


@pytest.mark.parametrize("stack", ["prod", "eks-prod", "eks-canary", "canary"])
def test_each_cloud_pool_records_exactly_what_it_sends(rendered, stack):
    # The tag the program writes must be what the rule computes from the same inputs, or every first
    # deployment would be reported as a replacement.
    pools = [r for r in resources(rendered[stack]) if r.type in (facts.AKS_POOL, facts.EKS_NODE_GROUP)]
    assert pools
    for res in pools:
        assert list(transition_rules.cloud_pool_not_replaced(res)) == []
    assert set(rendered[stack].outputs["cloudPools"]) == {r.name for r in pools}


def test_a_pool_without_its_record_is_advice(rendered):
    agent = of_type(resources(rendered["prod"]), facts.AKS_POOL)[0]
    bare = Resource(agent.type, agent.name, {**agent.props, "tags": {}})
    (finding,) = transition_rules.cloud_pool_not_replaced(bare)
    assert finding.advisory and "deployed-with" in finding.message


def test_every_changed_replace_only_field_is_named(rendered):
    group = of_type(resources(rendered["eks-prod"]), facts.EKS_NODE_GROUP)[0]
    moved = Resource(group.type, group.name, {
        **group.props, "capacityType": "SPOT", "subnetIds": ["subnet-0ffffffffffffffff"], "diskSize": 500,
    })
    (finding,) = transition_rules.cloud_pool_not_replaced(moved)
    assert not finding.advisory
    for text in ("capacityType ON_DEMAND -> SPOT", "diskSize 200 -> 500", "subnetIds ", "add a new generation"):
        assert text in finding.message


def _identity(items, **annotations):
    (record,) = [r for r in items if r.type == facts.CONFIG_MAP and r.props["metadata"]["labels"].get("gpu-driver-upgrade.io/record") == "cluster-identity"]
    meta = record.props["metadata"]
    edited = Resource(record.type, record.name, {**record.props, "metadata": {**meta, "annotations": {**meta["annotations"], **annotations}}})
    return [edited if r is record else r for r in items]


def test_per_pool_mode_alone_or_an_upgrade_alone_passes(rendered):
    items = resources(rendered["prod"])  # patch mode, already per-pool
    assert list(transition_rules.per_pool_mode_own_change(items)) == []
    upgrade_only = _identity(items, **{"gpu-driver-upgrade.io/previous-operator-version": "v26.3.3"})
    assert list(transition_rules.per_pool_mode_own_change(upgrade_only)) == []
    mode_only = _identity(items, **{"gpu-driver-upgrade.io/previous-per-pool-drivers": "false"})
    assert list(transition_rules.per_pool_mode_own_change(mode_only)) == []


def test_per_pool_mode_with_a_declared_upgrade_in_patch_mode_is_advice(rendered):
    both = _identity(resources(rendered["prod"]), **{
        "gpu-driver-upgrade.io/previous-operator-version": "v26.3.3",
        "gpu-driver-upgrade.io/previous-per-pool-drivers": "false",
    })
    (finding,) = transition_rules.per_pool_mode_own_change(both)
    assert finding.advisory and "v26.3.3 to v26.7.0" in finding.message


def test_a_stack_that_does_not_own_the_driver_mode_is_not_checked(rendered):
    both = _identity(resources(rendered["canary"]), **{
        "gpu-driver-upgrade.io/previous-operator-version": "v26.3.3",
        "gpu-driver-upgrade.io/previous-per-pool-drivers": "false",
    })
    assert list(transition_rules.per_pool_mode_own_change(both)) == []


def test_a_capacity_block_generation_at_zero_may_change_its_release(rendered):
    groups = {g.name: g for g in of_type(resources(rendered["eks-prod"]), facts.EKS_NODE_GROUP)}
    block = groups["gpu-h100-g1"]
    newer = {**block.props, "releaseVersion": "1.33.5-20251120"}
    (finding,) = transition_rules.capacity_block_updated_empty(Resource(block.type, block.name, newer))
    assert "desired size 3" in finding.message and "one at a time" in finding.message
    emptied = {**newer, "scalingConfig": {**block.props["scalingConfig"], "desiredSize": 0}}
    assert list(transition_rules.capacity_block_updated_empty(Resource(block.type, block.name, emptied))) == []
    # On-demand node groups roll their nodes with surge: an in-place release change is theirs to make.
    on_demand = groups["gpu-l40s-g2"]
    moved = Resource(on_demand.type, on_demand.name, {**on_demand.props, "releaseVersion": "1.33.5-20251201"})
    assert list(transition_rules.capacity_block_updated_empty(moved)) == []
    assert list(transition_rules.cloud_pool_not_replaced(moved)) == []


# ---------------------------------------------------------------- a rollback is never blocked by what the fleet ran


def _rolled_back_prod() -> dict[str, str]:
    """Prod going back to 570.195.03 (version and previousVersion swapped, as a rollback sets them)."""
    return change(stack_config("prod"), "driver", lambda d: d.update(version="570.195.03", previousVersion="580.173.02"))


def test_a_rollback_to_a_driver_the_fleet_ran_gives_advice_not_a_violation(rendered):
    rollback = _rolled_back_prod()
    # Without the last deployment the gate does not know the fleet ran 570.195.03: mandatory.
    blind = resources(run_program(rollback, "prod"))
    assert [f for f in compat_rules.operator_supports_driver(blind) if not f.advisory]
    # With it (the engine reads it through the stack's own outputs), the same change is advice that says so.
    informed = resources(run_program(rollback, "prod", previous_outputs=rendered["prod"].outputs))
    findings = list(compat_rules.operator_supports_driver(informed))
    assert findings and all(f.advisory for f in findings)
    assert any("570.195.03" in f.message and "rollback" in f.message for f in findings)


def test_a_new_driver_the_fleet_never_ran_is_still_refused(rendered):
    ahead = change(stack_config("prod"), "driver", lambda d: d.update(version="590.48.01"))
    items = resources(run_program(ahead, "prod", previous_outputs=rendered["prod"].outputs))
    assert [f for f in compat_rules.operator_supports_driver(items) if not f.advisory]


def test_gpu_support_and_cuda_rules_also_let_a_rollback_through(rendered):
    # A CUDA 12.9 model on the released T4 pool runs on 580 but not on 570.195.03: going back is still not
    # blocked by what ran.
    def newer_cuda(models: list[dict]) -> None:
        next(m for m in models if m["nodePools"] == ["gput4"])["cudaVersion"] = "12.9"

    rollback = change(_rolled_back_prod(), "models", newer_cuda)
    informed = resources(run_program(rollback, "prod", previous_outputs=rendered["prod"].outputs))
    cuda = list(compat_rules.cuda_driver_compatible(informed))
    assert cuda and all(f.advisory for f in cuda), cuda
    blind = resources(run_program(rollback, "prod"))
    assert [f for f in compat_rules.cuda_driver_compatible(blind) if not f.advisory]
