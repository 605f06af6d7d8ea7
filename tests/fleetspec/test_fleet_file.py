"""The fleet file (fleetspec/fleet_file.py): the shipped Fleet.yaml orders every example stack; a bad file names each key path
and the reason, as a bad stack file does; what only the stack files can tell is checked against them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from promotion_train.stacks import stack_files
from fleetspec.base import Stage
from fleetspec.fleet_file import (FLEET_FILE, HALT_SIGNS, DeclaredStack, FleetFile, check_stacks, fleet_from_document,
                        read_fleet_file)
from fleetspec.load import SpecError
from vocabulary.triggers import TriggerKind
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR

DECLARED = {s.name: DeclaredStack(s.stage, s.canary, s.problem) for s in stack_files(PROJECT_DIR)}


def shipped() -> dict[str, Any]:
    return yaml.safe_load((PROJECT_DIR / FLEET_FILE).read_text())


def problems(document: Any, declared: dict[str, DeclaredStack] | None = None) -> list[str]:
    def load() -> None:
        fleet_from_document(document, declared=DECLARED if declared is None else declared)

    with pytest.raises(SpecError) as caught:
        load()
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_the_shipped_fleet_orders_every_example_stack_canaries_first() -> None:
    fleet = read_fleet_file(PROJECT_DIR / FLEET_FILE)
    check_stacks(fleet, DECLARED)
    assert sorted(fleet.stacks) == sorted(EXAMPLE_STACKS)
    assert {DECLARED[s].stage for s in fleet.waves[0].stacks} == {Stage.CANARY}
    assert fleet.waves[0].waitFor.attestation
    assert fleet.lease_stack == "existing-canary"
    assert fleet.haltOn == list(HALT_SIGNS)


def test_defaults_one_at_a_time_smoke_verify_no_limits_every_sign_halts() -> None:
    fleet = fleet_from_document({"waves": [{"name": "canary", "stacks": ["canary"]}]})
    wave = fleet.waves[0]
    assert (wave.maxConcurrent, wave.waitFor.verify, wave.waitFor.attestation, wave.waitFor.soakHours) == \
        (1, "smoke", False, 0)
    assert fleet.limits.maxGpusUnavailable is None and fleet.limits.maxClustersInFlight is None
    assert fleet.lease_stack == "canary" and fleet.lease.durationSeconds == 900
    assert all(fleet.halts(sign) for sign in HALT_SIGNS)
    assert fleet.haltOn == list(HALT_SIGNS) == [kind for kind in TriggerKind if kind != TriggerKind.OUTSIDE_WINDOW]
    # The default as before haltOn could name slo-breach and not-ready: every bad sign, in this order.
    assert fleet.haltOn == ["upgrade-failed", "validation-failed", "validation-missing", "below-min-available",
                            "stuck", "verify-failed", "slo-breach", "slo-no-data", "not-ready"]
    assert not fleet.halts("outside-window")  # pauses its own stack, as watch does
    assert fleet.halts("xid-79")  # a sign this file cannot name halts: unknown is never safe


def test_a_sign_left_out_of_halt_on_does_not_halt() -> None:
    fleet = fleet_from_document({"waves": [{"name": "canary", "stacks": ["canary"]}], "haltOn": ["upgrade-failed"]})
    assert fleet.halts("upgrade-failed") and not fleet.halts("stuck") and not fleet.halts("verify-failed")
    assert not fleet.halts("slo-breach") and not fleet.halts("not-ready")  # nameable now: left out, they pause one


@pytest.mark.parametrize("sign", ["slo-breach", "not-ready"])
def test_halt_on_accepts_every_bad_sign_the_watches_report(tmp_path: Path, sign: str) -> None:
    path = tmp_path / FLEET_FILE
    path.write_text(f"waves:\n  - name: canary\n    stacks: [canary]\nhaltOn: [stuck, {sign}]\n")
    fleet = read_fleet_file(path)
    assert fleet.haltOn == [TriggerKind.STUCK, TriggerKind(sign)]
    assert fleet.halts(sign) and fleet.halts("stuck") and not fleet.halts("upgrade-failed")


def test_halt_on_accepts_each_bad_sign_alone() -> None:
    for sign in TriggerKind:
        if sign.bad_sign:
            fleet = fleet_from_document({"waves": [{"name": "c", "stacks": ["canary"]}], "haltOn": [str(sign)]})
            assert fleet.haltOn == [sign] and fleet.halts(sign)


def test_outside_window_is_refused_in_halt_on_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / FLEET_FILE
    path.write_text("waves:\n  - name: canary\n    stacks: [canary]\nhaltOn: [stuck, outside-window]\n")
    with pytest.raises(SpecError) as refused:
        read_fleet_file(path)
    assert [str(p) for p in refused.value.problems] == [
        "haltOn[1]: outside-window is no bad sign and cannot halt the train: a stack outside its maintenance window "
        "is paused alone, as `watch` pauses it"]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d.update(wavez=[]), "wavez: unknown key (did you mean 'waves'? see docs/fleet.md for the keys there are)"),
    (lambda d: d.pop("waves"), "waves: required key is missing"),
    (lambda d: d.update(waves=[]), "waves: List should have at least 1 item after validation, not 0"),
    (lambda d: d["waves"][1].update(name="Prod Lab"), "waves[1].name: 'Prod Lab' is not a wave name"),
    (lambda d: d["waves"][2].update(name="prod-lab"), "waves[2].name: 'prod-lab' is also the name of waves[1]"),
    (lambda d: d["waves"][1].update(maxConcurrent=0), "waves[1].maxConcurrent: Input should be greater than 0"),
    (lambda d: d["waves"][1].update(maxConcurrent="2"), "waves[1].maxConcurrent: Input should be a valid integer"),
    (lambda d: d["waves"][1]["waitFor"].update(soakHours="a day"),
     "waves[1].waitFor.soakHours: must be a number of hours such as 24, got 'a day'"),
    (lambda d: d["waves"][1]["waitFor"].update(verify="full"), "waves[1].waitFor.verify: Input should be 'smoke' or"),
    (lambda d: d["waves"][2].update(stacks=["prod", "prod"]), "waves[2].stacks: prod given twice"),
    (lambda d: d["waves"][2].update(stacks=["../prod"]), "waves[2].stacks: '../prod' is not a stack's own name"),
    (lambda d: d["waves"][2]["stacks"].append("existing-prod"),
     "waves[2].stacks[2]: existing-prod is already in wave prod-lab: a stack moves in one wave"),
    (lambda d: d.update(haltOn=["upgrade-failed", "xid-79"]), "haltOn[1]: Input should be 'upgrade-failed', "
     "'validation-failed', 'validation-missing', 'below-min-available', 'stuck', 'verify-failed', 'slo-breach', "
     "'slo-no-data' or 'not-ready'"),
    (lambda d: d.update(haltOn=["stuck", "stuck"]), "haltOn: stuck given twice"),
    (lambda d: d["lease"].update(stack="prod-2"), "lease.stack: prod-2 is in no wave"),
    (lambda d: d["lease"].update(durationSeconds=5), "lease.durationSeconds: Input should be greater than or equal"),
    (lambda d: d["limits"].update(maxGpusUnavailable=-8), "limits.maxGpusUnavailable: Input should be greater than 0"),
])
def test_a_bad_key_is_named_with_its_path_and_the_reason(change, expected: str) -> None:
    document = shipped()
    change(document)
    found = problems(document)
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_of_a_file_is_reported_together() -> None:
    document = shipped()
    document["waves"][0].update(maxConcurrent=0)
    document["limits"].update(maxClustersInFlight="two")
    found = problems(document)
    assert [p.split(":")[0] for p in found] == ["waves[0].maxConcurrent", "limits.maxClustersInFlight"]


def test_problems_across_keys_are_reported_beside_a_key_s_own_problem() -> None:
    """A field error (maxConcurrent: 0) does not hide what spans keys or what the stack files say: all at once."""
    document = shipped()
    document["waves"][0].update(maxConcurrent=0)
    document["waves"][0]["stacks"][2] = "existing-canry"
    assert problems(document) == [
        "waves[0].maxConcurrent: Input should be greater than 0 (got 0)",
        "lease.stack: existing-canary is in no wave",
        "waves[0].stacks[2]: no stack file Pulumi.existing-canry.yaml in the project; did you mean existing-canary?",
        "waves[1].stacks[0]: its promotion.canaryStack existing-canary is in no wave: the fleet moves a prod stack only "
        "after its canary",
        "waves: Pulumi.existing-canary.yaml is in no wave: add it to one (the deploy workflow deploys the project's "
        "stacks through the train only)"]
    # A wave whose stacks cannot be read at all: no stack is said to be in no wave on that account.
    document = shipped()
    document["waves"][1]["stacks"] = "existing-prod"
    assert not [p for p in problems(document) if p.startswith("waves: ")]


def test_a_stack_that_does_not_exist_is_named_at_its_own_key_with_the_nearest_name() -> None:
    """existing-canary replaced in the canary wave by a typo of it: each problem at its own key, all of them."""
    document = shipped()
    document["waves"][0]["stacks"][2] = "existing-canry"
    assert problems(document) == [
        "lease.stack: existing-canary is in no wave",
        "waves[0].stacks[2]: no stack file Pulumi.existing-canry.yaml in the project; did you mean existing-canary?",
        "waves[1].stacks[0]: its promotion.canaryStack existing-canary is in no wave: the fleet moves a prod stack only "
        "after its canary",
        "waves: Pulumi.existing-canary.yaml is in no wave: add it to one (the deploy workflow deploys the project's "
        "stacks through the train only)"]


def test_problems_across_keys_are_reported_together_and_with_the_stack_files() -> None:
    document = shipped()
    document["waves"][2].update(name="prod-lab")
    document["waves"][2]["stacks"].append("existing-prod")
    document["waves"][1]["stacks"].append("prod-eu")
    document["lease"]["stack"] = "canari"
    assert problems(document) == [
        "waves[2].name: 'prod-lab' is also the name of waves[1]",
        "waves[2].stacks[2]: existing-prod is already in wave prod-lab: a stack moves in one wave",
        "lease.stack: canari is in no wave; did you mean canary?",
        "waves[1].stacks[1]: no stack file Pulumi.prod-eu.yaml in the project"]
    with pytest.raises(SpecError) as alone:  # without the stack files: what the file alone shows
        check_stacks(fleet_from_document(shipped()), {**DECLARED, "prod-eu": DeclaredStack(Stage.PROD, "canary")})
    assert [str(p) for p in alone.value.problems][0].startswith("waves: Pulumi.prod-eu.yaml is in no wave")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d["waves"][2]["stacks"].append("prod-eu"),
     "waves[2].stacks[2]: no stack file Pulumi.prod-eu.yaml in the project"),
    (lambda d: (d["waves"][2]["stacks"].remove("prod"), d["waves"][0]["stacks"].append("prod")),
     "waves[0].stacks[3]: prod is a prod stack: the first wave is the canary wave"),
    (lambda d: (d["waves"][0]["stacks"].remove("canary"), d["waves"][2]["stacks"].insert(0, "canary")),
     "waves[2].stacks[0]: canary is a canary stack: canary stacks move in the first wave"),
    (lambda d: d["waves"][1]["waitFor"].update(attestation=True),
     "waves[1].waitFor.attestation: only a canary stack's verify attests; existing-prod never will"),
    (lambda d: d["waves"][2]["stacks"].remove("eks-prod"),
     "waves: Pulumi.eks-prod.yaml is in no wave: add it to one"),
])
def test_the_fleet_must_agree_with_the_stack_files(change, expected: str) -> None:
    document = shipped()
    change(document)
    found = problems(document)
    assert any(p.startswith(expected) for p in found), found


def test_a_prod_stack_moves_after_its_canary() -> None:
    document = {"waves": [{"name": "canary", "stacks": ["existing-canary"]}, {"name": "prod", "stacks": ["prod"]}]}
    declared = {"existing-canary": DeclaredStack(Stage.CANARY), "prod": DeclaredStack(Stage.PROD, "canary")}
    assert problems(document, declared) == [
        "waves[1].stacks[0]: its promotion.canaryStack canary is in no wave: the fleet moves a prod stack only after "
        "its canary"]
    declared["broken"] = DeclaredStack(None, problem="gpu-driver-upgrade:stage: required key is missing")
    document["waves"][1]["stacks"].append("broken")
    assert "waves[1].stacks[1]: Pulumi.broken.yaml does not load: gpu-driver-upgrade:stage: required key is missing" \
        in problems(document, declared)


def test_yaml_that_is_not_a_fleet_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / FLEET_FILE
    path.write_text("waves:\n  - name: canary\n    stacks: [canary]\nwaves: []\n")
    with pytest.raises(SpecError) as caught:
        read_fleet_file(path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: is not valid YAML: key 'waves' is given twice, on lines 1 and 4"]
    path.write_text("- canary\n- prod\n")
    with pytest.raises(SpecError, match="must be a YAML mapping with a waves: list"):
        read_fleet_file(path)


def test_the_model_is_the_one_the_docs_describe() -> None:
    docs = (PROJECT_DIR / "docs" / "fleet.md").read_text()
    for key in [*FleetFile.model_fields, "maxConcurrent", "waitFor", "verify", "attestation", "soakHours",
                "maxGpusUnavailable", "maxClustersInFlight", "durationSeconds"]:
        assert re.search(rf"`[^`\n]*\b{key}\b[^`\n]*`", docs), key  # in a key path: `waves[].waitFor.verify`
