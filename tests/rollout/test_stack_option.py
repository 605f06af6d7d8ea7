"""Issue 24 points 5 and 7: `--stack` that forgives (a file name is the stack, an unknown stack lists the stacks
there are, a flag beats the other's environment variable and a conflict names it), and a project found as the
Pulumi CLI finds it: the current folder or the nearest one above it with Pulumi.yaml."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR
from tests.rollout.json_contract import error_of

runner = CliRunner()


def plan_json(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["plan", "--json", *args], env=env)


@pytest.mark.parametrize("given", ["Pulumi.canary.yaml", "./Pulumi.canary.yaml"])
def test_a_stack_file_name_is_taken_as_the_stack(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_DIR)
    result = plan_json("--stack", given)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["stack"] == "canary" and document["basis"]["stackFile"] == "Pulumi.canary.yaml"


def test_an_unknown_stack_lists_the_stacks_there_are() -> None:
    result = plan_json("--stack", "nosuch", "--project-dir", str(PROJECT_DIR))
    assert result.exit_code == 2 and error_of(result.stdout, 2, "invalid-input")["problems"][0]["key"] == "--stack"
    assert "no stack 'nosuch'" in result.stderr and "Pulumi.nosuch.yaml" in result.stderr
    assert f"its stacks: {', '.join(sorted(EXAMPLE_STACKS))}" in result.stderr


@pytest.mark.parametrize("given", ["prdo", "prod.yaml"])
def test_a_near_miss_of_a_stack_gets_the_nearest_one(given: str) -> None:
    result = plan_json("--stack", given, "--project-dir", str(PROJECT_DIR))
    assert result.exit_code == 2 and "did you mean 'prod'?" in result.stderr, result.stderr
    assert "did you mean" not in plan_json("--stack", "zzzz", "--project-dir", str(PROJECT_DIR)).stderr


def test_an_unknown_stack_from_the_environment_names_the_variable() -> None:
    result = plan_json("--project-dir", str(PROJECT_DIR), env={"GPU_ROLLOUT_STACK": "nosuch"})
    assert result.exit_code == 2 and "$GPU_ROLLOUT_STACK: no stack 'nosuch'" in result.stderr


def test_a_stack_file_flag_beats_the_stack_variable(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text((PROJECT_DIR / "Pulumi.canary.yaml").read_text())
    result = plan_json("--stack-file", str(path), env={"GPU_ROLLOUT_STACK": "prod"})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "staging"


def test_both_variables_set_is_refused_naming_them(tmp_path: Path) -> None:
    result = plan_json(env={"GPU_ROLLOUT_STACK": "prod", "GPU_ROLLOUT_STACK_FILE": str(PROJECT_DIR / "Pulumi.prod.yaml")})
    assert result.exit_code == 2
    assert "GPU_ROLLOUT_STACK and GPU_ROLLOUT_STACK_FILE" in " ".join(result.stderr.split())


def test_plan_from_a_subfolder_reads_the_project_above_it(tmp_path: Path) -> None:
    """Two checkouts sharing one virtual environment: run from a subfolder of one, plan reads that one, not the
    checkout gpu-rollout was installed from, and says so."""
    project = tmp_path / "other-checkout"
    (project / "docs").mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.canary.yaml"):
        shutil.copyfile(PROJECT_DIR / name, project / name)
    (project / "Pulumi.canary.yaml").write_text(
        (PROJECT_DIR / "Pulumi.canary.yaml").read_text().replace("nodeCount: 3", "nodeCount: 5"))
    done = subprocess.run([sys.executable, "-m", "rollout", "plan", "--stack", "canary"], cwd=project / "docs",
                          capture_output=True, text=True, timeout=120, check=False, env={"COLUMNS": "300",
                                                                                           "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first == (f"plan of stack canary: Pulumi.canary.yaml in project {project} (the nearest folder above the "
                     "current one with Pulumi.yaml)")
    assert "x5" in done.stdout  # its own file: gpucanary has five nodes there
