"""Every policy passes the four examples and fails its bad variant, through `gpu-rollout plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from policy.evaluate import evaluate, from_registered, load_config, mandatory
from policy.registry import POLICY_IDS
from rollout.cli import app
from tests.conftest import EXAMPLE_STACKS, PROD_GATE, PROJECT_DIR, as_planned, change, stack_config
from preview.run import run_program
from engine_contracts import resource_facts as rf
from tests.policy.variants import MORE_VARIANTS, TRANSITION_VARIANTS, VARIANTS

runner = CliRunner()


def write_stack(tmp_path: Path, stack: str, config: dict[str, str]) -> Path:
    """A stack file holding ``config`` as `pulumi config` would write it (structured values as YAML), beside
    the example canary stack it is promoted from, where it names one (plan reads the canary's outputs there)."""
    values = {key: json.loads(raw) if raw[:1] in "{[" else raw for key, raw in config.items()}
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": values}, sort_keys=False))
    canary = (values.get("gpu-driver-upgrade:promotion") or {}).get("canaryStack")
    if canary and (PROJECT_DIR / f"Pulumi.{canary}.yaml").is_file() and canary != stack:
        (tmp_path / f"Pulumi.{canary}.yaml").write_text((PROJECT_DIR / f"Pulumi.{canary}.yaml").read_text())
    return path


def test_every_policy_has_a_bad_variant():
    # The program renders one NVIDIADriver per pool selecting only that pool, so no config makes
    # selectors overlap, and FleetSpec refuses unpinned drivers and node groups, a node-image driver under
    # the operator and an operator-owned pool on an OS without a driver image; test_rules.py feeds those
    # four rules hand-edited resources instead.
    # Changes the cloud or the operator cannot take in one step have variants against a last deployment.
    # The prod gate's cases, each with the attestation it needs sealed in the test, are in
    # test_promotion_rules.py (the examples pass it on the attestations they ship). No config makes the program
    # write facts newer than its own pack reads: facts-readable is fed a newer record in test_process_rules.py
    # and test_engine_outputs.py.
    assert set(VARIANTS) | {v[0] for v in TRANSITION_VARIANTS.values()} == set(POLICY_IDS) - {
        "nvidiadriver-selectors-disjoint", "driver-version-pinned", "single-driver-owner", "operator-supports-os",
        PROD_GATE, "facts-readable",
    }


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_examples_have_no_mandatory_violation(rendered, stack):
    run = rendered[stack]
    violations = evaluate(from_registered(run.resources), load_config(run.outputs["stage"]))
    assert mandatory(violations) == [], violations


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_examples_plan_exits_zero(stack):
    """The examples plan clean, the prod ones on the attestations their canaries' verify made."""
    result = runner.invoke(app, ["plan", "--stack", stack, "--json"])
    document = json.loads(result.stdout)
    assert result.exit_code == 0, result.stdout
    assert all(v["enforcement"] != "mandatory" for v in document["violations"])
    assert all(set(v) == {"policy", "enforcement", "resource", "message", "configKeys", "fix"}
               for v in document["violations"])


# One variant per policy (keyed by the policy id) and further ones (keyed by a name of their own).
ALL_VARIANTS = {
    **{policy_id: (policy_id, *variant) for policy_id, variant in VARIANTS.items()},
    **MORE_VARIANTS,
}


@pytest.mark.parametrize("name", sorted(ALL_VARIANTS))
def test_bad_variant_names_the_policy(tmp_path, name):
    policy_id, stack, build, level = ALL_VARIANTS[name]
    path = write_stack(tmp_path, stack, build())
    result = runner.invoke(app, ["plan", "--stack-file", str(path), "--json"])
    document = json.loads(result.stdout)
    hits = [v for v in document["violations"] if v["policy"] == policy_id]
    assert any(v["enforcement"] == level for v in hits), document["violations"]
    # An advisory variant exits 1 only where a companion policy (COMPANIONS) refuses it too.
    companion = any(v["enforcement"] == "mandatory" and v["policy"] in COMPANIONS.get(policy_id, set())
                    for v in document["violations"])
    assert result.exit_code == (1 if level == "mandatory" or companion else 0)


@pytest.mark.parametrize("name", sorted(TRANSITION_VARIANTS))
def test_bad_change_against_the_last_deployment_names_the_policy(tmp_path, name):
    policy_id, stack, deployed, changed, level = TRANSITION_VARIANTS[name]
    previous = tmp_path / "outputs.json"
    previous.write_text(json.dumps(run_program(deployed(), stack).outputs))
    path = write_stack(tmp_path, stack, changed())
    result = runner.invoke(app, ["plan", "--stack-file", str(path), "--json", "--previous-outputs", str(previous)])
    document = json.loads(result.stdout)
    hits = [v for v in document["violations"] if v["policy"] == policy_id]
    assert any(v["enforcement"] == level for v in hits), document["violations"]
    assert result.exit_code == 1
    # The same change as a first deployment (no previous outputs) has nothing to compare against.
    first = runner.invoke(app, ["plan", "--stack-file", str(path), "--json"])
    assert [v for v in json.loads(first.stdout)["violations"] if v["policy"] == policy_id] == []


def test_unchanged_redeployment_passes_against_its_own_outputs(tmp_path, rendered):
    for stack in ("prod", "eks-prod"):
        previous = tmp_path / f"{stack}.json"
        previous.write_text(json.dumps(rendered[stack].outputs))
        result = runner.invoke(app, ["plan", "--stack", stack, "--json", "--previous-outputs", str(previous)])
        assert result.exit_code == 0, result.stdout


@pytest.mark.parametrize("content", ["[1]", "not json", ""])
def test_previous_outputs_that_are_not_an_object_are_invalid_input(tmp_path, content):
    previous = tmp_path / "outputs.json"
    previous.write_text(content)
    result = runner.invoke(app, ["plan", "--stack", "prod", "--previous-outputs", str(previous)])
    assert result.exit_code == 2
    assert "--previous-outputs" in result.output


def test_plan_table_lists_violations(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")  # the message on one line, wherever the table would wrap it
    stack, build, _ = VARIANTS["parallelism-within-spare-capacity"]
    path = write_stack(tmp_path, stack, build())
    result = runner.invoke(app, ["plan", "--stack-file", str(path)])
    assert result.exit_code == 1
    assert "policy violations" in result.stdout
    assert "parallelism-within-spare-capacity" in result.stdout
    assert "2 GPUs out but only 1 spare" in result.stdout


def test_a_rollback_plan_passes_against_the_deployment_it_rolls_back(tmp_path, rendered):
    # Issue 12: prod goes back to 570.195.03. Operator v26.7.0 lists no R570 driver, but the fleet ran it: the
    # gate must not block the way back in an incident. previousVersion stays what the held pools run (issue 20:
    # swapping it would move them to the driver being rolled back, which the gate judges as a promotion).
    # "Ran" is what the gate admitted (issue 30): the deployment rolled back from released gput4 to 580.173.02, after
    # one that held it on 570.195.03, which only promotion.runningToday declares the fleet runs: driversRun records
    # 580.173.02 alone, and the declaration admits the way back to 570.195.03.
    all_held = change(stack_config("prod"), "nodePools", lambda pools: [p["rollout"].update(released=False)
                                                                         for p in pools])
    before = run_program(all_held, "prod").outputs
    released = run_program(stack_config("prod"), "prod", previous_outputs=before).outputs
    assert released[rf.TIMELINE]["driversRun"]["gput4"] == ["580.173.02"]
    rolled_back = change(stack_config("prod"), "driver", lambda d: d.update(version="570.195.03"))
    path = write_stack(tmp_path, "prod", rolled_back)
    previous = tmp_path / "outputs.json"
    previous.write_text(json.dumps(released))
    informed = runner.invoke(app, ["plan", "--stack-file", str(path), "--json", "--previous-outputs", str(previous)])
    assert informed.exit_code == 0, informed.stdout
    # Without the declaration nothing says gput4 ever ran 570.195.03: the T4 pool's move is a promotion.
    undeclared = change(rolled_back, "promotion", lambda p: p.pop("runningToday"))
    unproven = runner.invoke(app, ["plan", "--stack-file", str(write_stack(tmp_path, "prod", undeclared)), "--json",
                                   "--previous-outputs", str(previous)])
    assert any(v["policy"] == PROD_GATE and v["enforcement"] == "mandatory" and "gput4" in v["message"]
               for v in json.loads(unproven.stdout)["violations"])
    path = write_stack(tmp_path, "prod", rolled_back)
    advice = [v for v in json.loads(informed.stdout)["violations"] if v["policy"] == "operator-supports-driver"]
    assert advice and all(v["enforcement"] == "advisory" for v in advice)
    # The objects that move back say it is a rollback; the held pools say they stay where they are.
    assert {v["resource"] for v in advice if "rollback" in v["message"]} == {"cluster-policy", "gpu-gput4"}
    blind = runner.invoke(app, ["plan", "--stack-file", str(path), "--json"])
    assert blind.exit_code == 1


# Policies a variant cannot break alone: a model with one replica has a PDB that lets no pod go, whatever
# its minAvailable (FleetSpec refuses 0); a prod driver the operator does not list is one no canary attested
# either (the example canary runs and attested 580.173.02), so the prod gate refuses it too. One cluster-wide driver
# (no NVIDIADrivers) gives the held pools the target driver, not the one the stack declares they run today
# (promotion.runningToday): on the first deployment that is a promotion of the held H100 pool (issue 30).
# R590 needs a newer DCGM Exporter than prod declares (4.4.1): the driver change breaks that rule too.
COMPANIONS = {"model-redundancy": {"pdb-allows-drain"},
              "operator-supports-driver": {PROD_GATE, "dcgm-exporter-supports-driver"},
              "held-pool-pinned": {PROD_GATE}, "wait-for-batch-jobs": {PROD_GATE}}


@pytest.mark.parametrize("name", sorted(ALL_VARIANTS))
def test_each_bad_variant_breaks_exactly_its_one_policy(rendered, name):
    """A variant documented as breaking one policy breaks that one alone: no other policy reports a new
    mandatory violation (other policies may add advice)."""
    policy_id, stack, build, level = ALL_VARIANTS[name]
    example = rendered[stack]
    before = set(evaluate(from_registered(example.resources), load_config(example.outputs["stage"])))
    run = as_planned(stack, build())
    introduced = [v for v in evaluate(from_registered(run.resources), load_config(run.outputs["stage"])) if v not in before]
    broken = {v.policy for v in introduced if v.enforcement.value == "mandatory"}
    assert broken <= {policy_id} | COMPANIONS.get(policy_id, set()), introduced
    assert any(v.policy == policy_id and v.enforcement.value == level for v in introduced), introduced
