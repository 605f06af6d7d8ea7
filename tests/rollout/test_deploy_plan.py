"""What the deploy workflow deploys (promotion_train/deploy_plan.py): every stack compared with what it last deployed,
on a temporary git repository with real commits and backend histories shaped as `pulumi stack history`
records them (the config each update ran, its result, message and the commit it ran from)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from git_revisions.repository import Repository
from promotion_train import deploy_plan
from pulumi_backend import history, pulumi_config
from rollout import deploy, documents
from rollout.cli import app
from promotion_train.deploy_plan import Deployed
from promotion_train.stacks import stack_files
from fleetspec.load import read_stack_file
from tests.rollout.gitrepo import GIT_ENV, GitRepo
from tests.rollout.json_contract import document_of


def printed(result: deploy_plan.DeployPlan) -> dict[str, Any]:
    """The plan as `deploy-plan --json` prints it."""
    return dict(json.loads(documents.dumps(deploy.plan_document(result))))

STACKS = ("canary", "prod", "eks-canary", "eks-prod", "existing-canary", "existing-prod")
# A Wednesday, 11:30 UTC: inside every example prod stack's maintenance window (Amsterdam and Berlin 09:00-14:00,
# New York 06:00-11:00 local). What a window does to the plan is tested with moments outside it, below.
INSIDE_THE_WINDOWS = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "fleet")


def file_config(repo: GitRepo, stack: str) -> dict[str, pulumi_config.Entry]:
    """The stack file's config as the backend reads it (`pulumi config --json`)."""
    raw = read_stack_file(repo.root / f"Pulumi.{stack}.yaml")
    return pulumi_config.parse_config({k: {"value": v, "secret": False} for k, v in raw.items()})


def update(version: int, config: dict[str, pulumi_config.Entry], commit: str | None, result: str = "succeeded",
           message: str = "", kind: str = "update") -> pulumi_config.Update:
    environment = {"git.head": commit} if commit else {}
    return pulumi_config.Update(version, kind, result, True, f"2026-12-{version:02d}T10:00:00Z", config, message,
                                environment)


class Backend:
    """Each stack's updates as the backend keeps them, newest first; deploy-plan reads them."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.updates: dict[str, list[pulumi_config.Update]] = {}

    def deploy(self, stack: str, commit: str, result: str = "succeeded", message: str = "",
               dirty: bool = False) -> None:
        past = self.updates.setdefault(stack, [])
        done = update(len(past) + 1, file_config(self.repo, stack), commit, result, message)
        if dirty:
            done = pulumi_config.Update(**{**done.__dict__, "environment": {**done.environment, "git.dirty": "true"}})
        past.insert(0, done)

    def deploy_all(self, commit: str) -> None:
        for stack in STACKS:
            self.deploy(stack, commit)

    def deployed(self) -> dict[str, Deployed]:
        return {s: Deployed(self.updates.get(s), file_config(self.repo, s)) for s in STACKS}

    def plan(self, stacks: list[str] | None = None, now: datetime = INSIDE_THE_WINDOWS) -> deploy_plan.DeployPlan:
        git = Repository(self.repo.root)
        head = git.commit("HEAD", "--head")
        chosen = [s for s in stack_files(self.repo.root) if stacks is None or s.name in stacks]
        deployed = {**self.deployed(), **{s.name: Deployed(None) for s in chosen if s.name not in STACKS}}
        return deploy_plan.plan(chosen, deployed, head, git, now)


def decisions(result: deploy_plan.DeployPlan) -> dict[str, deploy_plan.Decision]:
    return {d.stack.name: d for d in result.decisions}


def deployed_names(result: deploy_plan.DeployPlan) -> list[str]:
    return [d.stack.name for d in result.to_deploy]


@pytest.fixture
def backend(repo: GitRepo) -> Backend:
    """Every example stack deployed from the repository's first commit."""
    found = Backend(repo)
    found.deploy_all(repo.git("rev-parse", "HEAD"))
    return found


def test_nothing_differs_nothing_is_deployed(repo: GitRepo, backend: Backend) -> None:
    repo.commit("docs only")  # an empty commit: nothing a stack runs
    result = backend.plan()
    assert deployed_names(result) == []
    assert all(d.reason.startswith("in step with main") for d in result.decisions)


