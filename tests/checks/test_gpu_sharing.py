"""verify's gpu-count on sliced GPUs (issue 36, point 4): an upgraded node's advertised GPU resources (whole GPUs,
time-slicing replicas, MIG devices, the MIG layout mig-manager applied) against its pool's declaration and against
the pool's nodes not yet upgraded, every change named. Nodes as tests/fakekube/fixtures.py builds them (GFD's
labels, the device plugin's allocatable), judged by the check itself over the facts verify reads."""

from __future__ import annotations

import copy

import pytest

from checks.identity import ClusterIdentity, Verdict
from checks.objects import Obj
from checks.results import Status
from checks.validation import check_gpu_count
from checks.verify_facts import UpgradedNode, VerifyFacts, not_yet_upgraded
from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import FleetSpec, NodePool
from gpu_knowledge import labels
from tests.conftest import change, stack_config
from tests.fakekube.fixtures import driver_labels, gpu_node
from tests.fakekube.plugin import stack_spec

SPEC = stack_spec("prod")
TARGET = SPEC.driver.version
OLD = SPEC.driver.previousVersion or "570.195.03"


def _pool(name: str = "gpua100", **changes: object) -> NodePool:
    pool = next(p for p in SPEC.nodePools if p.name == name)
    return pool.model_copy(update=changes)


def _node(pool: NodePool, index: int, driver: str, *, node_labels: dict[str, str | None] | None = None,
          allocatable: dict[str, str | None] | None = None, state: str = labels.UPGRADE_DONE) -> Obj:
    node = copy.deepcopy(gpu_node(SPEC, pool, index))
    node["metadata"]["labels"].update(driver_labels(driver))
    node["metadata"]["labels"][labels.UPGRADE_STATE] = state
    for key, value in (node_labels or {}).items():
        if value is None:
            node["metadata"]["labels"].pop(key, None)
        else:
            node["metadata"]["labels"][key] = value
    for key, value in (allocatable or {}).items():
        if value is None:
            node["status"]["allocatable"].pop(key, None)
        else:
            node["status"]["allocatable"][key] = value
    return node


def _judge(pool: NodePool, upgraded: Obj, old: list[Obj]) -> tuple[Status, str]:
    spec: FleetSpec = SPEC.model_copy(update={"nodePools": [pool if p.name == pool.name else p
                                                            for p in SPEC.nodePools]})
    facts = VerifyFacts(spec, 0.0, ClusterIdentity(Verdict.CONFIRMED, "cluster", "record"),
                        [UpgradedNode(upgraded, pool, TARGET)], {}, {}, [], [], None)
    facts.old_nodes = {pool.name: old}
    (found,) = check_gpu_count(facts)
    return found.status, found.message


TIME_SLICED = {labels.GPU_REPLICAS: "4", labels.GPU_SHARING_STRATEGY: "time-slicing"}
MIG_1G = {labels.MIG_CONFIG: "all-1g.10gb", "nvidia.com/mig.config.state": "success"}
MIG_DEVICES = {labels.GPU_RESOURCE: "0", "nvidia.com/mig-1g.10gb": "7"}


def test_time_sliced_gpus_count_as_gpus_times_replicas() -> None:
    pool = _pool(gpuReplicas=4)
    peer = _node(pool, 1, OLD, node_labels=TIME_SLICED, allocatable={labels.GPU_RESOURCE: "4"})
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels=TIME_SLICED,
                                         allocatable={labels.GPU_RESOURCE: "4"}), [peer])
    assert status == Status.PASS, message
    assert "1 GPU(s) x 4 replicas (time-slicing)" in message and "as the pool's 1 node(s) not yet upgraded" in message


def test_time_slicing_lost_in_the_upgrade_is_named() -> None:
    """The device plugin's sharing config reset: against the declaration and the pool's other nodes."""
    pool = _pool(gpuReplicas=4)
    peer = _node(pool, 1, OLD, node_labels=TIME_SLICED, allocatable={labels.GPU_RESOURCE: "4"})
    status, message = _judge(pool, _node(pool, 0, TARGET), [peer])
    assert status == Status.FAIL
    assert f"{labels.GPU_REPLICAS} is 1, pool gpua100 declares gpuReplicas 4" in message
    assert "allocatable nvidia.com/gpu is 1, pool gpua100 declares 1 x 4 replicas (gpuReplicas) = 4" in message
    assert "changed from the pool's 1 node(s) not yet upgraded" in message
    assert f"{labels.GPU_RESOURCE} 4 -> 1" in message and f"{labels.GPU_REPLICAS} 4 -> 1" in message
    assert f"{labels.GPU_SHARING_STRATEGY} time-slicing -> none" in message


def test_time_slicing_lost_on_every_node_is_seen_by_the_declaration_alone() -> None:
    """The whole pool upgraded (a canary pool): no node is left to compare with, the declaration still holds."""
    pool = _pool(gpuReplicas=4)
    status, message = _judge(pool, _node(pool, 0, TARGET), [])
    assert status == Status.FAIL and f"{labels.GPU_REPLICAS} is 1, pool gpua100 declares gpuReplicas 4" in message


