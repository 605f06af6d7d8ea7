"""`gpu-rollout plan`: table and JSON output, exit codes, and bad input that changes nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from preview import renderings
from preview import run as preview_run
from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.rollout.gitrepo import GIT_ENV, GitRepo
from tests.rollout.json_contract import document_of, error_of

runner = CliRunner()


def plan(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["plan", *args])
    return result.exit_code, result.stdout, result.stderr


def test_plan_table_shows_what_a_reviewer_checks() -> None:
    code, out, _ = plan("--stack", "prod", "--all")
    assert code == 0, out  # the prod gate passes: the example ships its canary's attestation
    # The gate's rows are advice only: the example key (trusted on the example fleets), gput4's waiver, the held
    # pools' pin admitted by promotion.runningToday, and the canary's kube-system UID not compared offline.
    gate_rows = [line for line in out.splitlines() if "│ canary-attested" in line]
    assert len(gate_rows) == 4 and all("│ advisory" in line for line in gate_rows)
    assert "so that UID is not compared" in " ".join(out.split())
    assert "admitted without an attestation by promotion.runningToday" in " ".join(out.split())
    assert "580.173.02: stack organization/gpu-driver-upgrade/canary" in out  # the attestation the promotion record carries, in one line
    for expected in (
        "gpu-gpua100",
        "nvcr.io/nvidia/driver:570.195.03",
        "nvcr.io/nvidia/driver:580.173.02",
        "gpuProfile.driver: None",
        "HELD (skip label)",
        "maxParallelUpgrades=1",
        "minAvailable: 2 of 3 replicas",
        "held pools: gpua100, gpuh100",
    ):
        assert expected in out, expected


def test_plan_json_is_one_document_with_engine_inputs() -> None:
    code, out, _ = plan("--stack", "prod", "--json")
    document = document_of("plan", out)
    assert code == 0 and [v for v in document["violations"] if v["enforcement"] == "mandatory"] == []
    assert document["stack"] == "prod"
    types = [r["type"] for r in document["resources"]]
    assert types.count("kubernetes:nvidia.com/v1alpha1:NVIDIADriver") == 3
    assert types.count("kubernetes:policy/v1:PodDisruptionBudget") == 5  # the four models' and the guard's
    pools = [r for r in document["resources"] if r["type"] == "azure-native:containerservice:AgentPool"]
    assert {p["inputs"]["gpuProfile"]["driver"] for p in pools} == {"None"}
    assert all(isinstance(p["inputs"]["count"], int) for p in pools)  # numbers as JSON shows them
    assert document["outputs"]["heldPools"] == ["gpua100", "gpuh100"]


def test_plan_json_eks_prod_pins_release_versions_and_disables_the_driver() -> None:
    code, out, _ = plan("--stack", "eks-prod", "--json")
    document = document_of("plan", out)
    assert code == 0 and [v for v in document["violations"] if v["enforcement"] == "mandatory"] == []
    resources = document["resources"]
    groups = [r["inputs"] for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    assert groups and all(g["releaseVersion"] for g in groups)
    (release,) = [r["inputs"] for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release"]
    assert release["values"]["driver"]["enabled"] is False


def test_plan_shows_a_precompiled_branch_as_such(tmp_path: Path) -> None:
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    text = text.replace('version: "580.173.02"', 'version: "580"').replace('previousVersion: "570.195.03"', 'previousVersion: "570"')
    text = text.replace("    useNvidiaDriverCrd: true\n", "    useNvidiaDriverCrd: true\n    usePrecompiled: true\n")
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    code, out, err = plan("--stack-file", str(path))
    assert code == 1, err  # the prod gate: no attestation for the branch (tests/conftest.py)
    assert "nvcr.io/nvidia/driver:580 (branch 580, precompiled" in out
    assert "nvcr.io/nvidia/driver:570 (branch 570, precompiled" in out


def test_plan_reads_a_stack_file(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text((PROJECT_DIR / "Pulumi.canary.yaml").read_text())
    code, out, _ = plan("--stack-file", str(path), "--json")
    assert code == 0
    assert json.loads(out)["stack"] == "staging"


def test_invalid_config_exits_2_with_the_key_path_and_prints_only_the_error_document(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.prod.yaml"
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    path.write_text(text.replace('version: "580.173.02"', "version: latest"))
    code, out, err = plan("--stack-file", str(path), "--json")
    assert code == 2
    # stdout holds the error document alone: the key path `pulumi config set --path` takes, and why.
    (problem,) = error_of(out, 2, "invalid-input")["problems"]
    assert problem["key"] == "gpu-driver-upgrade:driver.version" and "moving target" in problem["message"]
    assert "gpu-driver-upgrade:driver.version" in err and "moving target" in err
    assert path.read_text() == text.replace('version: "580.173.02"', "version: latest")  # nothing changed


@pytest.mark.parametrize(
    "args",
    [
        ["--stack", "prod", "--stack-file", "Pulumi.prod.yaml"],
        [],
        ["--stack", "prod", "--no-such-flag"],
    ],
)
def test_bad_flags_exit_2(args: list[str]) -> None:
    code, _, _ = plan(*args)
    assert code == 2


def test_missing_stack_file_exits_2() -> None:
    code, out, err = plan("--stack", "nope")
    assert code == 2
    assert out == ""
    assert "Pulumi.nope.yaml" in err


def test_python_dash_m_rollout_runs_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rollout", "plan", "--stack", "canary", "--json"],
        capture_output=True,
        text=True,
        cwd=PROJECT_DIR,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "canary"


def test_a_prod_stack_sharing_objects_with_its_canary_stack_exits_2(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.prod.yaml").write_text((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    canary = (PROJECT_DIR / "Pulumi.canary.yaml").read_text().replace("clusterPolicy: external", "clusterPolicy: patch")
    (tmp_path / "Pulumi.canary.yaml").write_text(canary)
    code, out, err = plan("--stack-file", str(tmp_path / "Pulumi.prod.yaml"))
    assert code == 2
    assert out == ""
    assert "gpu-driver-upgrade:promotion.canaryStack" in err and "ClusterPolicy cluster-policy" in err


def test_a_folder_without_the_program_exits_2_naming_project_dir(tmp_path: Path) -> None:
    code, out, err = plan("--stack-file", str(PROJECT_DIR / "Pulumi.canary.yaml"), "--project-dir", str(tmp_path))
    assert code == 2
    assert out == ""
    assert "--project-dir" in err and "no Pulumi program" in err


def test_plan_finds_the_project_from_the_current_folder(tmp_path: Path) -> None:
    # A copy of the project elsewhere: plan reads that folder's stacks and program, not the checkout's.
    for name in ("Pulumi.yaml", "__main__.py"):
        (tmp_path / name).write_text((PROJECT_DIR / name).read_text())
    text = (PROJECT_DIR / "Pulumi.canary.yaml").read_text().replace("nodeCount: 3", "nodeCount: 4")
    (tmp_path / "Pulumi.canary.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "rollout", "plan", "--stack", "canary", "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    pool = next(r for r in json.loads(result.stdout)["resources"] if r["type"].endswith(":AgentPool")
                and r["name"] == "gpucanary")
    assert pool["inputs"]["count"] == 4


def test_a_mandatory_violation_says_which_config_key_to_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    path = tmp_path / "Pulumi.canary.yaml"
    path.write_text((PROJECT_DIR / "Pulumi.canary.yaml").read_text().replace("maxParallelUpgrades: 1",
                                                                            "maxParallelUpgrades: 3"))
    code, out, _ = plan("--stack-file", str(path), "--project-dir", str(PROJECT_DIR))
    assert code == 1
    assert "edit: gpuOperator.upgradePolicy.maxParallelUpgrades" in out  # whole, at 100 columns
    code, out, _ = plan("--stack-file", str(path), "--project-dir", str(PROJECT_DIR), "--json")
    found = [v for v in document_of("plan", out)["violations"] if v["policy"] == "canary-one-node-at-a-time"]
    assert found and all(v["configKeys"] == ["gpuOperator.upgradePolicy.maxParallelUpgrades",
                                             "nodePools[].upgradePolicy.maxParallelUpgrades"] for v in found)


def test_a_plan_renders_each_input_once_across_runs_and_prints_what_a_fresh_plan_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38: every rendering is kept across runs (preview/renderings.py): the canary's and the last
    deployment's, which plan only reads, and the stack's own, whose resources are the report. A plan that reuses
    them prints what one that renders them prints, byte for byte; a new change renders only the stack itself."""
    repo = GitRepo(tmp_path / "fleet")
    repo.edit("prod", "driver", lambda d: d.update(version="595.91.07"))  # the last deployment differs: rendered
    rendered: list[str] = []
    run_program = preview_run.run_program

    def counted(config: dict[str, str], stack: str, *args: Any, **kwargs: Any) -> preview_run.ProgramRun:
        rendered.append(stack)
        return run_program(config, stack, *args, **kwargs)

    monkeypatch.setattr(preview_run, "run_program", counted)

    def planned(*flags: str) -> tuple[int, str, str]:
        result = runner.invoke(app, ["plan", "--project-dir", str(repo.root), "--stack", "prod", *flags],
                               env={**GIT_ENV, "COLUMNS": "100"})
        return result.exit_code, result.stdout, result.stderr

    cold = planned("--json")
    # the canary's stack file, prod at the merge base, and prod as the work tree has it
    assert sorted(rendered) == ["canary", "prod", "prod"]
    table = planned()
    assert planned("--json") == cold and planned() == table and len(rendered) == 3  # nothing rendered again
    assert "Pulumi.prod.yaml at the merge base with main" in cold[1] and cold[0] == 1  # unattested: refused
    shutil.rmtree(renderings.cache_dir())  # safe to delete: rendered again, the same documents
    assert planned("--json") == cold and planned() == table and len(rendered) == 6

    # A new change to the stack file: the stack itself is rendered, nothing else.
    document = yaml.safe_load((repo.root / "Pulumi.prod.yaml").read_text())
    document["config"]["gpu-driver-upgrade:changeTicket"] = "CHG-NEXT"
    (repo.root / "Pulumi.prod.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    changed = planned("--json")
    assert rendered[6:] == ["prod"] and changed != cold
    shutil.rmtree(renderings.cache_dir())
    assert planned("--json") == changed


def test_plan_marks_each_change_against_the_last_deployment_and_closes_with_the_verdict(tmp_path: Path) -> None:
    """Issue 32, point 3: against the stack file at the merge base, each resource is marked create, update or same
    (unchanged ones folded into a count), a changed field is shown old → new, the summary comes before the table
    and the verdict is the last line."""
    from tests.rollout.gitrepo import GIT_ENV, GitRepo

    repo = GitRepo(tmp_path / "fleet")
    repo.pool("canary", "gpucanary", lambda pool: pool.update(nodeCount=4))
    result = runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(repo.root)],
                           env={**GIT_ENV, "COLUMNS": "100"})
    lines = result.stdout.splitlines()
    (summary,) = [i for i, line in enumerate(lines) if line.startswith("changes against the last deployment: ")]
    assert summary < 6 and "1 update" in lines[summary] and " same" in lines[summary]
    assert "~ update AgentPool" in result.stdout
    assert "vm: Standard_NC40ads_H100_v5 x3 → Standard_NC40ads_H100_v5 x4" in result.stdout
    assert "resource(s) the same as the last deployment, not shown (--all shows them)" in result.stdout
    assert len(lines) < 60 and max(len(line) for line in lines) <= 100
    assert " ".join(lines[-2:]).startswith("verdict: admitted")
    document = json.loads(runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(repo.root), "--json"],
                                        env=GIT_ENV).stdout)
    (pool,) = [c for c in document["changes"] if c["name"] == "gpucanary"]
    assert pool["marker"] == "update" and {"field": "vm", "old": "Standard_NC40ads_H100_v5 x3",
                                           "new": "Standard_NC40ads_H100_v5 x4"} in pool["fields"]
    assert {c["marker"] for c in document["changes"]} == {"update", "same"}


