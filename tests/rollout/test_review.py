"""`gpu-rollout review`: every pinned version of every stack against the compatibility tables, as Markdown and as a
document; a pin past its branch's end of life or one the operator does not list fails (exit 1), one the tables do not
know is "unknown", never supported; the newest release of the same branch or line is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import EXAMPLE_STACKS
from tests.rollout.gitrepo import GitRepo
from tests.rollout.json_contract import document_of

runner = CliRunner()


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "fleet")


def _review(repo: GitRepo, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["review", "--project-dir", str(repo.root), *args])
    return result.exit_code, result.stdout


def _pins(repo: GitRepo, *args: str) -> tuple[int, dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    code, out = _review(repo, "--json", *args)
    document = document_of("review", out)
    return code, {(p["stack"], p["component"]): p for p in document["pins"]}, document


def test_every_stack_lists_its_driver_chart_dcgm_node_images_and_each_models_cuda(repo: GitRepo) -> None:
    code, pins, document = _pins(repo, "--at", "2026-12-09T10:00:00Z")
    assert code == 0 and document["date"] == "2026-12-09" and document["unloadable"] == []
    assert {stack for stack, _ in pins} == set(EXAMPLE_STACKS)
    for stack in EXAMPLE_STACKS:
        assert {"driver", "operator chart", "DCGM Exporter"} <= {c for s, c in pins if s == stack}
    driver = pins[("prod", "driver")]
    assert (driver["pinned"], driver["status"], driver["endOfSupport"]) == ("580.173.02", "supported", "2028-06-30")
    assert pins[("prod", "DCGM Exporter")]["pinned"] == "DCGM 4.6.0 (chart v26.7.0)"
    assert pins[("prod", "CUDA of code-tgi")] | {"why": ""} == {
        "stack": "prod", "component": "CUDA of code-tgi", "pinned": "12.4", "status": "supported",
        "endOfSupport": None, "newer": "12.9", "why": ""}
    image = pins[("eks-prod", "node image of gpu-l40s generation 2")]
    assert image["status"] == "unknown" and "not in the compatibility tables" in image["why"]
    assert pins[("prod", "previous driver (held pools)")]["status"] == "unknown"  # R570 is not in the table


def test_a_branch_past_its_end_of_life_fails_the_review(repo: GitRepo) -> None:
    code, pins, _ = _pins(repo, "--at", "2028-07-01T00:00:00Z")
    assert code == 1 and pins[("prod", "driver")]["status"] == "end of support"
    code, out = _review(repo, "--at", "2028-07-01T00:00:00Z")
    assert code == 1 and "| driver | `580.173.02` | end of support | 2028-06-30 |" in out


def test_an_older_release_names_the_newest_of_its_branch(repo: GitRepo) -> None:
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.edit("canary", "gpuOperator", lambda o: o.update(chartVersion="v26.3.1"))
    _, pins, _ = _pins(repo)
    driver, chart = pins[("canary", "driver")], pins[("canary", "operator chart")]
    assert driver["newer"] == "580.173.02" and "GPU Operator v26.3.1 lists 580.159.04" in driver["why"]
    assert chart["newer"] == "v26.3.3" and pins[("canary", "DCGM Exporter")]["newer"] == "4.5.3"


def test_a_chart_the_tables_do_not_know_is_unknown_not_supported(repo: GitRepo) -> None:
    repo.edit("canary", "gpuOperator", lambda o: o.update(chartVersion="v27.1.0"))
    _, pins, _ = _pins(repo)
    assert pins[("canary", "operator chart")]["status"] == "unknown"
    assert pins[("canary", "DCGM Exporter")]["status"] == "unknown"


def test_a_stack_file_that_does_not_load_is_named_and_fails(repo: GitRepo) -> None:
    (repo.root / "Pulumi.broken.yaml").write_text("config:\n  gpu-driver-upgrade:stage: nightly\n")
    code, _, document = _pins(repo)
    assert code == 1
    [broken] = document["unloadable"]
    assert broken["stack"] == "broken" and "stage" in broken["problem"]
