"""Issue 24 point 2: `plan` and `diff` judge one stack file alike. Both take the last deployment and the canary's
outputs from the same place (given, --from-backend, else the offline assumption: the stack file at the base
revision, the canary's stack file on the same side), both say which, and a mandatory finding that rests on an
assumption says so and names the flags that answer it."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.rollout.gitrepo import GIT_ENV, GitRepo

runner = CliRunner()
GATE = "canary-attested"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "fleet")


def plan(repo: GitRepo, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(app, ["plan", "--project-dir", str(repo.root), "--stack", "prod", "--json", *args],
                           env={**GIT_ENV, **(env or {})})
    return result.exit_code, json.loads(result.stdout) if result.stdout else {}, result.stderr


def diff(repo: GitRepo, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["diff", "--project-dir", str(repo.root), "--json", *args], env=GIT_ENV)
    assert result.exit_code == 0, result.stderr
    (prod,) = [s for s in json.loads(result.stdout)["stacks"] if s["stack"] == "prod"]
    return prod


def refused(violations: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(v["policy"], v["resource"]) for v in violations if v["enforcement"] == "mandatory"}


def diff_refused(stack: dict[str, Any]) -> set[tuple[str, str]]:
    return refused(stack["violations"]["introduced"] + stack["violations"]["standing"])


def bump_prod(repo: GitRepo) -> None:
    repo.edit("prod", "driver", lambda d: d.update(version="595.91.07"))


def test_a_moved_canary_is_judged_alike_by_plan_and_diff(repo: GitRepo) -> None:
    """The issue's case: the canary moves to a new driver, prod changes only its ticket. Prod's driver ran in its
    last deployment (base), so the gate's findings are advice in both."""
    repo.edit("canary", "driver", lambda d: d.update(version="595.91.07", previousVersion="580.173.02"))
    path = repo.root / "Pulumi.prod.yaml"
    path.write_text(path.read_text().replace("CHG-20261209-0077", "CHG-20261209-0078"))
    code, document, _ = plan(repo)
    stack = diff(repo)
    assert refused(document["violations"]) == diff_refused(stack)
    assert not any(p == GATE for p, _ in refused(document["violations"]))
    gate = [v for v in document["violations"] if v["policy"] == GATE and "runs 595.91.07, not 580.173.02" in v["message"]]
    assert gate and all(v["enforcement"] == "advisory" for v in gate)
    assert code == (1 if refused(document["violations"]) else 0)


def test_a_promotion_is_refused_alike_and_says_what_it_rests_on(repo: GitRepo) -> None:
    bump_prod(repo)
    code, document, _ = plan(repo)
    stack = diff(repo)
    assert code == 1
    assert refused(document["violations"]) == diff_refused(stack) and (GATE, "gpu-driver-upgrade-promotion") in \
        refused(document["violations"])
    last, canary = document["basis"]["sources"]
    assert last["assumed"] and last["source"].startswith("Pulumi.prod.yaml at the merge base with main")
    assert last["answeredBy"] == ["--previous-outputs FILE", "--from-backend"]
    assert canary["assumed"] and canary["source"] == "what Pulumi.canary.yaml declares, rendered offline"
    for v in document["violations"]:
        if v["enforcement"] == "mandatory" and v["policy"] == GATE:
            assert "rests on the assumed last deployment" in v["assumption"]
            assert v["assumption"].endswith("--from-backend answers it")
    moved = [v for v in document["violations"] if "runs 580.173.02, not 595.91.07" in v["message"]]
    assert moved and "the assumed canary 'canary'" in moved[0]["assumption"] and "--canary-outputs FILE" in \
        moved[0]["assumption"]
    risks = [r["text"] for r in stack["risks"] if r["policy"] == GATE and r["enforcement"] == "mandatory"]
    assert risks and all("rests on the assumed last deployment" in text for text in risks)


