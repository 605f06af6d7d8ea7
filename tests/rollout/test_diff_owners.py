"""models[].owners: validated GitHub teams and users, mentioned in the PR comment (`diff --markdown`, and `owners`
in `diff --json`) of a change that moves the pools their models run on, and only then."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetspec.load import SpecError, spec_from_config
from rollout.cli import app
from tests.conftest import change, stack_config
from tests.rollout.gitrepo import GIT_ENV, GitRepo

runner = CliRunner()
OWNERS = {"embed-triton": ["@acme/embeddings", "@jdoe"], "code-tgi": ["@acme/embeddings", "@code-bot"],
          "llm-chat": ["@acme/chat"]}


def _owned(models: list[dict[str, Any]]) -> None:
    for model in models:
        if model["name"] in OWNERS:
            model["owners"] = OWNERS[model["name"]]


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    found = GitRepo(tmp_path / "fleet")
    found.edit("prod", "models", _owned)
    found.commit("owners of the prod models")
    return found


def _diff(repo: GitRepo, *args: str) -> str:
    result = runner.invoke(app, ["diff", "--project-dir", str(repo.root), *args], env=GIT_ENV)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_releasing_a_pool_mentions_the_owners_of_its_models_only(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.pool("prod", "gpua100", lambda p: p["rollout"].update(released=True))
    out = _diff(repo, "--base", base, "--markdown")
    [told] = [line for line in out.splitlines() if line.startswith("**Model owners told**")]
    assert told == ("**Model owners told**: @acme/embeddings, @code-bot, @jdoe: this change moves pools `gpua100`, "
                    "where their models run.")
    assert "@acme/chat" not in out  # llm-chat runs on gpuh100, which this change does not move
    [stack] = [s for s in json.loads(_diff(repo, "--base", base, "--json"))["stacks"] if s["stack"] == "prod"]
    assert stack["owners"] == ["@acme/embeddings", "@code-bot", "@jdoe"]


def test_a_change_that_moves_no_pool_tells_no_one(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.edit("prod", "models", lambda models: models[0].update(replicas=models[0]["replicas"] + 1))
    out = _diff(repo, "--base", base, "--markdown")
    assert "#### `prod`" in out and "Model owners told" not in out
    [stack] = [s for s in json.loads(_diff(repo, "--base", base, "--json"))["stacks"] if s["stack"] == "prod"]
    assert "owners" not in stack or stack["owners"] is None


@pytest.mark.parametrize("owner", ["acme/chat", "@", "@-jdoe", "@jdoe-", "@a--b", "@acme/", "@" + "x" * 40,
                                   "@acme/chat team"])
def test_an_owner_that_is_no_github_team_or_user_is_refused_at_its_key(owner: str) -> None:
    config = change(stack_config("prod"), "models", lambda models: models[0].update(owners=[owner]))
    with pytest.raises(SpecError) as error:
        spec_from_config(config)
    assert "models[0].owners" in str(error.value) or "models.0.owners" in str(error.value)
    assert "GitHub team or user" in str(error.value)


def test_owners_listed_twice_are_refused() -> None:
    config = change(stack_config("prod"), "models", lambda models: models[0].update(owners=["@jdoe", "@jdoe"]))
    with pytest.raises(SpecError, match="listed twice"):
        spec_from_config(config)
