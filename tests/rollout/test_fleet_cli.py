"""`gpu-rollout fleet` on the command line: `fleet plan` offline over the shipped fleet (every example stack
rendered and judged by the pack), a refused stack exiting 1, and bad input exiting 2 with the key path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR
from tests.rollout.gitrepo import GitRepo
from tests.rollout.json_contract import document_of

runner = CliRunner()
INSIDE_THE_WINDOWS = "2026-12-09T11:30:00Z"  # a Wednesday: every example prod stack's window is open


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "fleet")
    shutil.copyfile(PROJECT_DIR / "Fleet.yaml", repo.root / "Fleet.yaml")
    repo.commit("the fleet")
    return repo


def test_the_shipped_fleet_plans_every_stack_in_wave_order_and_admits_them() -> None:
    result = runner.invoke(app, ["fleet", "plan", "--json", "--at", INSIDE_THE_WINDOWS, "--project-dir",
                                 str(PROJECT_DIR)])
    assert result.exit_code == 0, result.output
    doc = document_of("fleet-plan", result.stdout)
    assert [w["name"] for w in doc["waves"]] == ["canary", "prod-lab", "prod-cloud"]
    stacks = [s for w in doc["waves"] for s in w["stacks"]]
    assert sorted(s["stack"] for s in stacks) == sorted(EXAMPLE_STACKS)
    assert not doc["refused"] and all(s["verdict"].startswith("admitted") for s in stacks)
    lab = doc["waves"][1]["stacks"][0]
    # Judged as plan judges it: the committed file is its last deployment, so it moves from the driver that ran.
    assert {k: lab["driver"][k] for k in ("from", "to", "owner")} == {"from": "580.173.02", "to": "580.173.02",
                                                                       "owner": "operator"}
    assert lab["driver"]["fromSource"].startswith("last deployment: Pulumi.existing-prod.yaml at ")
    assert [p for p in lab["pools"] if p["held"]] == [{"name": "h100-serving", "driver": "570.195.03", "held": True,
                                                       "why": "held: rollout.released is false"}]
    assert doc["waves"][1]["waits"] == ("every stack's rollout complete; `verify --smoke` passing on each; 24 h since "
                                        "its last upgraded node finished")


def test_a_stack_the_pack_would_refuse_fails_the_plan_and_the_comment_names_it(repo: GitRepo) -> None:
    # No attestation in this repository: a prod stack moved to another driver is unattested for the prod gate.
    for stack in ("existing-prod", "prod"):
        repo.edit(stack, "driver", lambda d: d.update(version="595.91.07"))
    result = runner.invoke(app, ["fleet", "plan", "--markdown", "--at", INSIDE_THE_WINDOWS, "--project-dir",
                                 str(repo.root)])
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("### Fleet plan: 3 wave(s), 6 stack(s)")
    assert "**Refused:** `existing-prod`, `prod`" in result.stdout
    assert "| 580.173.02 → 595.91.07 |" in result.stdout
    assert "#### Wave 2: `prod-lab` (1 at once)" in result.stdout
    assert "refused: canary-attested: driver 595.91.07" in result.stdout


@pytest.mark.parametrize("verb", ["plan", "status", "advance", "resume"])
def test_a_bad_fleet_file_exits_2_naming_the_key(repo: GitRepo, verb: str) -> None:
    document = yaml.safe_load((repo.root / "Fleet.yaml").read_text())
    document["waves"][1]["maxConcurrent"] = 0
    (repo.root / "Fleet.yaml").write_text(yaml.safe_dump(document))
    result = runner.invoke(app, ["fleet", verb, "--project-dir", str(repo.root)])
    assert result.exit_code == 2, result.output
    assert f"invalid config in {repo.root / 'Fleet.yaml'}" in result.stderr
    assert "  waves[1].maxConcurrent (prod-lab): Input should be greater than 0 (got 0)" in result.stderr


def test_a_project_without_a_fleet_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["fleet", "status", "--project-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'Fleet.yaml'}: no fleet file: write one (docs/fleet.md) or pass --project-dir" in result.stderr


def test_advance_refuses_flags_that_contradict(repo: GitRepo, tmp_path: Path) -> None:
    result = runner.invoke(app, ["fleet", "advance", "--stage", "staging", "--project-dir", str(repo.root)])
    assert result.exit_code == 2 and "'staging' is not a stage (canary or prod)" in result.output
    result = runner.invoke(app, ["fleet", "advance", "--packs", str(tmp_path), "--policy-pack", "p",
                                 "--project-dir", str(repo.root)])
    assert result.exit_code == 2 and "give --packs or --policy-pack, not both" in result.output
    result = runner.invoke(app, ["fleet", "halt", "--reason", " ", "--project-dir", str(repo.root)])
    assert result.exit_code == 2 and "say why, in words" in result.output


def test_halt_s_wave_and_advance_s_approved_plan_are_checked_before_anything_runs(repo: GitRepo,
                                                                                  tmp_path: Path) -> None:
    result = runner.invoke(app, ["fleet", "halt", "--reason", "Xid 79", "--wave-of", "prod-eu", "--project-dir",
                                 str(repo.root)])
    assert result.exit_code == 2 and "--wave-of: prod-eu is in no wave of the fleet file" in result.stderr
    plan = tmp_path / "approval.json"
    plan.write_text('{"commit": "c0ffee", "ups": []}')
    result = runner.invoke(app, ["fleet", "advance", "--yes", "--stage", "prod", "--expect", str(plan),
                                 "--project-dir", str(repo.root)])
    assert result.exit_code == 2, result.output
    assert f"--expect: {plan} is not an approval plan (the `approval` of `fleet advance --json`)" in result.stderr