def test_both_print_what_they_assumed(repo: GitRepo) -> None:
    bump_prod(repo)
    result = runner.invoke(app, ["plan", "--project-dir", str(repo.root), "--stack", "prod"],
                           env={**GIT_ENV, "COLUMNS": "400"})
    lines = result.stdout.splitlines()
    assert lines[1].startswith("last deployment: Pulumi.prod.yaml at the merge base with main")
    assert "(offline assumption: --previous-outputs FILE or --from-backend reads what is deployed)" in lines[1]
    markdown = runner.invoke(app, ["diff", "--project-dir", str(repo.root), "--markdown"], env=GIT_ENV).stdout
    judged = [line for line in markdown.splitlines() if line.startswith("Judged against: last deployment: ")]
    assert judged and "offline assumption" in judged[0]


def test_the_last_deployment_given_answers_the_assumption(repo: GitRepo, tmp_path: Path) -> None:
    bump_prod(repo)
    _, document, _ = plan(repo)
    deployed = tmp_path / "deployed.json"
    deployed.write_text(json.dumps(document["outputs"]))  # as if this very file had been deployed already
    code, again, _ = plan(repo, "--previous-outputs", str(deployed))
    last = again["basis"]["sources"][0]
    assert not last["assumed"] and last["source"] == f"--previous-outputs {deployed}"
    assert not any(p == GATE for p, _ in refused(again["violations"]))  # a driver it runs is no promotion
    stack = diff(repo, "--stack", "prod", "--previous-outputs", str(deployed))
    assert refused(again["violations"]) == diff_refused(stack)
    assert stack["basis"][0]["source"] == f"--previous-outputs {deployed}"


FAKE_PULUMI = """#!{python}
import json, os, sys
args = sys.argv[1:]
stack = args[args.index("--stack") + 1]
path = os.path.join({folder!r}, stack + ".json")
if args[:3] not in (["stack", "output", "--json"], ["stack", "history", "--json"]):
    sys.exit(2)
if not os.path.exists(path):
    sys.stderr.write("error: no stack named '" + stack + "' found\\n")
    sys.exit(255)
if args[1] == "history":
    history = os.path.join({folder!r}, stack + ".history.json")
    sys.stdout.write(open(history).read() if os.path.exists(history) else "[]")
else:
    sys.stdout.write(open(path).read())
"""


def fake_pulumi(tmp_path: Path, outputs: dict[str, dict[str, Any]],
                histories: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, str]:
    """A `pulumi` on PATH that answers `pulumi stack output --json --stack S` from ``outputs`` and `pulumi stack
    history --json --stack S` from ``histories`` (none: no update), as the real CLI does (a stack the backend
    lacks: its error line)."""
    folder, bin_dir = tmp_path / "backend", tmp_path / "bin"
    folder.mkdir()
    bin_dir.mkdir()
    for stack, values in outputs.items():
        (folder / f"{stack}.json").write_text(json.dumps(values))
    for stack, updates in (histories or {}).items():
        (folder / f"{stack}.history.json").write_text(json.dumps(updates))
    cli = bin_dir / "pulumi"
    cli.write_text(FAKE_PULUMI.format(python=sys.executable, folder=str(folder)))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_from_backend_reads_both_from_the_stacks(repo: GitRepo, tmp_path: Path) -> None:
    bump_prod(repo)
    _, document, _ = plan(repo)
    env = fake_pulumi(tmp_path, {"prod": document["outputs"]})  # no canary stack in the backend
    code, found, err = plan(repo, "--from-backend", env=env)
    assert code in (0, 1), err
    last, canary = found["basis"]["sources"]
    assert (last["assumed"], canary["assumed"]) == (False, False)
    assert last["source"] == ("stack 'prod' in the backend (pulumi stack output --json); changes not marked (none: "
                              "the backend holds no succeeded update of stack 'prod')")
    assert canary["source"] == "none: the backend holds no stack 'canary' (not deployed)"
    assert not any("assumption" in v for v in found["violations"])
    shows_none = [v for v in found["violations"] if v["policy"] == GATE and "shows no driver" in v["message"]]
    assert shows_none and all(v["enforcement"] == "advisory" for v in shows_none)  # prod already runs it


def _update(commit: str, dirty: bool = False, result: str = "succeeded") -> dict[str, Any]:
    """One update as `pulumi stack history --json` lists it, with the checkout's commit the CLI records."""
    return {"version": 0, "kind": "update", "result": result, "startTime": "2026-12-01T10:00:00Z",
            "endTime": "2026-12-01T10:05:00Z", "message": "deploy", "config": {},
            "environment": {"git.head": commit, "git.dirty": "true" if dirty else "false"}}


