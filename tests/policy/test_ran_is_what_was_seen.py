"""Issue 30: "ran" is what the gate admitted, never a config field.

A first deployment's ``previousVersion`` used to make a driver "ran": a new prod stack whose held pools were pinned
to 595.91.07, which no canary ran or attested, planned clean, recorded ``driversRun: {gpua100: [595.91.07]}``, and the
next change, ``driver.version: 595.91.07`` with gpua100 released, was advice only ("ran 595.91.07 before").
Each step is tried here on the example prod stack (AKS; gput4 released to the attested 580.173.02, gpua100 and
gpuh100 held), through the policy on the rendered resources and through `gpu-rollout plan`'s exit code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from engine_contracts import resource_facts as rf
from fleetspec.load import SpecError, spec_from_config
from policy.evaluate import Violation, evaluate, from_registered, load_config
from preview.run import run_program
from rollout.cli import app
from tests.conftest import PROD_GATE, PROJECT_DIR, as_planned, change, stack_config

UNATTESTED = "595.91.07"  # no canary ran or attested it (attestations/canary/ holds 580.173.02 only)
runner = CliRunner()


def pinned_to(config: dict[str, str], driver: str, declared: str | None) -> dict[str, str]:
    """The example prod stack with its held pools pinned to ``driver``, declaring ``declared`` as what runs today
    (None: no promotion.runningToday)."""
    config = change(config, "driver", lambda d: d.update(previousVersion=driver))

    def declare(promotion: dict[str, Any]) -> None:
        promotion.pop("runningToday", None)
        if declared is not None:
            promotion["runningToday"] = {"driver": declared, "reason": "read from the nodes (CHG-1)"}

    return change(config, "promotion", declare)


def released_a100(config: dict[str, str]) -> dict[str, str]:
    """``driver.version: 595.91.07`` and gpua100 released: the issue's second step."""
    config = change(config, "driver", lambda d: d.update(version=UNATTESTED))
    return change(config, "nodePools", lambda pools: [p["rollout"].update(released=True) for p in pools
                                                      if p["name"] == "gpua100"])


@pytest.fixture(scope="module")
def canary_outputs() -> dict[str, Any]:
    return as_planned("canary").outputs


def judged(config: dict[str, str], canary: dict[str, Any], previous: dict[str, Any] | None = None
           ) -> tuple[list[Violation], dict[str, Any]]:
    run = run_program(config, "prod", PROJECT_DIR / "__main__.py", previous, {"canary": canary})
    gate = [v for v in evaluate(from_registered(run.resources), load_config("prod")) if v.policy == PROD_GATE]
    return gate, run.outputs


def refused(violations: list[Violation]) -> list[str]:
    return [v.message for v in violations if v.enforcement.value == "mandatory"]


def test_a_first_deployment_s_pin_is_a_promotion(canary_outputs: dict[str, Any]) -> None:
    """No last deployment, no declaration: the held pools' pin needs an attestation like any new driver."""
    gate, outputs = judged(pinned_to(stack_config("prod"), UNATTESTED, None), canary_outputs)
    assert any(m.startswith(f"driver {UNATTESTED} (pools gpua100, gpuh100; ampere, hopper): no attestation "
                            f"attestations/canary/{UNATTESTED}.json") for m in refused(gate))
    # And the pin is recorded as run by no pool, whatever the gate said.
    assert outputs[rf.TIMELINE]["driversRun"] == {"gpua100": [], "gpuh100": [], "gput4": ["580.173.02"]}


def test_a_declaration_of_another_driver_does_not_admit_the_pin(canary_outputs: dict[str, Any]) -> None:
    gate, _ = judged(pinned_to(stack_config("prod"), UNATTESTED, "570.195.03"), canary_outputs)
    assert any(m.startswith(f"driver {UNATTESTED} (pools gpua100, gpuh100") for m in refused(gate))


