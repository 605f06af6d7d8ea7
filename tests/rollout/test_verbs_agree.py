"""Issue 32, point 2: one verdict. `plan`, `diff` and `fleet plan` judge a change to a stack file with one function
(:func:`rollout.plan.judge`) on the same inputs (the last deployment and the canary as `plan` takes them), so on
generated changes they refuse the same findings; `fleet plan` moves a stack from its last deployment's driver, as
`plan` does, and says where it read it; `simulate` never recommends what the pack refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rollout.cli import app
from tests.rollout.gitrepo import GIT_ENV, GitRepo

runner = CliRunner()
CANARY, PROD = "canary", "prod"
NEW_DRIVER = "595.91.07"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The AKS canary and prod stacks alone, and a fleet file of two waves, committed on main."""
    repo = GitRepo(tmp_path_factory.mktemp("verbs") / "fleet")
    for path in repo.root.glob("Pulumi.*.yaml"):
        if path.stem.removeprefix("Pulumi.") not in (CANARY, PROD):
            path.unlink()
    fleet = {"waves": [{"name": "canary", "stacks": [CANARY], "waitFor": {"verify": "none", "attestation": True}},
                       {"name": "prod", "stacks": [PROD], "waitFor": {"verify": "none"}}]}
    (repo.root / "Fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
    repo.commit("two stacks, two waves")
    return repo


def invoke(repo: GitRepo, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, [*args, "--project-dir", str(repo.root), "--json"], env=GIT_ENV)
    assert result.stdout, result.stderr
    return result.exit_code, json.loads(result.stdout)


def refused(violations: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(v["policy"], v["resource"]) for v in violations if v["enforcement"] == "mandatory"}


def verdicts(repo: GitRepo) -> dict[str, Any]:
    """Each verb's verdict on prod as the work tree has it, the committed file as its last deployment."""
    code, planned = invoke(repo, "plan", "--stack", PROD)
    _, diffed = invoke(repo, "diff")
    prod_diff = [s for s in diffed["stacks"] if s["stack"] == PROD]
    fleet_code, fleet = invoke(repo, "fleet", "plan")
    (in_fleet,) = [s for wave in fleet["waves"] for s in wave["stacks"] if s["stack"] == PROD]
    return {
        "plan": (code == 1, refused(planned["violations"])),
        # diff renders only a stack whose config differs; unchanged, plan's verdict is that of the committed file.
        "diff": (None, refused(prod_diff[0]["violations"]["introduced"] + prod_diff[0]["violations"]["standing"]))
        if prod_diff else None,
        "fleet": (in_fleet["refused"], refused(in_fleet["violations"])),
        "fleet_code": fleet_code,
        "fleet_from": in_fleet["driver"],
        "plan_last": planned["basis"]["sources"][0]["source"],
    }


def edit_prod(repo: GitRepo, driver: str | None, release_a100: bool, parallel: int | None, ticket: bool) -> None:
    path = repo.root / f"Pulumi.{PROD}.yaml"
    document = yaml.safe_load(path.read_text())
    config = document["config"]
    if driver is not None:
        config["gpu-driver-upgrade:driver"]["version"] = driver
    for pool in config["gpu-driver-upgrade:nodePools"]:
        if pool["name"] == "gpua100":
            pool["rollout"]["released"] = release_a100
        if pool["name"] == "gput4" and parallel is not None:
            pool["upgradePolicy"] = {"maxParallelUpgrades": parallel, "maxUnavailable": parallel}
    if not ticket:
        config.pop("gpu-driver-upgrade:changeTicket", None)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(driver=st.sampled_from([None, NEW_DRIVER]), release_a100=st.booleans(),
       parallel=st.sampled_from([None, 1, 2, 4]), ticket=st.booleans())
def test_plan_diff_and_fleet_plan_refuse_alike(repo: GitRepo, driver: str | None, release_a100: bool,
                                               parallel: int | None, ticket: bool) -> None:
    repo.git("checkout", "--", ".")
    edit_prod(repo, driver, release_a100, parallel, ticket)
    try:
        found = verdicts(repo)
    finally:
        repo.git("checkout", "--", ".")
    plan_refused, plan_findings = found["plan"]
    assert found["fleet"] == (plan_refused, plan_findings)
    assert found["fleet_code"] == (1 if plan_refused else 0)  # the canary wave is the committed, admitted file
    if found["diff"] is not None:
        assert found["diff"][1] == plan_findings
    # fleet plan moves prod from its last deployment's driver, the one plan judged against, and says so.
    assert found["fleet_from"]["from"] == "580.173.02"
    assert found["fleet_from"]["fromSource"] == f"last deployment: {found['plan_last']} (assumed offline)"


def test_fleet_plan_moves_from_the_last_deployment_not_previous_version(repo: GitRepo) -> None:
    """The issue's case: the committed prod stack runs 580.173.02; a file that says previousVersion 570.x while
    moving to a new driver is judged (and shown) from 580.173.02, as plan judges it."""
    path = repo.root / f"Pulumi.{PROD}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["gpu-driver-upgrade:driver"].update(version=NEW_DRIVER, previousVersion="570.195.03")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        found = verdicts(repo)
        text = runner.invoke(app, ["fleet", "plan", "--project-dir", str(repo.root)], env={**GIT_ENV, "COLUMNS": "100"})
    finally:
        repo.git("checkout", "--", ".")
    assert found["fleet_from"]["from"] == "580.173.02" and found["fleet_from"]["to"] == NEW_DRIVER
    assert found["fleet"] == found["plan"] and found["plan"][0]  # a promotion no canary attested: refused alike
    assert f"driver 580.173.02 -> {NEW_DRIVER}" in text.stdout
    assert "from: last deployment: Pulumi.prod.yaml at the merge base with main" in text.stdout


def test_simulate_recommends_only_what_the_pack_admits(repo: GitRepo) -> None:
    """Each per-policy value simulate recommends, written into the stack file, leaves the pack's parallelism
    rule nothing to refuse on that policy's pools; where it recommends none, the pack refuses even one node."""
    edit_prod(repo, None, True, None, True)  # gpua100 released too
    try:
        _, simulated = invoke(repo, "simulate", "--stack", PROD)
        recommended = simulated["recommended"]["perPolicy"]
        path = repo.root / f"Pulumi.{PROD}.yaml"
        document = yaml.safe_load(path.read_text())
        for choice in recommended:
            for pool in document["config"]["gpu-driver-upgrade:nodePools"]:
                if pool["name"] in choice["pools"] and choice["maxParallelUpgrades"] is not None:
                    pool["upgradePolicy"] = {"maxParallelUpgrades": choice["maxParallelUpgrades"],
                                             "maxUnavailable": choice["maxUnavailable"]}
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        _, planned = invoke(repo, "plan", "--stack", PROD)
    finally:
        repo.git("checkout", "--", ".")
    parallelism = [v for v in planned["violations"] if v["policy"] == "parallelism-within-spare-capacity"
                   and v["enforcement"] == "mandatory"]
    for choice in recommended:
        on_its_pools = [v for v in parallelism if any(f"pool {p} " in v["message"] for p in choice["pools"])]
        if choice["maxParallelUpgrades"] is None:
            assert on_its_pools, choice  # none recommended: the pack refuses one node at a time too
        else:
            assert on_its_pools == [], choice