def test_time_slicing_the_pool_does_not_declare_fails() -> None:
    pool = _pool()
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels=TIME_SLICED,
                                         allocatable={labels.GPU_RESOURCE: "4"}), [])
    assert status == Status.FAIL and f"{labels.GPU_REPLICAS} is 4, pool gpua100 declares gpuReplicas 1" in message


def test_fewer_time_sliced_gpus_than_declared_fail_with_the_arithmetic() -> None:
    pool = _pool(gpuReplicas=4)
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels=TIME_SLICED,
                                         allocatable={labels.GPU_RESOURCE: "2"}), [])
    assert status == Status.FAIL
    assert "allocatable nvidia.com/gpu is 2, pool gpua100 declares 1 x 4 replicas (gpuReplicas) = 4" in message


def test_a_pool_replicas_below_one_is_refused_at_its_key() -> None:
    config = change(stack_config("prod"), "nodePools", lambda pools: pools[0].update(gpuReplicas=0))
    with pytest.raises(SpecError) as error:
        spec_from_config(config)
    assert "nodePools[0].gpuReplicas" in str(error.value)


def test_a_mig_pool_passes_with_its_layout_applied() -> None:
    pool = _pool(migConfig="all-1g.10gb")
    peer = _node(pool, 1, OLD, node_labels=MIG_1G, allocatable=MIG_DEVICES)
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels=MIG_1G, allocatable=MIG_DEVICES), [peer])
    assert status == Status.PASS, message
    assert "MIG layout all-1g.10gb applied (nvidia.com/mig-1g.10gb=7)" in message


def test_a_mig_layout_not_applied_fails_on_its_state() -> None:
    pool = _pool(migConfig="all-1g.10gb")
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels={**MIG_1G, "nvidia.com/mig.config.state": "failed"},
                                         allocatable=MIG_DEVICES), [])
    assert status == Status.FAIL
    assert "nvidia.com/mig.config.state is failed, not success: mig-manager has not applied the layout" in message


def test_mig_devices_lost_in_the_upgrade_are_named() -> None:
    """The node came back on whole GPUs: against the declaration and the pool's other nodes, every change named."""
    pool = _pool(migConfig="all-1g.10gb")
    peer = _node(pool, 1, OLD, node_labels=MIG_1G, allocatable=MIG_DEVICES)
    status, message = _judge(pool, _node(pool, 0, TARGET), [peer])
    assert status == Status.FAIL
    assert f"{labels.MIG_CONFIG} is all-disabled, pool gpua100 declares migConfig all-1g.10gb" in message
    assert "nvidia.com/mig-1g.10gb 7 -> None" in message and f"{labels.MIG_CONFIG} all-1g.10gb -> all-disabled" in message


def test_mig_on_a_pool_of_whole_gpus_fails() -> None:
    pool = _pool()
    status, message = _judge(pool, _node(pool, 0, TARGET, node_labels=MIG_1G, allocatable=MIG_DEVICES), [])
    assert status == Status.FAIL and "runs MIG (nvidia.com/mig-1g.10gb=7) where pool gpua100 declares whole GPUs" in message


def test_a_peer_the_upgrade_is_working_on_is_not_what_the_pool_advertised() -> None:
    """A node being drained advertises nothing for a while: that says nothing of the pool, so it is not compared."""
    pool = _pool()
    draining = _node(pool, 1, OLD, allocatable={labels.GPU_RESOURCE: "0"}, state="pod-deletion-required")
    status, message = _judge(pool, _node(pool, 0, TARGET), [draining])
    assert status == Status.PASS and "no node of the pool left on the old driver to compare with" in message


def test_the_nodes_not_yet_upgraded_are_those_off_the_target_in_the_pools_that_move() -> None:
    released, held = _pool("gput4"), _pool("gpua100")  # prod releases gput4 and holds gpua100
    old, new = _node(released, 1, OLD), _node(released, 0, TARGET)
    found = not_yet_upgraded(SPEC, [old, new, _node(held, 0, OLD)])
    assert {pool: [n["metadata"]["name"] for n in nodes] for pool, nodes in found.items()} == {
        "gput4": [old["metadata"]["name"]]}


def test_the_single_strategy_advertises_its_slices_as_gpus() -> None:
    pool = _pool(migConfig="all-1g.10gb")
    single = _node(pool, 0, TARGET, node_labels=MIG_1G, allocatable={labels.GPU_RESOURCE: "7"})
    status, message = _judge(pool, single, [_node(pool, 1, OLD, node_labels=MIG_1G, allocatable={labels.GPU_RESOURCE: "7"})])
    assert status == Status.PASS and "MIG layout all-1g.10gb applied (nvidia.com/gpu=7)" in message
    status, message = _judge(pool, single, [_node(pool, 1, OLD, node_labels=MIG_1G, allocatable={labels.GPU_RESOURCE: "14"})])
    assert status == Status.FAIL and f"{labels.GPU_RESOURCE} 14 -> 7" in message
