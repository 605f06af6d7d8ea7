"""`gpu-rollout doctor`: checks of what surrounds the rollout rather than a stack. ``doctor github`` reads the
repository's own GitHub settings (rollout/github_doctor.py)."""

from __future__ import annotations

import os

from refusals.errors import FlagError, InvalidInput
from refusals.exits import Exit
from rollout.cli.options import GitHubRepository
from rollout.cli.running import command

TOKEN_VARIABLES = ("GH_TOKEN", "GITHUB_TOKEN")


@command(GitHubRepository)
def github(target: GitHubRepository) -> Exit:
    """Whether this repository's GitHub settings keep write credentials and the signing key from unreviewed code:
    branch protection on main with code owners' review, each environment's reviewers and deployment branches,
    secrets at repository level, Actions' right to approve pull requests, CODEOWNERS over what decides a deploy.
    Read-only; exit 1 on anything unsafe or unreadable, naming the setting and its fix."""
    from rollout import github_doctor as verb

    if not target.repo or target.repo.count("/") != 1 or not all(target.repo.split("/")):
        raise FlagError("--repo", f"{target.repo or '(none)'} is not OWNER/NAME (or set $GITHUB_REPOSITORY)")
    token = next((os.environ[v] for v in TOKEN_VARIABLES if os.environ.get(v)), None)
    if token is None:
        raise InvalidInput(f"no token: set {' or '.join(TOKEN_VARIABLES)} to a GitHub App's token with read-only "
                           "Administration, Environments, Secrets and Contents (docs/cicd.md)")
    return verb.execute(verb.GitHubApi(target.api_url, token, target.repo), target.as_json)
