"""policy.compat_rules called directly on rendered resources: ownership, compatibility, a rollback."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy import compat_rules
from policy.facts import Resource
from preview.run import run_program
from gpu_knowledge import labels
from engine_contracts import resource_facts as rf
from tests.conftest import eks_operator_owned, stack_config
from tests.policy.rules import of_type, resources, spec_edit, stack
from tests.policy.variants import change, pool


def test_a_second_nvidiadriver_over_the_same_pool_is_reported(rendered):
    items = resources(rendered["prod"])
    original = of_type(items, rf.NVIDIA_DRIVER)[0]
    catch_all = Resource(
        original.type, "gpu-everything", {**original.props, "spec": {**original.props["spec"], "nodeSelector": {}}}
    )
    assert list(compat_rules.nvidiadriver_selectors_disjoint(stack(items))) == []
    findings = list(compat_rules.nvidiadriver_selectors_disjoint(stack([*items, catch_all])))
    assert len(findings) == 3  # overlaps each of the three pool drivers
    assert all("gpu-everything" in f.message for f in findings)


def test_an_aks_pool_with_its_own_driver_under_the_operator_is_reported(rendered):
    items = resources(rendered["prod"])
    agent = of_type(items, rf.AKS_POOL)[0]
    installed = Resource(agent.type, agent.name, {**agent.props, "gpuProfile": {"driver": "Install"}})
    swapped = [installed if r is agent else r for r in items]
    (finding,) = compat_rules.single_driver_owner(stack(swapped))
    assert "gpuProfile.driver 'Install'" in finding.message and finding.resource is installed


def test_an_nvidia_ami_node_group_under_the_operator_is_reported():
    items = resources(run_program(eks_operator_owned(), "eks-prod"))
    assert list(compat_rules.single_driver_owner(stack(items))) == []
    group = of_type(items, rf.EKS_NODE_GROUP)[0]
    nvidia = Resource(group.type, group.name, {**group.props, "amiType": "AL2023_x86_64_NVIDIA"})
    (finding,) = compat_rules.single_driver_owner(stack([nvidia if r is group else r for r in items]))
    assert "amiType AL2023_x86_64_NVIDIA" in finding.message and finding.resource is nvidia


def test_forward_compat_bridges_a_newer_cuda_on_an_ltsb_branch():
    def edit(models):
        models[0].update(cudaVersion="13.1", cudaForwardCompat=True)

    run = run_program(change(stack_config("canary"), "models", edit), "canary")
    assert list(compat_rules.cuda_driver_compatible(stack(resources(run)))) == []


def unlisted_release_canary() -> list:
    """The canary on 580.105.08: a real R580 release that operator v26.7.0 does not list (it lists 580.173.02)."""
    config = change(stack_config("canary"), "driver", lambda d: d.update(version="580.105.08"))
    return resources(run_program(config, "canary"))


def test_branch_only_operator_support_is_advice(rendered):
    listed = next(d for d in of_type(resources(rendered["canary"]), rf.NVIDIA_DRIVER) if d.name == "gpu-gpucanary")
    assert list(compat_rules.operator_supports_driver(stack([listed]))) == []
    driver = next(d for d in of_type(unlisted_release_canary(), rf.NVIDIA_DRIVER) if d.name == "gpu-gpucanary")
    (finding,) = compat_rules.operator_supports_driver(stack([driver]))
    assert finding.advisory and "580.105.08" in finding.message and "580.173.02" in finding.message


def test_unknown_gpu_product_is_reported_as_advice_never_passed():
    config = change(stack_config("prod"), "nodePools", pool("gput4", gpuProduct="NVIDIA-Mystery-9000"))
    findings = list(compat_rules.gpu_supported_by_driver(stack(resources(run_program(config, "prod")))))
    assert findings and all(f.advisory for f in findings)
    assert "NVIDIA-Mystery-9000" in findings[0].message


# ---------------------------------------------------------------- cuda-driver-compatible: forward compat


def _canary_model(**changes) -> list[Resource]:
    return resources(run_program(change(stack_config("canary"), "models", lambda m: m[0].update(changes)), "canary"))


def test_forward_compat_package_older_than_the_driver_is_a_violation():
    (finding,) = compat_rules.cuda_driver_compatible(stack(_canary_model(cudaVersion="12.9", cudaForwardCompat=True)))
    assert not finding.advisory
    assert "remove cuda-compat" in finding.message and "cudaForwardCompat: false" in finding.message
    # Without the package the same CUDA runs natively on 580.173.02.
    assert list(compat_rules.cuda_driver_compatible(stack(_canary_model(cudaVersion="12.9")))) == []


def test_forward_compat_on_an_unreadable_cuda_is_advice():
    items = _canary_model(cudaForwardCompat=True)
    (pdb,) = of_type(items, rf.PDB)
    notes = {**pdb.props["metadata"]["annotations"], labels.ANNOTATION_CUDA: "12.x"}
    odd = replace(pdb, props={**pdb.props, "metadata": {**pdb.props["metadata"], "annotations": notes}})
    (finding,) = compat_rules.cuda_driver_compatible(stack([odd if r is pdb else r for r in items]))
    assert finding.advisory and "12.x" in finding.message


# ---------------------------------------------------------------- gpu-supported-by-driver


def test_gpu_support_without_a_visible_driver_is_advice(rendered):
    items = [r for r in resources(rendered["canary"]) if r.type != rf.NVIDIA_DRIVER]
    findings = list(compat_rules.gpu_supported_by_driver(stack(items)))
    assert len(findings) == 3  # one per canary pool
    assert all(f.advisory and "no driver version is visible" in f.message for f in findings)


# ---------------------------------------------------------------- driver-version-pinned (hand-edited props)


def _pinned(res: Resource) -> list:
    return list(compat_rules.driver_version_pinned(res))


@pytest.mark.parametrize("kind", ["nvidiadriver", "clusterpolicy", "helm"])
def test_driver_version_missing_or_a_bare_branch_is_mandatory_and_precompiled_branch_is_advice(
    rendered, helm_release, kind
):
    items = resources(rendered["prod"])
    res, path = {
        "nvidiadriver": (of_type(items, rf.NVIDIA_DRIVER)[0], ("spec",)),
        "clusterpolicy": (of_type(items, rf.CLUSTER_POLICY_PATCH)[0], ("spec", "driver")),
        "helm": (helm_release, ("values", "driver")),
    }[kind]
    assert _pinned(res) == []
    (missing,) = _pinned(spec_edit(res, path, version=None))
    assert not missing.advisory and "must be set" in missing.message
    (branch,) = _pinned(spec_edit(res, path, version="580", usePrecompiled=False))
    assert not branch.advisory and "exact release" in branch.message
    (precompiled,) = _pinned(spec_edit(res, path, version="580", usePrecompiled=True))
    assert precompiled.advisory and "pins a branch" in precompiled.message
    (floating,) = _pinned(spec_edit(res, path, version="latest"))
    assert not floating.advisory


def test_an_nvidia_ami_node_group_without_release_version_is_mandatory(rendered):
    group = of_type(resources(rendered["eks-prod"]), rf.EKS_NODE_GROUP)[0]
    assert group.props["amiType"].endswith("_NVIDIA") and _pinned(group) == []
    unpinned = Resource(group.type, group.name, {k: v for k, v in group.props.items() if k != "releaseVersion"})
    (finding,) = _pinned(unpinned)
    assert not finding.advisory and "releaseVersion" in finding.message
    # A standard AMI carries no driver: its release need not be pinned for the driver's sake.
    plain = Resource(group.type, group.name, {**unpinned.props, "amiType": "AL2023_x86_64_STANDARD"})
    assert _pinned(plain) == []


# ---------------------------------------------------------------- a rollback is never blocked by what the fleet ran


def _rolled_back_prod() -> dict[str, str]:
    """Prod going back to 570.195.03 (version and previousVersion swapped, as a rollback sets them)."""
    return change(stack_config("prod"), "driver", lambda d: d.update(version="570.195.03", previousVersion="580.173.02"))


def test_a_rollback_to_a_driver_the_fleet_ran_gives_advice_not_a_violation(rendered):
    rollback = _rolled_back_prod()
    # Without the last deployment the gate does not know the fleet ran 570.195.03: mandatory.
    blind = resources(run_program(rollback, "prod"))
    assert [f for f in compat_rules.operator_supports_driver(stack(blind)) if not f.advisory]
    # With it (the engine reads it through the stack's own outputs), the same change is advice that says so.
    informed = resources(run_program(rollback, "prod", previous_outputs=rendered["prod"].outputs))
    findings = list(compat_rules.operator_supports_driver(stack(informed)))
    assert findings and all(f.advisory for f in findings)
    assert any("570.195.03" in f.message and "rollback" in f.message for f in findings)


def test_a_new_driver_the_fleet_never_ran_is_still_refused(rendered):
    ahead = change(stack_config("prod"), "driver", lambda d: d.update(version="590.48.01"))
    items = resources(run_program(ahead, "prod", previous_outputs=rendered["prod"].outputs))
    assert [f for f in compat_rules.operator_supports_driver(stack(items)) if not f.advisory]


def test_gpu_support_and_cuda_rules_also_let_a_rollback_through(rendered):
    # A CUDA 12.9 model on the released T4 pool runs on 580 but not on 570.195.03: going back is still not
    # blocked by what ran.
    def newer_cuda(models: list[dict]) -> None:
        next(m for m in models if m["nodePools"] == ["gput4"])["cudaVersion"] = "12.9"

    rollback = change(_rolled_back_prod(), "models", newer_cuda)
    informed = resources(run_program(rollback, "prod", previous_outputs=rendered["prod"].outputs))
    cuda = list(compat_rules.cuda_driver_compatible(stack(informed)))
    assert cuda and all(f.advisory for f in cuda), cuda
    blind = resources(run_program(rollback, "prod"))
    assert [f for f in compat_rules.cuda_driver_compatible(stack(blind)) if not f.advisory]