def test_running_today_admits_the_pin_as_advice_naming_it(canary_outputs: dict[str, Any]) -> None:
    gate, outputs = judged(pinned_to(stack_config("prod"), UNATTESTED, UNATTESTED), canary_outputs)
    assert refused(gate) == []
    (declared,) = [v.message for v in gate if "promotion.runningToday" in v.message]
    assert declared.startswith(f"driver {UNATTESTED} (pools gpua100, gpuh100): admitted without an attestation by "
                               f"promotion.runningToday, which declares the fleet runs {UNATTESTED} today (read from "
                               "the nodes (CHG-1))")
    # A declaration is no run: the held pools' record stays empty.
    assert outputs[rf.TIMELINE]["driversRun"]["gpua100"] == []


def test_releasing_a_pool_onto_the_declared_driver_still_needs_an_attestation(canary_outputs: dict[str, Any]) -> None:
    """The issue's second step, after a first deployment the declaration admitted: refused, not "ran before"."""
    first = pinned_to(stack_config("prod"), UNATTESTED, UNATTESTED)
    _, deployed = judged(first, canary_outputs)
    gate, _ = judged(released_a100(first), canary_outputs, deployed)
    messages = refused(gate)
    # gput4 was released to the attested 580.173.02 on the first deployment, never held on the declared driver:
    # moving it there is a promotion too. Only the still-held gpuh100 is admitted on the declaration.
    assert any(m.startswith(f"driver {UNATTESTED} (pools gpua100, gput4; ampere, turing): no attestation")
               for m in messages), messages
    assert not any("ran 595.91.07 before" in v.message for v in gate)
    (held,) = [v.message for v in gate if "promotion.runningToday" in v.message]
    assert held.startswith(f"driver {UNATTESTED} (pools gpuh100): admitted without an attestation")


def test_a_declaration_admits_going_back_only_for_a_pool_held_on_it(canary_outputs: dict[str, Any]) -> None:
    """Declaring a driver and releasing every pool elsewhere must not make the declared driver a free rollback:
    the way back is admitted only for a pool a deployment held on the declared driver (timeline heldOnDeclared)
    before one moved it away through the gate."""
    everything_held = change(stack_config("prod"), "nodePools", lambda pools: [p["rollout"].update(released=False)
                                                                                for p in pools])
    _, held = judged(everything_held, canary_outputs)
    assert held[rf.TIMELINE][rf.HELD_ON_DECLARED] == {p: "570.195.03" for p in ("gpua100", "gpuh100", "gput4")}
    assert held[rf.TIMELINE]["driversRun"] == {"gpua100": [], "gpuh100": [], "gput4": []}
    _, released = judged(stack_config("prod"), canary_outputs, held)  # gput4 moves to 580.173.02
    back = change(stack_config("prod"), "driver", lambda d: d.update(version="570.195.03"))
    gate, _ = judged(back, canary_outputs, released)
    assert refused(gate) == []
    assert any(v.message.startswith("driver 570.195.03 (pools gpua100, gpuh100, gput4): admitted without")
               for v in gate)
    # The same way back from a first deployment that released gput4 at once: gput4 was never held on 570.195.03.
    _, at_once = judged(stack_config("prod"), canary_outputs)
    assert "gput4" not in at_once[rf.TIMELINE][rf.HELD_ON_DECLARED]
    gate, _ = judged(back, canary_outputs, at_once)
    assert any(m.startswith("driver 570.195.03 (pools gput4; turing)") for m in refused(gate)), refused(gate)


def test_deleting_and_recreating_the_stack_changes_nothing(canary_outputs: dict[str, Any]) -> None:
    """A recreated stack is a first deployment again: no record, the same judgement."""
    once, _ = judged(pinned_to(stack_config("prod"), UNATTESTED, None), canary_outputs)
    again, _ = judged(pinned_to(stack_config("prod"), UNATTESTED, None), canary_outputs, {})
    assert refused(once) == refused(again) != []


