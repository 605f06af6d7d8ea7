"""A pool's own upgrade policy (`nodePools[].upgradePolicy`, issue 39): each key it gives takes the stack's key's
place for that pool's NVIDIADriver (operator v26.7.0 on, per-pool mode); refused, naming the key and the reason,
wherever one policy governs every node or none rolls the pool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.validation import node_affinity
from fleetspec.load import spec_from_config
from gpu_knowledge import labels
from renderers import manifests
from simulate.fleet import CLUSTER_POLICY, NVIDIA_DRIVER, Policy, spec_groups
from tests.conftest import aks_image_owned, change, edited
from tests.fleetspec.test_load import assert_problem

OWN = {"maxParallelUpgrades": 2, "maxUnavailable": 2, "podDeletion": {"timeoutSeconds": 1200}}


def _own(policy: dict[str, Any], pool: str = "gpua100") -> Any:
    def edit(pools: list[dict[str, Any]]) -> None:
        next(p for p in pools if p["name"] == pool)["upgradePolicy"] = policy
    return edit


def test_each_key_the_pool_gives_takes_the_stacks_place_and_the_rest_stay_the_stacks() -> None:
    spec = spec_from_config(edited("prod", "nodePools", _own(OWN)))
    stack = spec.gpuOperator.upgradePolicy
    a100 = spec.upgrade_policy(spec.pool("gpua100"))
    assert (a100.maxParallelUpgrades, a100.maxUnavailable) == (2, 2)
    assert a100.podDeletion.timeoutSeconds == 1200
    # A block is overlaid key by key: the keys of podDeletion the pool does not give are the stack's.
    assert a100.podDeletion.force is stack.podDeletion.force and a100.podDeletion.deleteEmptyDir is False
    assert a100.waitForCompletion == stack.waitForCompletion and a100.drain == stack.drain
    assert a100.autoUpgrade is stack.autoUpgrade
    # The other pools keep the stack's policy exactly.
    assert spec.upgrade_policy(spec.pool("gpuh100")) == stack


def test_the_pools_nvidia_driver_carries_its_own_policy() -> None:
    spec = spec_from_config(edited("prod", "nodePools", _own(OWN)))
    a100 = manifests.nvidia_driver_spec(spec, spec.pool("gpua100"))["upgradePolicy"]
    h100 = manifests.nvidia_driver_spec(spec, spec.pool("gpuh100"))["upgradePolicy"]
    assert (a100["maxParallelUpgrades"], a100["maxUnavailable"], a100["podDeletion"]["timeoutSeconds"]) == (2, 2, 1200)
    assert a100["waitForCompletion"] == h100["waitForCompletion"]  # sent in full: the CRD defaults autoUpgrade true
    assert h100 == spec.gpuOperator.upgradePolicy.as_crd()
    # The cluster-wide policy stays the stack's.
    assert manifests.cluster_policy_spec(spec)["driver"]["upgradePolicy"] == spec.gpuOperator.upgradePolicy.as_crd()


def test_the_simulator_rolls_each_pool_by_its_own_policy() -> None:
    spec = spec_from_config(edited("prod", "nodePools", _own(OWN)))
    groups = {g.pools: g for g in spec_groups(spec)}
    assert {g.kind for g in groups.values()} == {NVIDIA_DRIVER}
    assert groups[("gpua100",)].policy == Policy.from_spec(spec.upgrade_policy(spec.pool("gpua100")))
    assert (groups[("gpua100",)].policy.max_parallel, groups[("gpuh100",)].policy.max_parallel) == (2, 1)


def test_the_validation_job_waits_for_upgrade_done_only_where_the_pools_policy_rolls_it() -> None:
    spec = spec_from_config(edited("prod", "nodePools", _own({"autoUpgrade": False})))

    def waits_for_done(pool: str) -> bool:
        terms = node_affinity(spec, spec.pool(pool), "580.173.02")["requiredDuringSchedulingIgnoredDuringExecution"]
        return any(e["key"] == labels.UPGRADE_STATE for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"])

    assert not waits_for_done("gpua100") and waits_for_done("gpuh100")


@pytest.mark.parametrize(("config", "reason"), [
    (lambda: change(edited("prod", "gpuOperator", lambda o: o.update(useNvidiaDriverCrd=False)), "nodePools",
                    _own(OWN)),
     "ClusterPolicy mode): one ClusterPolicy's upgradePolicy governs every node"),
    (lambda: change(edited("prod", "gpuOperator", lambda o: o.update(chartVersion="v25.10.1")), "nodePools",
                    _own(OWN)),
     "v25.10.1 is before v26.7.0: an NVIDIADriver carries no upgradePolicy of its own"),
    (lambda: change(aks_image_owned(), "nodePools", _own(OWN, "gpuh100")),
     "the node image owns the driver (driver.owner: image)"),
], ids=["cluster-policy-mode", "operator-before-26.7", "image-owned"])
def test_a_pool_policy_where_it_cannot_apply_is_refused_naming_the_key_and_the_reason(config: Any,
                                                                                     reason: str) -> None:
    built = config()
    index = next(i for i, p in enumerate(json.loads(built["gpu-driver-upgrade:nodePools"]))
                 if "upgradePolicy" in p)
    assert_problem(built, f"gpu-driver-upgrade:nodePools[{index}].upgradePolicy", reason)


def test_a_pool_policy_key_is_checked_as_the_stacks_is() -> None:
    assert_problem(edited("prod", "nodePools", _own({"maxUnavailable": "120%"})),
                   "gpu-driver-upgrade:nodePools[1].upgradePolicy.maxUnavailable", "120%")
    assert_problem(edited("prod", "nodePools", _own({"podDeleton": {}})),
                   "gpu-driver-upgrade:nodePools[1].upgradePolicy.podDeleton", "unknown key")


def test_without_per_pool_policies_the_cluster_policy_rolls_every_pool() -> None:
    spec = spec_from_config(edited("prod", "gpuOperator", lambda o: o.update(useNvidiaDriverCrd=False)))
    assert not spec.per_pool_upgrade_policies
    assert [g.kind for g in spec_groups(spec)] == [CLUSTER_POLICY]