def test_several_commits_in_one_push_deploy_every_stack_they_change_canary_first(repo: GitRepo,
                                                                                 backend: Backend) -> None:
    repo.edit("prod", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("prod on 580.159.04")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("canary on 580.159.04")  # `git diff HEAD^ HEAD` sees only this one
    result = backend.plan()
    assert deployed_names(result) == ["canary", "prod"]  # canary stages before prod stages
    assert "its config differs from what update 1 ran (gpu-driver-upgrade:driver)" in decisions(result)["prod"].reason
    document = document_of("deploy-plan", documents.dumps(deploy.plan_document(result)))  # what `deploy-plan --json` prints
    assert [e["stack"] for e in document["canary"]] == ["canary"] and [e["stack"] for e in document["prod"]] == ["prod"]
    assert document["prod"][0]["environment"] == "production" and document["canary"][0]["environment"] == "canary"
    assert {s["stack"] for s in document["skip"]} == set(STACKS) - {"canary", "prod"}


def test_a_cancelled_run_loses_nothing_the_next_run_deploys_it(repo: GitRepo, backend: Backend) -> None:
    repo.pool("eks-canary", "gpu-canary", lambda p: p.update(nodeCount=p["nodeCount"] + 1))
    repo.commit("eks-canary one node more")  # its run was cancelled by the next push: nothing deployed
    repo.commit("an unrelated change")
    result = backend.plan()
    assert deployed_names(result) == ["eks-canary"]
    assert "gpu-driver-upgrade:nodePools" in decisions(result)["eks-canary"].reason


def test_a_stack_added_is_deployed(repo: GitRepo, backend: Backend) -> None:
    (repo.root / "Pulumi.canary-2.yaml").write_text((repo.root / "Pulumi.canary.yaml").read_text())
    repo.commit("a second canary")
    result = backend.plan()
    assert deployed_names(result) == ["canary-2"]
    assert decisions(result)["canary-2"].reason == "the backend has no such stack yet: the deploy creates it"


def test_a_stack_whose_file_is_unchanged_but_whose_deployment_is_behind(repo: GitRepo, backend: Backend) -> None:
    (repo.root / "fleetspec").mkdir()
    (repo.root / "fleetspec" / "model.py").write_text("# a change to the program\n")
    change = repo.commit("the program changes")[:12]
    result = backend.plan()
    assert deployed_names(result) == ["canary", "eks-canary", "existing-canary", "eks-prod", "existing-prod", "prod"]
    assert f"fleetspec/ (in {change})" in decisions(result)["prod"].reason
    # Deployed since: in step again.
    backend.deploy_all(repo.git("rev-parse", "HEAD"))
    assert deployed_names(backend.plan()) == []


def test_a_failed_update_is_behind_and_so_is_one_run_from_a_dirty_checkout(repo: GitRepo, backend: Backend) -> None:
    head = repo.git("rev-parse", "HEAD")
    backend.deploy("canary", head, result="failed")
    backend.deploy("prod", head, dirty=True)
    found = decisions(backend.plan())
    assert found["canary"].deploy and found["canary"].reason == "update 2 failed"
    assert found["prod"].deploy and "with uncommitted changes" in found["prod"].reason


def test_the_attestation_of_its_canary_is_part_of_a_prod_stack(repo: GitRepo, backend: Backend) -> None:
    (repo.root / "attestations" / "existing-canary").mkdir(parents=True)
    (repo.root / "attestations" / "existing-canary" / "580.173.02.json").write_text("{}\n")
    repo.commit("attestation: existing-canary verified")
    assert deployed_names(backend.plan()) == ["existing-prod"]


def test_a_rolled_back_stack_is_left_alone_until_its_pull_request_merges(repo: GitRepo, backend: Backend) -> None:
    main = repo.git("rev-parse", "HEAD")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    backend.deploy("canary", main, message=history.ROLLBACK_MESSAGE.format(version=1) + ": Xid 79", dirty=True)
    repo.git("checkout", "-q", "--", "Pulumi.canary.yaml")  # main still holds the config rolled back from
    found = decisions(backend.plan())["canary"]
    assert not found.deploy
    assert found.reason.startswith("update 2 rolled it back to update 1; left alone until its stack file on main")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("rollback of canary to update 1")  # the rollback's pull request, merged
    assert not decisions(backend.plan())["canary"].deploy


def test_a_rolled_back_stack_is_released_once_main_holds_what_the_rollback_restored(repo: GitRepo,
                                                                                  backend: Backend) -> None:
    """The rollback restored the driver only; main's stack file reverted the driver (what should not go forward
    again) and moved another key forward: the stack is released and deployed, the restored driver kept."""
    main = repo.git("rev-parse", "HEAD")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    backend.deploy("canary", main, message=history.ROLLBACK_MESSAGE.format(version=1) + ": Xid 79", dirty=True)
    repo.git("checkout", "-q", "--", "Pulumi.canary.yaml")
    document = (repo.root / "Pulumi.canary.yaml").read_text()
    (repo.root / "Pulumi.canary.yaml").write_text(document.replace("CHG-20261202-0142", "CHG-20261209-0007"))
    repo.commit("a new change ticket; the driver still the one rolled back from")
    found = decisions(backend.plan())["canary"]
    assert not found.deploy and found.state == deploy_plan.ROLLED_BACK
    assert "in the keys the rollback restored (gpu-driver-upgrade:driver.version differ)" in found.reason
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("canary: keep 580.159.04 (the rollback's driver)")
    found = decisions(backend.plan())["canary"]
    assert found.deploy and found.state == deploy_plan.DIFFERS
    assert found.reason.startswith("its config differs from what update 2 ran (gpu-driver-upgrade:changeTicket)")


def test_a_destroyed_stack_is_never_brought_back(repo: GitRepo, backend: Backend) -> None:
    backend.updates["canary"].insert(0, update(2, file_config(repo, "canary"), repo.git("rev-parse", "HEAD"),
                                               kind="destroy"))
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("canary on 580.159.04")
    found = decisions(backend.plan())["canary"]
    assert not found.deploy and found.reason.startswith("destroyed in update 2")


def test_a_commit_that_is_not_on_main_is_behind(repo: GitRepo, backend: Backend) -> None:
    backend.deploy("canary", "0123456789abcdef0123456789abcdef01234567")
    found = decisions(backend.plan())["canary"]
    assert found.deploy and "which is not on main's history" in found.reason


# ---------------------------------------------------------------- the pack the prod `up` enforces


def test_a_pull_request_that_weakens_the_pack_is_judged_by_the_pack_before_it(repo: GitRepo,
                                                                              backend: Backend) -> None:
    (repo.root / "policy").mkdir()
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "mandatory"}\n')
    protected = repo.commit("the pack")
    backend.deploy_all(protected)
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "advisory"}\n')
    repo.edit("prod", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("prod on 580.159.04, and the gate advisory")
    repo.commit("an unrelated change merged after it, before its run")
    found = decisions(backend.plan())
    assert found["prod"].pack_ref == protected  # main before the merge that brought the change
    # A stack whose only change is the pack takes main's pack: nothing it judges came with it.
    assert found["eks-prod"].deploy and found["eks-prod"].pack_ref == repo.git("rev-parse", "HEAD")


def test_a_failed_update_is_judged_again_by_the_pack_before_its_change(repo: GitRepo, backend: Backend) -> None:
    (repo.root / "policy").mkdir()
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "mandatory"}\n')
    protected = repo.commit("the pack")
    backend.deploy_all(protected)
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "advisory"}\n')
    repo.edit("prod", "driver", lambda d: d.update(version="580.159.04"))
    change = repo.commit("prod on 580.159.04, and the gate advisory")
    backend.deploy("prod", change, result="failed")  # refused by the protected pack
    repo.commit("a docs change, whose run retries prod")
    assert decisions(backend.plan())["prod"].pack_ref == protected


