"""`gpu-rollout doctor github`: does this repository's own configuration keep write credentials and the signing key
away from code nobody reviewed? Read-only, through GitHub's REST API with a GitHub App's token (read-only
Administration, Environments, Secrets and Contents), it reports, for the repository it runs in:

- branch protection on main: pull request reviews required, code owners' among them, stale approvals dismissed,
  no bypass, no force push or deletion (a ruleset that requires code-owner review counts as well);
- every environment: its required reviewers and deployment-branch policy. Every environment but ``preview``
  holds write credentials, so it takes deployments from main only; ``production`` needs reviewers; the
  environments the workflows use must exist (a job naming a missing one creates it with no rules at all);
- secrets kept at repository or organization level, which every job reads, a pull request's too; and secrets in
  ``preview`` beyond the read-only ones the preview uses;
- whether GitHub Actions may create and approve pull requests, and the workflows' default token permissions;
- CODEOWNERS on main over every file that decides a deploy (:func:`uncovered`), and the errors GitHub found in it.

Each finding is ``ok``, ``unsafe`` (naming the setting and its fix) or ``unreadable`` (the API refused or failed:
never taken as safe). Any unsafe or unreadable finding exits 1 (docs/cicd.md, "Checking the settings").
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import urllib3

from git_revisions.codeowners import CODEOWNERS_PATHS, CodeOwners, parse
from refusals.exits import Exit

BRANCH = "main"
READ_ONLY_ENVIRONMENT = "preview"  # pull requests run here: read-only identities only
# The environments the workflows use (.github/workflows): each but preview holds write credentials.
ENVIRONMENTS = ("preview", "canary", "production", "attest", "settings")
REVIEWED_ENVIRONMENTS = ("production",)  # a person approves each job there
PREVIEW_SECRETS = frozenset({"PULUMI_PREVIEW_TOKEN", "PREVIEW_KUBECONFIG"})  # what preview.yml reads there
# Never run by a deploying job, so left to ordinary review: the documentation and test tiers. The stack files are
# what the pack judges, not what decides how it judges.
OUTSIDE_DEPLOYS = ("docs/", "tests/", "benchmarks/", "e2e/", "scripts/", ".ci/", "README.md")
_STACK_FILE = re.compile(r"^Pulumi\.[^/]+\.ya?ml$")

Verdict = Literal["ok", "unsafe", "unreadable"]


@dataclass(frozen=True)
class Finding:
    setting: str  # what was read, in the words of GitHub's settings pages
    verdict: Verdict
    seen: str  # what the API said
    fix: str | None = None  # how to make it safe (unsafe), or what the token lacks (unreadable)


def decides_a_deploy(path: str) -> bool:
    """Whether a file of the repository runs in, or is read by, a deploying job."""
    return not (_STACK_FILE.match(path) or any(path == o or (o.endswith("/") and path.startswith(o))
                                               for o in OUTSIDE_DEPLOYS))


def uncovered(owners: CodeOwners, files: Iterable[str]) -> list[str]:
    """The top-level paths (``rollout/``, ``Makefile``) holding a file that decides a deploy and has no code
    owner."""
    found = {path.split("/", 1)[0] + ("/" if "/" in path else "") for path in files
             if decides_a_deploy(path) and not owners.owners_of(path)}
    return sorted(found)


# ---------------------------------------------------------------- the API, read-only


@dataclass(frozen=True)
class Reply:
    status: int  # 0: no answer (the connection failed)
    body: Any
    error: str = ""  # the API's message, or why there was no answer

    @property
    def ok(self) -> bool:
        return self.status == 200

    def why(self) -> str:
        return f"HTTP {self.status}: {self.error}" if self.status else self.error


class GitHubApi:
    """GET requests to the REST API of one repository, with a token; nothing here can write."""

    def __init__(self, url: str, token: str, repository: str, http: urllib3.PoolManager | None = None) -> None:
        self.url = url.rstrip("/")
        self.repository = repository
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                         "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "gpu-rollout-doctor"}
        self._http = http or urllib3.PoolManager(retries=urllib3.Retry(total=2, backoff_factor=0.5),
                                                 timeout=urllib3.Timeout(connect=10, read=30))
        self._unreachable: str | None = None  # once the API gave no answer, the later reads are not tried

    def get(self, path: str, **query: str | int) -> Reply:
        """``path`` below the repository (``/branches/main/protection``), or from the root (``/orgs/...``)."""
        if self._unreachable is not None:
            return Reply(0, None, self._unreachable)
        where = path if path.startswith("/repos/") else f"/repos/{self.repository}{path}"
        try:
            done = self._http.request("GET", self.url + where, fields={k: str(v) for k, v in query.items()} or None, headers=self._headers)
        except urllib3.exceptions.HTTPError as error:
            self._unreachable = f"no answer from {self.url}: {error}"
            return Reply(0, None, self._unreachable)
        try:
            body = json.loads(done.data) if done.data else None
        except ValueError:
            return Reply(done.status, None, "the answer is not JSON")
        message = body.get("message", "") if isinstance(body, dict) else ""
        return Reply(done.status, body, message)


def _unreadable(setting: str, reply: Reply, permission: str) -> Finding:
    return Finding(setting, "unreadable", reply.why(),
                   f"give the GitHub App read-only {permission} on this repository (docs/cicd.md)")


# ---------------------------------------------------------------- each setting


def _protection_problems(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    reviews = body.get("required_pull_request_reviews")
    if not reviews:
        return [("pull requests are not required", "require a pull request before merging, with code owners' review")]
    problems = []
    if not reviews.get("require_code_owner_reviews"):
        problems.append(("code owners' review is not required", "tick 'Require review from Code Owners'"))
    if int(reviews.get("required_approving_review_count") or 0) < 1:
        problems.append(("no approval is required", "require at least one approving review"))
    if not reviews.get("dismiss_stale_reviews"):
        problems.append(("an approval survives later pushes",
                         "tick 'Dismiss stale pull request approvals when new commits are pushed'"))
    if not (body.get("enforce_admins") or {}).get("enabled"):
        problems.append(("administrators can merge past these rules", "tick 'Do not allow bypassing the above settings'"))
    for key, what in (("allow_force_pushes", "force pushes"), ("allow_deletions", "deletion")):
        if (body.get(key) or {}).get("enabled"):
            problems.append((f"{what} of main allowed", f"untick 'Allow {what}'"))
    return problems


def _ruleset_requires_code_owners(reply: Reply) -> bool:
    rules = reply.body if reply.ok and isinstance(reply.body, list) else []
    return any(rule.get("type") == "pull_request"
               and (rule.get("parameters") or {}).get("require_code_owner_review")
               and int((rule.get("parameters") or {}).get("required_approving_review_count") or 0) >= 1
               and (rule.get("parameters") or {}).get("dismiss_stale_reviews_on_push")
               for rule in rules if isinstance(rule, dict))


def branch_protection(api: GitHubApi) -> list[Finding]:
    setting = f"branch protection of {BRANCH}"
    reply = api.get(f"/branches/{BRANCH}/protection")
    if reply.status == 404 and "not protected" in reply.error.lower():
        problems = [("it is not protected", f"protect {BRANCH}: require a pull request with code owners' review")]
    elif not reply.ok:
        return [_unreadable(setting, reply, "Administration")]
    else:
        problems = _protection_problems(reply.body)
    if problems and _ruleset_requires_code_owners(api.get(f"/rules/branches/{BRANCH}")):
        return [Finding(setting, "ok", "a ruleset requires a pull request with code owners' approval, stale "
                        "approvals dismissed")]
    if not problems:
        return [Finding(setting, "ok", "pull requests with code owners' approval; stale approvals dismissed; no "
                        "bypass, force push or deletion")]
    return [Finding(setting, "unsafe", seen, f"Settings → Branches → {BRANCH}: {fix}") for seen, fix in problems]


def _reviewers(environment: Mapping[str, Any]) -> list[str]:
    names = []
    for rule in environment.get("protection_rules") or []:
        if rule.get("type") == "required_reviewers":
            for entry in rule.get("reviewers") or []:
                who = entry.get("reviewer") or {}
                names.append(who.get("login") or who.get("slug") or who.get("name") or "?")
    return names


def _branch_policy(api: GitHubApi, name: str, environment: Mapping[str, Any]) -> Finding:
    setting = f"environment {name}: deployment branches"
    policy = environment.get("deployment_branch_policy")
    if name == READ_ONLY_ENVIRONMENT:
        return Finding(setting, "ok", "any branch (pull requests run here; its identities only read)")
    if not policy:
        return Finding(setting, "unsafe", "any branch may deploy here: a workflow dispatched from a branch gets "
                       "these credentials", f"Settings → Environments → {name} → Deployment branches and tags: "
                       f"'Protected branches only', or 'Selected' with {BRANCH} alone")
    if policy.get("protected_branches"):
        return Finding(setting, "ok", "protected branches only")
    reply = api.get(f"/environments/{quote(name, safe='')}/deployment-branch-policies", per_page=100)
    if not reply.ok:
        return _unreadable(setting, reply, "Environments")
    patterns = [(p.get("name"), p.get("type") or "branch") for p in reply.body.get("branch_policies") or []]
    if patterns and all(pattern == (BRANCH, "branch") for pattern in patterns):
        return Finding(setting, "ok", f"selected branches: {BRANCH}")
    shown = ", ".join(f"{kind} {pattern}" for pattern, kind in patterns) or "none"
    return Finding(setting, "unsafe", f"selected: {shown}", f"Settings → Environments → {name}: select {BRANCH} "
                   "alone (a branch or tag pattern beyond it lets unreviewed code deploy)")


def environments(api: GitHubApi) -> list[Finding]:
    reply = api.get("/environments", per_page=100)
    if not reply.ok:
        return [_unreadable("environments", reply, "Environments")]
    found = {str(e.get("name")): e for e in reply.body.get("environments") or [] if isinstance(e, dict)}
    findings = []
    for name in ENVIRONMENTS:
        if name not in found:
            findings.append(Finding(f"environment {name}", "unsafe", "it does not exist: the first job that names it "
                                    "creates it with no reviewers and no branch policy",
                                    "create it (docs/cicd.md, setup list) before its workflow runs"))
    known = [n for n in ENVIRONMENTS if n in found]
    for name in [*known, *sorted(set(found) - set(known))]:  # the workflows' first, then any other
        environment = found[name]
        reviewers = _reviewers(environment)
        setting = f"environment {name}: required reviewers"
        if reviewers:
            findings.append(Finding(setting, "ok", ", ".join(reviewers)))
        elif name in REVIEWED_ENVIRONMENTS:
            findings.append(Finding(setting, "unsafe", "none: its jobs run without a person's approval",
                                    f"Settings → Environments → {name}: add required reviewers"))
        else:
            findings.append(Finding(setting, "ok", "none (its jobs run on schedule, from main only)"))
        findings.append(_branch_policy(api, name, environment))
    return findings


def _secret_names(reply: Reply) -> list[str]:
    return sorted(s.get("name", "?") for s in (reply.body or {}).get("secrets") or [] if isinstance(s, dict))


def secrets(api: GitHubApi) -> list[Finding]:
    findings = []
    for where, path, fix in (
        ("repository secrets", "/actions/secrets",
         "move it to the environment whose jobs use it (docs/cicd.md), then delete it here"),
        ("organization secrets this repository gets", "/actions/organization-secrets",
         "set it on the environment instead, and take this repository off the organization secret's access"),
    ):
        reply = api.get(path, per_page=100)
        if not reply.ok:
            findings.append(_unreadable(where, reply, "Secrets"))
            continue
        names = _secret_names(reply)
        if not names:
            findings.append(Finding(where, "ok", "none"))
        for name in names:
            findings.append(Finding(f"{where}: {name}", "unsafe", "every job reads it, a pull request's too", fix))
    reply = api.get(f"/environments/{READ_ONLY_ENVIRONMENT}/secrets", per_page=100)
    where = f"environment {READ_ONLY_ENVIRONMENT}: secrets"
    if reply.status == 404 and "not found" in reply.error.lower():
        return findings  # no such environment: environments() says so
    if not reply.ok:
        return [*findings, _unreadable(where, reply, "Secrets")]
    extra = [n for n in _secret_names(reply) if n not in PREVIEW_SECRETS]
    if not extra:
        findings.append(Finding(where, "ok", ", ".join(_secret_names(reply)) or "none"))
    for name in extra:
        findings.append(Finding(f"{where}: {name}", "unsafe", "a pull request's code reads it, and the preview uses "
                                f"only {', '.join(sorted(PREVIEW_SECRETS))}",
                                f"delete it from {READ_ONLY_ENVIRONMENT}; a write credential belongs in a "
                                "main-only environment"))
    return findings


def actions_permissions(api: GitHubApi) -> list[Finding]:
    reply = api.get("/actions/permissions/workflow")
    if not reply.ok:
        return [_unreadable("Actions: workflow permissions", reply, "Administration")]
    body = reply.body or {}
    findings = []
    setting = "Actions: allow GitHub Actions to create and approve pull requests"
    if body.get("can_approve_pull_request_reviews"):
        findings.append(Finding(setting, "unsafe", "allowed: a workflow's token can approve a pull request",
                                "Settings → Actions → General → Workflow permissions: untick it (the attestation "
                                "and rollback pull requests are opened with the GitHub App, docs/cicd.md)"))
    else:
        findings.append(Finding(setting, "ok", "not allowed"))
    setting = "Actions: default workflow permissions"
    if body.get("default_workflow_permissions") != "read":
        findings.append(Finding(setting, "unsafe", f"{body.get('default_workflow_permissions')}: a workflow that "
                                "declares no permissions gets a token that writes",
                                "Settings → Actions → General → Workflow permissions: 'Read repository contents "
                                "and packages permissions'"))
    else:
        findings.append(Finding(setting, "ok", "read"))
    return findings


def _codeowners_file(api: GitHubApi) -> tuple[str, str] | Finding:
    for path in CODEOWNERS_PATHS:
        reply = api.get(f"/contents/{path}", ref=BRANCH)
        if reply.ok and isinstance(reply.body, dict):
            return path, base64.b64decode(reply.body.get("content") or "").decode("utf-8", errors="replace")
        if reply.status != 404:
            return _unreadable("CODEOWNERS", reply, "Contents")
    return Finding("CODEOWNERS", "unsafe", f"none on {BRANCH} ({', '.join(CODEOWNERS_PATHS)})",
                   "add .github/CODEOWNERS covering every path that decides a deploy (docs/cicd.md)")


def codeowners(api: GitHubApi) -> list[Finding]:
    found = _codeowners_file(api)
    if isinstance(found, Finding):
        return [found]
    path, text = found
    owners = parse(text)
    findings = [Finding(f"CODEOWNERS ({path})", "unsafe", problem, "fix the line (GitHub skips it)")
                for problem in owners.problems]
    errors = api.get("/codeowners/errors", ref=BRANCH)
    if not errors.ok:
        findings.append(_unreadable(f"CODEOWNERS ({path}): errors GitHub found", errors, "Contents"))
    found_errors = ((errors.body or {}).get("errors") or []) if errors.ok else []
    for error in found_errors:
        findings.append(Finding(f"CODEOWNERS ({path}) line {error.get('line')}", "unsafe",
                                f"{error.get('kind')}: {error.get('message') or error.get('source') or ''}".strip(),
                                error.get("suggestion") or "fix the line: GitHub ignores it"))
    tree = api.get(f"/git/trees/{BRANCH}", recursive=1)
    setting = f"CODEOWNERS ({path}): what decides a deploy"
    if not tree.ok:
        return [*findings, _unreadable(setting, tree, "Contents")]
    if tree.body.get("truncated"):
        return [*findings, Finding(setting, "unreadable", f"the tree of {BRANCH} is too large for one answer "
                                   "(truncated): coverage not judged", "run the check from a checkout of main")]
    files = [e.get("path", "") for e in tree.body.get("tree") or [] if e.get("type") == "blob"]
    missing = uncovered(owners, files)
    if missing:
        findings.append(Finding(setting, "unsafe", f"no code owner for {', '.join(missing)}",
                                f"add a line for each to {path} (docs/cicd.md)"))
    else:
        findings.append(Finding(setting, "ok", f"every file that decides a deploy has an owner ({len(files)} files)"))
    return findings


CHECKS = (branch_protection, environments, secrets, actions_permissions, codeowners)


def examine(api: GitHubApi) -> list[Finding]:
    return [finding for check in CHECKS for finding in check(api)]


def verdict(findings: Sequence[Finding]) -> Exit:
    return Exit.failed_if(any(f.verdict != "ok" for f in findings))


# ---------------------------------------------------------------- the verb

_SHOWN = {"ok": "ok", "unsafe": "UNSAFE", "unreadable": "UNREADABLE"}


def report(api: GitHubApi, findings: Sequence[Finding]) -> str:
    lines = [f"GitHub settings of {api.repository} ({api.url}), read-only:"]
    for finding in findings:
        lines.append(f"  {_SHOWN[finding.verdict]:<10} {finding.setting}: {finding.seen}")
        if finding.fix:
            lines.append(f"  {'':<10} fix: {finding.fix}")
    unsafe = sum(f.verdict == "unsafe" for f in findings)
    unreadable = sum(f.verdict == "unreadable" for f in findings)
    if unsafe or unreadable:
        lines.append(f"{unsafe} unsafe, {unreadable} unreadable: unreviewed code may reach a write credential "
                     "(an unreadable setting is never taken as safe)")
    else:
        lines.append("every setting read is safe")
    return "\n".join(lines) + "\n"


def execute(api: GitHubApi, as_json: bool) -> Exit:
    import sys

    from rollout import documents, schemas

    findings = examine(api)
    if as_json:
        documents.write(schemas.DoctorGithubDocument(
            repository=api.repository, apiUrl=api.url,
            findings=[schemas.SettingFinding(setting=f.setting, verdict=f.verdict, seen=f.seen, fix=f.fix)
                      for f in findings],
            unsafe=sum(f.verdict == "unsafe" for f in findings),
            unreadable=sum(f.verdict == "unreadable" for f in findings)))
    else:
        sys.stdout.write(report(api, findings))
    return verdict(findings)
