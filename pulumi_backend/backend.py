"""A stack's records in the Pulumi backend, read through the Automation API as the CLI's own documents.

`gpu-rollout plan --from-backend` and `diff --from-backend` read a stack's outputs (:func:`stack_outputs`).
`gpu-rollout rollback` and `gpu-rollout deploy-plan` read the same things: a stack's update history (every
page, each update with the config it ran and the CLI's metadata, such as the commit it ran from), its
config as the stack file holds it, and whether the file backend holds an update's lock. Each reading is
turned back into the JSON the CLI prints (:mod:`pulumi_backend.pulumi_config` parses it), so the decisions are
tested on plain documents. A CLI failure becomes :class:`BackendError`, one line with the CLI's own
``error:`` text; secrets that cannot be decrypted exit 2 (input to fix), anything else 1.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from pulumi_backend import pulumi_config
from refusals.errors import BackendRefusal
from refusals.exits import Exit

if TYPE_CHECKING:
    from pulumi import automation as auto

PROJECT_NAME = "gpu-driver-upgrade"
HISTORY_PAGE = 100
CLI = "pulumi"
NO_SUCH_STACK = "no stack named"  # the CLI's words for a stack the backend does not hold
UNDECRYPTABLE_HINTS = ("passphrase", "decrypt", "secrets manager", "secrets provider")


class BackendError(BackendRefusal):
    """The backend could not be read as asked; ``code`` is the verb's exit code (1 unless given)."""

    def __init__(self, message: str, code: Exit = Exit.FAILED) -> None:
        super().__init__(message, code=code)


def first_error_line(error: Exception) -> str:
    """The CLI's own `error: ...` line out of a CommandError (which holds the code, stdout and stderr)."""
    text = str(error)
    for line in text.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith(("code:", "stdout:", "stderr:"))]
    return lines[-1] if lines else " ".join(text.split())[:300]


def cli_refusal(what: str, error: Exception) -> BackendError:
    line = first_error_line(error)
    if any(hint in line.lower() for hint in UNDECRYPTABLE_HINTS):
        return BackendError(f"{what}: secrets cannot be decrypted ({line}); give the stack's passphrase "
                            "(PULUMI_CONFIG_PASSPHRASE) or access to its secrets provider", Exit.INVALID)
    return BackendError(f"{what}: the pulumi CLI failed: {line}")


def summary_to_json(summary: auto.UpdateSummary) -> dict[str, Any]:
    """An Automation API UpdateSummary back in the CLI's JSON shape, which pulumi_backend.pulumi_config reads."""
    return {
        "version": summary.version,
        "kind": summary.kind,
        "result": summary.result,
        "startTime": summary.start_time.isoformat() if summary.start_time else "",
        "message": summary.message,
        "endTime": summary.end_time.isoformat() if summary.end_time else None,
        "environment": dict(summary.environment or {}),
        "config": {key: {"value": value.value, "secret": value.secret} for key, value in summary.config.items()},
    }


def config_to_json(config: auto.ConfigMap) -> dict[str, Any]:
    return {key: {"value": value.value, "secret": value.secret} for key, value in config.items()}


def workspace(project_dir: Path, program: Any = None) -> auto.LocalWorkspace:
    """The project's workspace (the `pulumi` CLI on PATH, the backend and passphrase from the environment);
    BackendError when there is no CLI to run."""
    from pulumi import automation as auto

    try:
        return auto.LocalWorkspace(work_dir=str(project_dir), program=program)
    except FileNotFoundError as error:
        raise BackendError(f"the pulumi CLI is not installed or not on PATH ({error})") from None


def select(workspace: auto.LocalWorkspace, name: str) -> auto.Stack | None:
    """The stack, or None when the backend has no stack of that name."""
    from pulumi import automation as auto
    from pulumi.automation import errors

    try:
        return auto.Stack.select(name, workspace)
    except errors.StackNotFoundError:
        return None
    except errors.CommandError as error:
        raise cli_refusal(f"stack {name}", error) from None