def test_from_backend_marks_changes_against_the_stack_file_its_last_update_ran(repo: GitRepo, tmp_path: Path) -> None:
    deployed = repo.git("rev-parse", "HEAD")
    _, before, _ = plan(repo)
    bump_prod(repo)
    repo.commit("prod on 595")
    env = fake_pulumi(tmp_path, {"prod": before["outputs"]},
                      {"prod": [_update("f" * 40, result="failed"), _update(deployed)]})
    code, found, err = plan(repo, "--from-backend", env=env)
    assert code in (0, 1), err
    last = found["basis"]["sources"][0]
    assert last["source"] == (f"stack 'prod' in the backend (pulumi stack output --json); changes marked against "
                              f"Pulumi.prod.yaml at {deployed[:12]}, the commit of update 1 of stack 'prod' (pulumi "
                              "stack history)")
    changed = {(c["type"], c["name"]) for c in found["changes"] if c["marker"] == "update"}
    assert ("kubernetes:nvidia.com/v1alpha1:NVIDIADriver", "gpu-gput4") in changed  # the driver it moves
    # The failed update after it ran nothing: the markers rest on the last succeeded one.


def test_from_backend_does_not_mark_changes_an_update_from_a_dirty_checkout_ran(repo: GitRepo, tmp_path: Path) -> None:
    deployed = repo.git("rev-parse", "HEAD")
    _, before, _ = plan(repo)
    bump_prod(repo)
    env = fake_pulumi(tmp_path, {"prod": before["outputs"]}, {"prod": [_update(deployed, dirty=True)]})
    code, found, err = plan(repo, "--from-backend", env=env)
    assert code in (0, 1), err
    assert found["changes"] is None
    assert found["basis"]["sources"][0]["source"].endswith(
        f"changes not marked (none: update 1 of stack 'prod' ran from a checkout with changes beyond "
        f"{deployed[:12]} (git.dirty))")


def test_from_backend_without_the_pulumi_cli_exits_1_saying_so(repo: GitRepo, tmp_path: Path) -> None:
    code, document, err = plan(repo, "--from-backend", env={"PATH": str(tmp_path)})
    assert code == 1 and document["error"]["code"] == 1 and document["error"]["kind"] == "backend"
    assert "--from-backend: the pulumi CLI is not installed or not on PATH" in err


def test_a_missing_canary_file_names_the_flag_that_answers_it(repo: GitRepo) -> None:
    bump_prod(repo)
    (repo.root / "Pulumi.canary.yaml").unlink()
    code, document, _ = plan(repo)
    assert code == 1
    none = [v for v in document["violations"] if "shows no driver" in v["message"]]
    assert none and none[0]["enforcement"] == "mandatory" and "--canary-outputs FILE" in none[0]["assumption"]
    assert document["basis"]["sources"][1]["source"].startswith("none: no Pulumi.canary.yaml")


def test_an_unmodified_copy_of_prod_elsewhere_passes_as_the_original(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_DIR)
    copy = tmp_path / "Pulumi.prod.yaml"
    copy.write_text((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    result = runner.invoke(app, ["plan", "--stack-file", str(copy), "--json"])
    assert result.exit_code == 0, result.stdout[-2000:]
    last, canary = json.loads(result.stdout)["basis"]["sources"]
    assert last["source"].startswith("a first deployment (none: ") and "outside the project folder" in last["source"]
    assert canary["source"] == "what Pulumi.canary.yaml declares, rendered offline"  # found in the project


def test_without_git_plan_assumes_a_first_deployment_and_says_why(repo: GitRepo, tmp_path: Path) -> None:
    """Plan needs no git: where it cannot be run, the last deployment is a first one, said as such."""
    code, document, err = plan(repo, env={"PATH": str(tmp_path)})  # a PATH with no git on it
    assert code in (0, 1), err
    last = document["basis"]["sources"][0]
    assert last["assumed"] and last["source"].startswith("a first deployment (none: git cannot be run")
