"""The plan benchmark's generated fleets are valid stacks that plan clean (it prints figures; timings are
never asserted)."""

from __future__ import annotations

from benchmarks.plan_scale import fleet_stack, promoted_stack
from policy.evaluate import evaluate, from_registered, load_config, mandatory
from preview.run import run_program
from fleetspec.load import config_strings, spec_from_config
from tests.conftest import past_the_gate


def test_generated_fleets_plan_clean_and_grow_with_the_pool_count() -> None:
    small, larger = (run_program(config_strings(fleet_stack(n)), "prod") for n in (3, 9))
    for run in (small, larger):
        # The generated fleets name no canary and ship no attestation: only the prod gate refuses them.
        assert past_the_gate(mandatory(evaluate(from_registered(run.resources), load_config("prod")))) == []
    assert len(larger.outputs["pools"]) == 9 and len(small.outputs["pools"]) == 3
    assert len(larger.custom_resources) > len(small.custom_resources)


def test_promoted_fleets_are_valid_stacks_promoted_from_the_canary_example() -> None:
    spec = spec_from_config(config_strings(promoted_stack(4)), source="benchmark")
    assert spec.promotion is not None and spec.promotion.canaryStack == "canary"
    assert sorted(spec.promotion.waivers) == sorted(p.name for p in spec.nodePools) == ["gpup0", "gpup1", "gpup2", "gpup3"]
