"""The quarterly review workflow: every quarter `gpu-rollout review` goes into one issue, opened the first time and
updated after (its script run here against a loopback fake of GitHub's REST API), with the least it needs: read the
repository, write issues."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from tests.conftest import PROJECT_DIR
from tests.loopback_http import FakeHandler

WORKFLOW = PROJECT_DIR / ".github" / "workflows" / "quarterly-review.yml"
SCRIPT = PROJECT_DIR / ".github" / "scripts" / "quarterly-issue.sh"
TITLE = "Quarterly review: pinned GPU driver, CUDA, operator and Fabric Manager versions"


class FakeGitHub:
    """Issues of one repository, as the REST API lists, creates and edits them; only the right token is let in."""

    def __init__(self) -> None:
        self.issues: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []
        fake = self

        class Handler(FakeHandler):
            def _allowed(self) -> bool:
                fake.calls.append((self.command, self.path))
                if self.headers.get("Authorization") != "Bearer job-token":
                    self.send_json(401, {"message": "Bad credentials"})
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802 - the handler's names
                if not self._allowed():
                    return
                parts = urlsplit(self.path)
                assert parts.path == "/repos/acme/fleet/issues"
                label = parse_qs(parts.query)["labels"][0]
                self.send_json(200, [i for i in fake.issues if i["state"] == "open"
                                   and label in [lb["name"] for lb in i["labels"]]])

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def do_POST(self) -> None:  # noqa: N802
                if not self._allowed():
                    return
                sent = self._body()
                issue = {"number": len(fake.issues) + 1, "state": "open", "title": sent["title"],
                         "body": sent["body"], "labels": [{"name": n} for n in sent["labels"]]}
                fake.issues.append(issue)
                self.send_json(201, issue)

            def do_PATCH(self) -> None:  # noqa: N802
                if not self._allowed():
                    return
                number = int(self.path.rsplit("/", 1)[1])
                issue = fake.issues[number - 1]
                issue.update({k: v for k, v in self._body().items() if k in ("title", "body")})
                self.send_json(200, issue)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def _run(github: FakeGitHub, report: Path, token: str = "job-token") -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": "acme/fleet",
           "GH_TOKEN": token}
    return subprocess.run([str(SCRIPT), str(report)], capture_output=True, text=True, env=env, check=False,
                          timeout=60)


def test_the_first_quarter_opens_the_issue_and_the_next_updates_it(github: FakeGitHub, tmp_path: Path) -> None:
    # A pull request of the same title is no issue (the API lists both).
    github.issues.append({"number": 1, "state": "open", "title": TITLE, "body": "", "pull_request": {},
                          "labels": [{"name": "quarterly-review"}]})
    report = tmp_path / "review.md"
    report.write_text("### Pinned versions (2026-01-02)\n| driver | `580.173.02` | supported |\n")
    done = _run(github, report)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "opened issue #2"
    issue = github.issues[1]
    assert issue["title"] == TITLE and issue["body"] == report.read_text()
    assert issue["labels"] == [{"name": "quarterly-review"}]

    report.write_text("### Pinned versions (2026-04-02)\n| driver | `580.173.02` | end of support |\n")
    done = _run(github, report)
    assert done.returncode == 0 and done.stdout.strip() == "updated issue #2"
    assert len(github.issues) == 2 and github.issues[1]["body"] == report.read_text()


def test_a_refused_token_fails_the_step_and_writes_nothing(github: FakeGitHub, tmp_path: Path) -> None:
    report = tmp_path / "review.md"
    report.write_text("report\n")
    done = _run(github, report, token="stolen")
    assert done.returncode != 0 and github.issues == []


def test_the_workflow_runs_the_review_quarterly_with_least_privilege() -> None:
    workflow = yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)
    assert workflow["on"]["schedule"] == [{"cron": "29 7 2 1,4,7,10 *"}] and "workflow_dispatch" in workflow["on"]
    assert workflow["permissions"] == {}
    job = workflow["jobs"]["review"]
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    assert "environment" not in job  # no cloud or cluster credential: the review is offline
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "gpu-rollout review >" in runs and ".github/scripts/quarterly-issue.sh" in runs
    # The issue is updated before a failing review fails the run.
    names = [step.get("name", "") for step in job["steps"]]
    assert names.index("Open or update the review issue") < names.index(
        "A pin past its end of support, or unsupported, fails the run")
