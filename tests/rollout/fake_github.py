"""A fake of GitHub's REST API on loopback, for `gpu-rollout doctor github`: the answers of one repository's settings,
as the API gives them (paths, status codes, bodies), changed by each test; every request is recorded."""

from __future__ import annotations

import base64
import copy
import subprocess
import threading
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import PROJECT_DIR
from tests.loopback_http import FakeHandler

REPO = "acme/gpu-fleet"
TOKEN = "ghs_readonly"


def _files() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    return [name for name in listing.stdout.split("\0") if name]


def _environment(name: str, *, reviewers: list[str] = (), protected: bool | None = True,
                 custom: bool = False) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    if reviewers:
        rules.append({"type": "required_reviewers", "prevent_self_review": True,
                      "reviewers": [{"type": "Team", "reviewer": {"slug": r}} for r in reviewers]})
    policy = None if protected is None else {"protected_branches": protected and not custom,
                                             "custom_branch_policies": custom}
    if policy is not None:
        rules.append({"type": "branch_policy"})
    return {"name": name, "protection_rules": rules, "deployment_branch_policy": policy}


def safe_settings() -> dict[str, tuple[int, Any]]:
    """Every setting as docs/cicd.md's setup list leaves it, with this checkout's CODEOWNERS and files on main."""
    codeowners = (PROJECT_DIR / ".github" / "CODEOWNERS").read_bytes()
    base = f"/repos/{REPO}"
    return {
        f"{base}/branches/main/protection": (200, {
            "required_pull_request_reviews": {"require_code_owner_reviews": True, "required_approving_review_count": 1,
                                              "dismiss_stale_reviews": True},
            "enforce_admins": {"enabled": True}, "allow_force_pushes": {"enabled": False},
            "allow_deletions": {"enabled": False}}),
        f"{base}/rules/branches/main": (200, []),
        f"{base}/environments": (200, {"total_count": 5, "environments": [
            _environment("preview", protected=None),
            _environment("canary"),
            _environment("production", reviewers=["gate-owners"]),
            _environment("attest", custom=True),
            _environment("settings"),
        ]}),
        f"{base}/environments/attest/deployment-branch-policies": (200, {
            "total_count": 1, "branch_policies": [{"id": 1, "name": "main", "type": "branch"}]}),
        f"{base}/actions/secrets": (200, {"total_count": 0, "secrets": []}),
        f"{base}/actions/organization-secrets": (200, {"total_count": 0, "secrets": []}),
        f"{base}/environments/preview/secrets": (200, {"total_count": 2, "secrets": [
            {"name": "PULUMI_PREVIEW_TOKEN"}, {"name": "PREVIEW_KUBECONFIG"}]}),
        f"{base}/actions/permissions/workflow": (200, {"default_workflow_permissions": "read",
                                                       "can_approve_pull_request_reviews": False}),
        f"{base}/contents/.github/CODEOWNERS": (200, {"encoding": "base64",
                                                      "content": base64.encodebytes(codeowners).decode()}),
        f"{base}/codeowners/errors": (200, {"errors": []}),
        f"{base}/git/trees/main": (200, {"truncated": False, "tree": [
            {"path": path, "type": "blob"} for path in _files()]}),
    }


class FakeGitHub:
    def __init__(self) -> None:
        self.routes = safe_settings()
        self.requests: list[tuple[str, str, str | None]] = []  # method, path with query, Authorization
        fake = self

        class Handler(FakeHandler):
            def _answer(self) -> None:
                fake.requests.append((self.command, self.path, self.headers.get("Authorization")))
                status, body = fake.routes.get(urlsplit(self.path).path, (404, {"message": "Not Found"}))
                self.send_json(status, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def body(self, path: str) -> Any:
        """The answer to ``/repos/<repo><path>``, to change in place."""
        return self.routes[f"/repos/{REPO}{path}"][1]

    def answer(self, path: str, status: int, body: Any) -> None:
        self.routes[f"/repos/{REPO}{path}"] = (status, copy.deepcopy(body))