def _strict_pack(repo: GitRepo) -> str:
    (repo.root / "policy").mkdir(exist_ok=True)
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "mandatory"}\n')
    return repo.commit("the pack")


def _weaken_and_add_a_stack(repo: GitRepo) -> None:
    (repo.root / "policy" / "prod.json").write_text('{"canary-attested": "advisory"}\n')
    (repo.root / "Pulumi.prod-2.yaml").write_text((repo.root / "Pulumi.prod.yaml").read_text())


def test_a_never_deployed_stack_is_judged_by_main_before_the_merge_that_brought_it(repo: GitRepo) -> None:
    """One branch commit adds the stack and weakens the pack; an unrelated merge follows. The stack is judged by
    main's pack at the first parent of the merge that brought its file: neither the branch's commit nor main as
    that merge left it (its last merge's first parent)."""
    strict = _strict_pack(repo)
    repo.git("switch", "-q", "-c", "feature")
    _weaken_and_add_a_stack(repo)
    weakening = repo.commit("prod-2, and the gate advisory")
    repo.git("switch", "-q", "main")
    before_merge = repo.commit("meanwhile on main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    merge = repo.git("rev-parse", "HEAD")
    repo.git("switch", "-q", "-c", "other")
    repo.commit("an unrelated change")
    repo.git("switch", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge other", "other")
    found = decisions(Backend(repo).plan(["prod-2"]))["prod-2"]
    assert found.deploy and found.pack_ref == before_merge
    assert found.pack_ref not in (weakening, merge, strict)  # strict is older: main had moved on before the merge
    # The pack there is main's strict one, not the branch's.
    assert repo.git("show", f"{found.pack_ref}:policy/prod.json") == '{"canary-attested": "mandatory"}'


def test_a_stack_whose_branch_was_fast_forwarded_is_judged_by_main_before_its_commit(repo: GitRepo) -> None:
    strict = _strict_pack(repo)
    _weaken_and_add_a_stack(repo)
    repo.commit("prod-2, and the gate advisory")  # landed on main's line itself (a fast-forward or rebase)
    repo.commit("an unrelated change")
    assert decisions(Backend(repo).plan(["prod-2"]))["prod-2"].pack_ref == strict


def test_a_stack_whose_every_update_failed_is_judged_as_one_never_deployed(repo: GitRepo) -> None:
    strict = _strict_pack(repo)
    _weaken_and_add_a_stack(repo)
    change = repo.commit("prod-2, and the gate advisory")
    backend = Backend(repo)
    backend.deploy("prod-2", change, result="failed")  # refused by the strict pack
    repo.commit("a docs change, whose run retries prod-2")
    git = Repository(repo.root)
    stacks = [s for s in stack_files(repo.root) if s.name == "prod-2"]
    deployed = {"prod-2": Deployed(backend.updates["prod-2"], file_config(repo, "prod-2"))}
    found = deploy_plan.plan(stacks, deployed, git.commit("HEAD", "--head"), git, INSIDE_THE_WINDOWS).decisions[0]
    assert found.deploy and found.pack_ref == strict


def test_a_stack_file_main_never_added_gets_no_pack(repo: GitRepo) -> None:
    """Only in the work tree (or past a shallow history): no pack can be chosen, and the plan says why."""
    (repo.root / "Pulumi.prod-2.yaml").write_text((repo.root / "Pulumi.prod.yaml").read_text())
    found = decisions(Backend(repo).plan(["prod-2"]))["prod-2"]
    assert found.deploy and found.pack_ref is None
    assert "no commit of main's history added Pulumi.prod-2.yaml" in found.reason


# ---------------------------------------------------------------- the verb


def test_the_verb_names_the_project_revision_and_stacks_it_cannot_use(repo: GitRepo, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["deploy-plan", "--project-dir", str(repo.root), "--stack", "nope"], env=GIT_ENV)
    assert result.exit_code == 2 and "--stack: no stack file Pulumi.nope.yaml" in result.stderr
    result = runner.invoke(app, ["deploy-plan", "--project-dir", str(repo.root), "--head", "nope"], env=GIT_ENV)
    assert result.exit_code == 2 and "--head: 'nope' names no commit" in result.stderr
    elsewhere = tmp_path / "not-git"
    elsewhere.mkdir()
    result = runner.invoke(app, ["deploy-plan", "--project-dir", str(elsewhere)], env=GIT_ENV)
    assert result.exit_code == 2 and "is not in a git repository" in result.stderr


def test_stacks_lists_each_stack_file_with_its_stage_and_credentials(repo: GitRepo) -> None:
    (repo.root / "Pulumi.broken.yaml").write_text("config:\n  gpu-driver-upgrade:stage: qa\n")
    result = CliRunner().invoke(app, ["stacks", "--project-dir", str(repo.root), "--json"])
    assert result.exit_code == 0, result.stderr
    found = {s["stack"]: s for s in document_of("stacks", result.stdout)["stacks"]}
    assert found["prod"]["aksClusterName"] == "aks-inference-weu-1" and found["prod"]["environment"] == "production"
    assert (found["eks-canary"]["eksClusterName"], found["eks-canary"]["eksRegion"]) == ("eks-inference-use1-1",
                                                                                         "us-east-1")
    assert found["existing-prod"]["canary"] == "existing-canary" and found["existing-prod"]["minSoakHours"] == 168
    assert "gpu-driver-upgrade:stage" in found["broken"]["problem"] and found["broken"]["environment"] == "production"
    canaries = CliRunner().invoke(app, ["stacks", "--project-dir", str(repo.root), "--stage", "canary", "--json"])
    assert [s["stack"] for s in document_of("stacks", canaries.stdout)["stacks"]] == ["canary", "eks-canary", "existing-canary"]
    bad = CliRunner().invoke(app, ["stacks", "--project-dir", str(repo.root), "--stage", "qa"])
    assert bad.exit_code == 2 and "'qa' is not a stage" in bad.stderr


def test_a_stack_file_that_does_not_load_is_deployed_so_its_up_fails_and_says_why(repo: GitRepo,
                                                                                backend: Backend) -> None:
    (repo.root / "Pulumi.broken.yaml").write_text("config:\n  gpu-driver-upgrade:stage: qa\n")
    repo.commit("a broken stack file")
    result = backend.plan()
    assert deployed_names(result) == ["broken"]
    assert printed(result)["prod"][0]["stack"] == "broken"  # the stricter environment
    assert "its stack file does not load" in decisions(result)["broken"].reason


# ---------------------------------------------------------------- maintenance windows (issue 23)


def test_a_prod_stack_outside_its_window_is_left_alone_with_when_it_opens(repo: GitRepo, backend: Backend) -> None:
    repo.edit("prod", "driver", lambda d: d.update(version="580.159.04"))
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("both on 580.159.04")
    friday_evening = datetime(2026, 12, 11, 18, 0, tzinfo=UTC)  # after the Thursday window in Amsterdam
    found = decisions(backend.plan(now=friday_evening))
    assert found["canary"].deploy  # the canary declares no window
    assert not found["prod"].deploy and found["prod"].pack_ref is None
    assert found["prod"].reason.startswith("its config differs from what update 1 ran (gpu-driver-upgrade:driver)")
    assert ("outside its maintenance window (tue,wed,thu 09:00-14:00 (Europe/Amsterdam)); the next one opens "
            "Tue 2026-12-15 09:00 CET") in found["prod"].reason
    document = printed(backend.plan(now=friday_evening))
    assert document["prod"] == [] and "prod" in {s["stack"] for s in document["skip"]}
    # Inside the window the same change goes up, and the matrix entry names the window.
    tuesday = datetime(2026, 12, 15, 8, 0, tzinfo=UTC)  # 09:00 in Amsterdam
    (entry,) = printed(backend.plan(now=tuesday))["prod"]
    assert entry["stack"] == "prod" and entry["maintenanceWindow"] == "tue,wed,thu 09:00-14:00 (Europe/Amsterdam)"


def test_at_must_be_a_moment_with_a_zone(repo: GitRepo) -> None:
    bad = CliRunner().invoke(app, ["deploy-plan", "--project-dir", str(repo.root), "--at", "next tuesday"], env=GIT_ENV)
    assert bad.exit_code == 2 and "--at" in bad.output and "ISO 8601" in bad.output
    naive = CliRunner().invoke(app, ["deploy-plan", "--project-dir", str(repo.root), "--at", "2026-12-09T11:30:00"],
                               env=GIT_ENV)
    assert naive.exit_code == 2 and "names no time zone" in naive.output
