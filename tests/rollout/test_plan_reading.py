"""Issue 24 point 1: a plan a reviewer reads in a minute. Large payloads show as key, size and sha256 (the text is
in --json and behind --show-data); at 100 columns no line is wider and no version, image tag or pool name is
cut; the first lines say the stack, the file read and the project folder; image-owned held pools and the
provider's cluster are said in true words."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from preview.summary import is_payload
from rollout.cli import app
from fleetspec.load import load_stack_file
from tests.conftest import PROJECT_DIR

runner = CliRunner()


def plan(*args: str, columns: int | None = None) -> tuple[int, str, str]:
    env = {"COLUMNS": str(columns)} if columns is not None else None
    result = runner.invoke(app, ["plan", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def canary_json() -> dict:
    code, out, err = plan("--stack", "canary", "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("stack", ["canary", "prod", "eks-prod"])
def test_at_100_columns_no_line_is_wider_and_no_value_is_cut(stack: str) -> None:
    code, out, err = plan("--stack", stack, "--all", columns=100)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "…" not in out  # nothing ends in an ellipsis
    _, text, _ = plan("--stack", stack, "--json")
    document = json.loads(text)
    spec = load_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")
    for pool in spec.nodePools:
        assert pool.name in out, pool.name
    for resource in document["resources"]:
        driver = (resource["inputs"].get("spec") or {}) if resource["type"].endswith(":NVIDIADriver") else {}
        if driver.get("image"):
            assert f"{driver['image']}:{driver['version']}" in out  # image and tag whole, on one line


@pytest.mark.parametrize("columns", [100, 132])
def test_piped_output_follows_columns(columns: int) -> None:
    _, out, _ = plan("--stack", "canary", columns=columns)
    widths = [len(line) for line in out.splitlines()]
    assert max(widths) == columns  # the table takes the width it is given, and no more


def test_a_canary_plan_shows_the_validation_program_by_size_and_digest(canary_json: dict) -> None:
    code, out, _ = plan("--stack", "canary", "--all", columns=100)
    assert code == 0
    (program,) = [r for r in canary_json["resources"] if r["name"] == "gpu-validation-program"]
    data = program["inputs"]["data"]
    payloads = {key: value for key, value in data.items() if is_payload(value)}
    assert "workload.validate.py" in payloads  # the JSON holds the whole text
    for key, value in payloads.items():
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        assert f"{key}: {len(value.encode()):,} bytes, sha256" in out and digest in out
        assert not any(line.strip() and line.strip() in out for line in value.splitlines() if len(line) > 40)
    assert len(out.splitlines()) < 200  # was 1,942 lines, nearly all of them the program's source


def test_show_data_prints_the_payloads_whole(canary_json: dict) -> None:
    _, out, _ = plan("--stack", "canary", "--show-data", columns=100)
    (program,) = [r for r in canary_json["resources"] if r["name"] == "gpu-validation-program"]
    source = program["inputs"]["data"]["workload.validate.py"]
    # After the report, verbatim (not folded into a table cell at 100 columns), under its whole sha256.
    assert source in out and out.index(source) > out.index("policy")
    assert f"data['workload.validate.py'] ({len(source.encode()):,} bytes, sha256 " \
           f"{hashlib.sha256(source.encode()).hexdigest()}) ---" in out


def test_the_first_lines_say_the_stack_the_file_and_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_DIR)
    _, out, _ = plan("--stack", "prod", columns=200)
    first, *rest = out.splitlines()
    assert first == f"plan of stack prod: Pulumi.prod.yaml in project {PROJECT_DIR} (the current folder)"
    assert rest[0].startswith("last deployment: ") and rest[1].startswith("canary 'canary': ")


def test_an_image_owned_held_pool_is_not_said_to_be_held_by_the_skip_label() -> None:
    _, out, _ = plan("--stack", "eks-prod", "--all", columns=200)
    held = [line for line in out.splitlines() if "HELD" in line]
    assert held and all("keeps its node image" in line and "skip label" not in line for line in held)
    _, aks, _ = plan("--stack", "prod", "--all", columns=200)
    assert "HELD (skip label)" in aks  # operator-owned: the label is the brake


def test_the_provider_row_never_points_at_the_current_context() -> None:
    _, aks, _ = plan("--stack", "prod", "--all", columns=200)
    assert "current-context" not in aks
    assert "the stack's own cluster credentials" in aks
    _, existing, _ = plan("--stack", "existing-prod", "--all", columns=200)
    assert "context lab-gpu-1" in existing  # the declared context, by name