def history(stack: auto.Stack) -> list[pulumi_config.Update]:
    """Every update of the stack, newest first, secrets decrypted (never printed by the callers)."""
    from pulumi.automation import errors

    summaries: list[auto.UpdateSummary] = []
    try:
        while True:  # every page: the CLI returns 10 updates unless asked for more
            page = stack.history(page_size=HISTORY_PAGE, page=len(summaries) // HISTORY_PAGE + 1, show_secrets=True)
            summaries += page
            if len(page) < HISTORY_PAGE:
                return pulumi_config.parse_history([summary_to_json(s) for s in summaries])
    except errors.CommandError as error:
        raise cli_refusal(f"stack {stack.name}'s history", error) from None


def stack_file_config(stack: auto.Stack) -> dict[str, pulumi_config.Entry]:
    """The config the stack file holds (secrets decrypted), as `pulumi config --json --show-secrets` prints it."""
    from pulumi.automation import errors

    try:
        return pulumi_config.parse_config(config_to_json(stack.get_all_config()))
    except errors.CommandError as error:
        raise cli_refusal(f"stack {stack.name}'s config", error) from None


def lock_files(workspace: auto.LocalWorkspace, stack: str) -> list[str]:
    """Locks a file backend holds for the stack: an update in progress. (The service backend shows one in
    the history instead; other self-managed backends are not looked into.)"""
    url = workspace.who_am_i().url or os.environ.get("PULUMI_BACKEND_URL", "")
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return []
    root = Path(unquote(parsed.path)) if parsed.path else Path.home()
    locks = root / ".pulumi" / "locks"
    found: list[str] = []
    for folder in (locks / "organization" / PROJECT_NAME / stack, locks / stack):
        if folder.is_dir():
            found += [str(p) for p in folder.iterdir() if p.is_file()]
    return found


def _cli_document(project_dir: Path, stack: str, args: list[str]) -> Any:
    """What `pulumi <args> --stack <stack>` prints as JSON (the backend and passphrase from the environment, as
    every `pulumi` command reads them); None when the backend holds no such stack."""
    command = [CLI, *args, "--stack", stack, "--non-interactive"]
    shown = f"`pulumi {' '.join(args)} --stack {stack}`"
    try:
        done = subprocess.run(command, cwd=project_dir, capture_output=True, text=True, check=False,
                              env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    except FileNotFoundError:
        raise BackendError(f"--from-backend: the pulumi CLI is not installed or not on PATH (it reads {shown})") \
            from None
    if done.returncode != 0:
        line = first_error_line(Exception(done.stderr or done.stdout))
        if NO_SUCH_STACK in line:
            return None
        raise BackendError(f"--from-backend: {shown} failed: {line}")
    try:
        return json.loads(done.stdout or "null")
    except json.JSONDecodeError:
        raise BackendError(f"--from-backend: {shown} printed no JSON") from None


def stack_outputs(project_dir: Path, stack: str) -> dict[str, Any] | None:
    """The stack's outputs as `pulumi stack output --json` prints them; None when the backend holds no such stack.
    Secret outputs stay ``[secret]``: none of those the verbs read is one."""
    document = _cli_document(project_dir, stack, ["stack", "output", "--json"])
    if document is None:
        return None
    if not isinstance(document, dict):
        raise BackendError(f"--from-backend: the outputs of stack '{stack}' are not a JSON object")
    return document


def last_good_update(project_dir: Path, stack: str) -> pulumi_config.Update | None:
    """The stack's last succeeded update as `pulumi stack history --json` lists it (secrets left out: only its
    commit is read); None when the backend holds no such stack or no such update."""
    document = _cli_document(project_dir, stack, ["stack", "history", "--json", "--page-size", str(HISTORY_PAGE)])
    if document is None:
        return None
    if not isinstance(document, list):
        raise BackendError(f"--from-backend: the history of stack '{stack}' is not a JSON list")
    return next((u for u in pulumi_config.parse_history(document) if u.good), None)