def test_a_replace_only_field_is_marked_replace_and_a_first_deployment_creates(tmp_path: Path) -> None:
    from tests.rollout.gitrepo import GIT_ENV, GitRepo

    repo = GitRepo(tmp_path / "fleet")
    repo.pool("canary", "gpucanary", lambda pool: pool["aks"].update(vmSize="Standard_NC80adis_H100_v5"))
    document = json.loads(runner.invoke(app, ["plan", "--stack", "canary", "--project-dir", str(repo.root), "--json"],
                                        env=GIT_ENV).stdout)
    (pool,) = [c for c in document["changes"] if c["name"] == "gpucanary"]
    assert pool["marker"] == "replace" and pool["replacedBy"] == ["vmSize"]
    first = tmp_path / "elsewhere" / "Pulumi.canary.yaml"
    first.parent.mkdir()
    first.write_text((repo.root / "Pulumi.canary.yaml").read_text())
    document = json.loads(runner.invoke(app, ["plan", "--stack-file", str(first), "--project-dir", str(repo.root),
                                              "--json"], env=GIT_ENV).stdout)
    assert {c["marker"] for c in document["changes"]} == {"create"}


@pytest.mark.parametrize("stack", ["canary", "prod", "eks-prod", "existing-prod"])
def test_plan_outputs_are_typed_and_an_undeclared_one_breaks_the_schema(stack: str) -> None:
    """Issue 32, point 6: plan's outputs are the program's exports as engine_contracts types them, every key named;
    a key nobody declared (or a pool summary key) breaks docs/schemas/plan.schema.json."""
    from tests.rollout.json_contract import conforms

    _, out, _ = plan("--stack", stack, "--json")
    document = document_of("plan", out)
    outputs = document["outputs"]
    assert outputs["pools"] and outputs["identity"]["stack"].endswith(stack)
    with pytest.raises(AssertionError, match="breaks docs/schemas/plan.schema.json"):
        conforms("plan", {**document, "outputs": {**outputs, "driverVersoin": "580.173.02"}})
    pool = next(iter(outputs["pools"]))
    broken = {**outputs, "pools": {**outputs["pools"], pool: {**outputs["pools"][pool], "heldd": True}}}
    with pytest.raises(AssertionError, match="breaks docs/schemas/plan.schema.json"):
        conforms("plan", {**document, "outputs": broken})


def test_plan_reads_the_stack_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Judged and rendered from one reading: a 150-pool stack file costs a tenth of a second to parse.
    from rollout import plan as plan_module

    read: list[Path] = []
    reader = plan_module.read_stack_file

    def counting(path: Path) -> dict[str, str]:
        read.append(Path(path).resolve())
        return reader(path)

    monkeypatch.setattr(plan_module, "read_stack_file", counting)
    code, _, err = plan("--stack", "prod", "--json")
    assert code == 0, err
    assert read.count((PROJECT_DIR / "Pulumi.prod.yaml").resolve()) == 1