def test_a_last_deployment_whose_held_pool_summary_names_a_driver_did_not_run_it(
        canary_outputs: dict[str, Any]) -> None:
    """The held pools' summaries state their pin (595.91.07): still no run of it."""
    first = pinned_to(stack_config("prod"), UNATTESTED, UNATTESTED)
    _, deployed = judged(first, canary_outputs)
    assert deployed[rf.POOLS]["gpua100"]["driverVersion"] == UNATTESTED
    assert UNATTESTED not in rf.read_previous_deployment(deployed).drivers_ran


@pytest.mark.parametrize(("driver", "why"), [
    ("570", "is a branch, not a release"),
])
def test_a_bad_declaration_names_its_key(driver: str, why: str) -> None:
    config = change(stack_config("prod"), "promotion", lambda p: p.update(
        runningToday={"driver": driver, "reason": "checked"}))
    with pytest.raises(SpecError) as caught:
        spec_from_config(config)
    assert "promotion.runningToday.driver" in str(caught.value) and why in str(caught.value)


def test_a_declaration_needs_its_reason_and_a_prod_stack() -> None:
    blank = change(stack_config("prod"), "promotion", lambda p: p.update(
        runningToday={"driver": "570.195.03", "reason": "  "}))
    with pytest.raises(SpecError, match=r"promotion\.runningToday\.reason"):
        spec_from_config(blank)
    missing = change(stack_config("prod"), "promotion", lambda p: p.update(runningToday={"driver": "570.195.03"}))
    with pytest.raises(SpecError, match=r"promotion\.runningToday\.reason"):
        spec_from_config(missing)
    canary = change(stack_config("canary"), "driver", lambda d: d)
    canary["gpu-driver-upgrade:promotion"] = json.dumps({"canaryStack": "prod", "runningToday": {
        "driver": "570.195.03", "reason": "checked"}})
    with pytest.raises(SpecError, match=r"promotion\.runningToday"):
        spec_from_config(canary)


# ---------------------------------------------------------------- the same through `gpu-rollout plan`


def write_stack(folder: Path, config: dict[str, str]) -> Path:
    """Pulumi.prod.yaml holding ``config``, beside the example canary stack it is promoted from."""
    values = {key: json.loads(raw) if raw[:1] in "{[" else raw for key, raw in config.items()}
    path = folder / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": values}, sort_keys=False))
    (folder / "Pulumi.canary.yaml").write_text((PROJECT_DIR / "Pulumi.canary.yaml").read_text())
    return path


def plan(path: Path, previous: Path | None = None) -> tuple[int, dict[str, Any]]:
    args = ["plan", "--stack-file", str(path), "--json"] + (["--previous-outputs", str(previous)] if previous else [])
    result = runner.invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def test_plan_exit_codes_of_the_sequence(tmp_path: Path) -> None:
    undeclared = pinned_to(stack_config("prod"), UNATTESTED, None)
    code, document = plan(write_stack(tmp_path, undeclared))
    assert code == 1
    assert any(v["policy"] == PROD_GATE and v["enforcement"] == "mandatory" and UNATTESTED in v["message"]
               for v in document["violations"])
    declared = pinned_to(stack_config("prod"), UNATTESTED, UNATTESTED)
    code, document = plan(write_stack(tmp_path, declared))
    assert code == 0, [v["message"] for v in document["violations"] if v["enforcement"] == "mandatory"]
    deployed = tmp_path / "outputs.json"
    deployed.write_text(json.dumps(document["outputs"]))
    assert document["outputs"][rf.TIMELINE]["driversRun"]["gpua100"] == []
    code, document = plan(write_stack(tmp_path, released_a100(declared)), deployed)
    assert code == 1
    assert any(v["policy"] == PROD_GATE and v["enforcement"] == "mandatory" and "gpua100" in v["message"]
               for v in document["violations"])
