"""`gpu-rollout doctor github` against a fake of GitHub's REST API on loopback (tests/rollout/fake_github.py): a
repository set up as docs/cicd.md's setup list says passes; each unsafe setting is named with its fix and exits 1;
a setting the token cannot read is reported and exits 1; nothing but GET requests is ever sent."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from refusals.exits import Exit
from rollout.cli import app
from tests.rollout.fake_github import REPO, TOKEN, FakeGitHub
from tests.rollout.json_contract import document_of, error_of


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        yield fake


def doctor(github: FakeGitHub, *args: str, token: str | None = TOKEN) -> tuple[int, str, str]:
    env = {"GH_TOKEN": token or "", "GITHUB_TOKEN": "", "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": github.url}
    done = CliRunner().invoke(app, ["doctor", "github", *args], env=env)
    return done.exit_code, done.stdout, done.stderr


def findings(github: FakeGitHub) -> tuple[int, list[dict[str, Any]]]:
    code, out, _ = doctor(github, "--json")
    return code, document_of("doctor-github", out)["findings"]


def test_a_repository_set_up_as_the_docs_say_is_safe_and_only_read(github: FakeGitHub) -> None:
    code, out, _ = doctor(github)
    assert code == Exit.OK, out
    assert out.startswith(f"GitHub settings of {REPO} ({github.url}), read-only:")
    assert out.rstrip().endswith("every setting read is safe")
    code, found = findings(github)
    assert code == Exit.OK and {f["verdict"] for f in found} == {"ok"}
    settings = {f["setting"] for f in found}
    assert {"branch protection of main", "environment production: required reviewers",
            "environment attest: deployment branches", "repository secrets", "environment preview: secrets",
            "Actions: allow GitHub Actions to create and approve pull requests",
            "CODEOWNERS (.github/CODEOWNERS): what decides a deploy"} <= settings
    assert {method for method, _, _ in github.requests} == {"GET"}
    assert {auth for _, _, auth in github.requests} == {f"Bearer {TOKEN}"}


def _protection(github: FakeGitHub) -> dict[str, Any]:
    return github.body("/branches/main/protection")


def _environment(github: FakeGitHub, name: str) -> dict[str, Any]:
    (found,) = [e for e in github.body("/environments")["environments"] if e["name"] == name]
    return found


def _codeowners_without(line: str) -> Callable[[FakeGitHub], None]:
    def change(github: FakeGitHub) -> None:
        body = github.body("/contents/.github/CODEOWNERS")
        text = base64.b64decode(body["content"]).decode()
        assert line in text
        body["content"] = base64.b64encode(text.replace(line, "").encode()).decode()
    return change


UNSAFE: list[tuple[str, Callable[[FakeGitHub], None], str, str, str]] = [
    ("main unprotected", lambda g: g.answer("/branches/main/protection", 404, {"message": "Branch not protected"}),
     "branch protection of main", "it is not protected", "require a pull request with code owners' review"),
    ("no code-owner review", lambda g: _protection(g)["required_pull_request_reviews"].update(
        require_code_owner_reviews=False), "branch protection of main", "code owners' review is not required",
     "Require review from Code Owners"),
    ("stale approvals kept", lambda g: _protection(g)["required_pull_request_reviews"].update(
        dismiss_stale_reviews=False), "branch protection of main", "survives later pushes", "Dismiss stale"),
    ("production unreviewed", lambda g: _environment(g, "production").update(protection_rules=[
        {"type": "branch_policy"}]), "environment production: required reviewers", "none", "add required reviewers"),
    ("canary from any branch", lambda g: _environment(g, "canary").update(deployment_branch_policy=None),
     "environment canary: deployment branches", "any branch may deploy here", "Protected branches only"),
    ("attest from a pattern", lambda g: g.body("/environments/attest/deployment-branch-policies")[
        "branch_policies"].append({"name": "release/*", "type": "branch"}),
     "environment attest: deployment branches", "branch release/*", "select main alone"),
    ("attest missing", lambda g: g.body("/environments")["environments"].remove(_environment(g, "attest")),
     "environment attest", "does not exist", "create it"),
    ("another environment from any branch", lambda g: g.body("/environments")["environments"].append(
        {"name": "staging", "protection_rules": [], "deployment_branch_policy": None}),
     "environment staging: deployment branches", "any branch may deploy here", "Protected branches only"),
    ("a repository secret", lambda g: g.body("/actions/secrets")["secrets"].append({"name": "PULUMI_ACCESS_TOKEN"}),
     "repository secrets: PULUMI_ACCESS_TOKEN", "every job reads it, a pull request's too",
     "move it to the environment"),
    ("an organization secret", lambda g: g.body("/actions/organization-secrets")["secrets"].append(
        {"name": "SIGNING"}), "organization secrets this repository gets: SIGNING", "every job reads it",
     "take this repository off"),
    ("a write secret in preview", lambda g: g.body("/environments/preview/secrets")["secrets"].append(
        {"name": "PULUMI_CONFIG_PASSPHRASE"}), "environment preview: secrets: PULUMI_CONFIG_PASSPHRASE",
     "a pull request's code reads it", "delete it from preview"),
    ("Actions approve pull requests", lambda g: g.body("/actions/permissions/workflow").update(
        can_approve_pull_request_reviews=True), "Actions: allow GitHub Actions to create and approve pull requests",
     "a workflow's token can approve", "untick it"),
    ("default write token", lambda g: g.body("/actions/permissions/workflow").update(
        default_workflow_permissions="write"), "Actions: default workflow permissions", "write",
     "Read repository contents"),
    ("rollout/ unowned", _codeowners_without("/rollout/                   @gpu-fleet/gate-owners\n"),
     "CODEOWNERS (.github/CODEOWNERS): what decides a deploy", "no code owner for rollout/", "add a line"),
    ("a new top-level package", lambda g: g.body("/git/trees/main")["tree"].append(
        {"path": "release_tools/cut.py", "type": "blob"}),
     "CODEOWNERS (.github/CODEOWNERS): what decides a deploy", "no code owner for release_tools/", "add a line"),
    ("an unknown owner", lambda g: g.body("/codeowners/errors")["errors"].append(
        {"line": 12, "kind": "Unknown owner", "message": "Unknown owner on line 12: @gpu-fleet/gate-owners"}),
     "CODEOWNERS (.github/CODEOWNERS) line 12", "Unknown owner", "GitHub ignores it"),
]


@pytest.mark.parametrize(("change", "setting", "seen", "fix"), [case[1:] for case in UNSAFE],
                         ids=[case[0] for case in UNSAFE])
def test_each_unsafe_setting_is_named_with_its_fix_and_fails(github: FakeGitHub, change: Callable[[FakeGitHub], None],
                                                             setting: str, seen: str, fix: str) -> None:
    change(github)
    code, found = findings(github)
    assert code == Exit.FAILED
    unsafe = [f for f in found if f["verdict"] != "ok"]
    assert [(f["setting"], f["verdict"]) for f in unsafe] == [(setting, "unsafe")]
    assert seen in unsafe[0]["seen"] and fix in unsafe[0]["fix"]
    code, out, _ = doctor(github)
    assert code == Exit.FAILED and f"UNSAFE     {setting}: " in out and "1 unsafe, 0 unreadable" in out


def test_a_ruleset_that_requires_code_owners_protects_main(github: FakeGitHub) -> None:
    github.answer("/branches/main/protection", 404, {"message": "Branch not protected"})
    github.answer("/rules/branches/main", 200, [{"type": "pull_request", "parameters": {
        "require_code_owner_review": True, "required_approving_review_count": 1,
        "dismiss_stale_reviews_on_push": True}}])
    code, found = findings(github)
    assert code == Exit.OK
    assert [f["seen"] for f in found if f["setting"] == "branch protection of main"] == [
        "a ruleset requires a pull request with code owners' approval, stale approvals dismissed"]


def test_a_setting_the_token_cannot_read_is_reported_and_fails(github: FakeGitHub) -> None:
    github.answer("/actions/secrets", 403, {"message": "Resource not accessible by integration"})
    code, found = findings(github)
    assert code == Exit.FAILED
    (unreadable,) = [f for f in found if f["verdict"] != "ok"]
    assert unreadable == {"setting": "repository secrets", "verdict": "unreadable",
                          "seen": "HTTP 403: Resource not accessible by integration",
                          "fix": "give the GitHub App read-only Secrets on this repository (docs/cicd.md)"}


def test_an_api_that_does_not_answer_is_never_taken_as_safe(github: FakeGitHub) -> None:
    url = github.url
    github.server.shutdown()
    github.server.server_close()
    done = CliRunner().invoke(app, ["doctor", "github", "--json", "--api-url", url], env={
        "GH_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO})
    found = document_of("doctor-github", done.stdout)
    assert done.exit_code == Exit.FAILED and found["unreadable"] == len(found["findings"]) > 0
    assert all(f["seen"].startswith(f"no answer from {url}") for f in found["findings"])
    github.server = _Stopped()  # already closed


class _Stopped:
    def shutdown(self) -> None:
        pass

    def server_close(self) -> None:
        pass


def test_without_a_token_or_a_repository_it_refuses_and_reads_nothing(github: FakeGitHub) -> None:
    code, out, err = doctor(github, "--json", token=None)
    assert code == Exit.INVALID and "no token: set GH_TOKEN or GITHUB_TOKEN" in err
    error_of(out, Exit.INVALID, "invalid-input")
    code, _, err = doctor(github, "--repo", "just-a-name")
    assert code == Exit.INVALID and "--repo: just-a-name is not OWNER/NAME" in err
    assert github.requests == []
