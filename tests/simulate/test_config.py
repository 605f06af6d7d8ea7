"""The simulation block of a stack and the capacity arithmetic the simulator shares with the policy and preflight."""

from __future__ import annotations

import pytest

from simulate.fleet import CLUSTER_POLICY, NVIDIA_DRIVER, NotSimulated, fleet_from_spec
from gpu_knowledge import capacity
from fleetspec.load import SpecError, spec_from_config
from tests.conftest import change, edited, stack_config


def test_a_stack_without_the_block_takes_the_documented_defaults() -> None:
    spec = spec_from_config(stack_config("prod"))
    assert spec.simulation.driverInstallSeconds == 420 and spec.simulation.validatorSeconds == 150
    assert spec.simulation.load_seconds(cached=True) == 180 and spec.simulation.load_seconds(cached=False) == 1500
    assert spec.simulation.load_seconds(cached=False, declared=42) == 42


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("jitter", 1.5, "less than 1"),
    ("driverInstallSeconds", 0, "greater than 0"),
    ("waveGapSeconds", -1, "greater than or equal to 0"),
    ("driverFailureRate", 2, "less than or equal to 1"),
])
def test_a_bad_duration_names_its_key(key: str, value: object, reason: str) -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrade:simulation"] = f'{{"{key}": {value}}}'
    with pytest.raises(SpecError) as error:
        spec_from_config(config)
    assert f"gpu-driver-upgrade:simulation.{key}" in str(error.value) and reason in str(error.value)


def test_a_model_declares_its_cache_and_load_time() -> None:
    def declare(models: list[dict]) -> None:
        models[0].update(weightsCached=True, loadSeconds=90)
        models[1].pop("loadSeconds", None)
        models[1]["weightsCached"] = False  # an uncached model without loadSeconds gets the download default

    fleet = fleet_from_spec(spec_from_config(edited("prod", "models", declare)))
    assert fleet.models[0].load_seconds == 90 and fleet.models[1].load_seconds == 1500
    bad = edited("prod", "models", lambda models: models[0].update(loadSeconds=0))
    with pytest.raises(SpecError, match=r"models\[0\]\.loadSeconds"):
        spec_from_config(bad)


def test_policies_per_nvidiadriver_from_v26_7_else_the_clusterpolicy() -> None:
    per_pool = fleet_from_spec(spec_from_config(stack_config("prod")))
    assert [(g.kind, g.name, g.pools) for g in per_pool.groups][0] == (NVIDIA_DRIVER, "gpu-gput4", ("gput4",))
    one = spec_from_config(change(stack_config("prod"), "gpuOperator", lambda op: op.update(useNvidiaDriverCrd=False)))
    (group,) = fleet_from_spec(one).groups
    assert group.kind == CLUSTER_POLICY and set(group.pools) == {p.name for p in one.nodePools}


def test_an_image_owned_stack_is_refused_with_the_reason() -> None:
    with pytest.raises(NotSimulated, match="node image owns the driver"):
        fleet_from_spec(spec_from_config(stack_config("eks-prod")))


def test_nodes_out_within_budgets() -> None:
    pool = capacity.PoolShape("a", 10, 8)
    # 40 replicas x 1 GPU keeping 36 need 5 nodes: 5 may be out; 1 node down already leaves 4.
    kept = [capacity.Workload("m", 40, 1, 36)]
    assert capacity.nodes_out_within_budgets(pool, kept) == 5
    assert capacity.nodes_out_within_budgets(pool, kept, unavailable=1) == 4
    assert capacity.nodes_out_within_budgets(pool, [capacity.Workload("m", 90, 1, 90)]) == 0


def test_the_validation_job_holds_every_gpu_of_its_node() -> None:
    assert capacity.validation_gpus(8) == 8
    with pytest.raises(ValueError, match="positive"):
        capacity.validation_gpus(0)
