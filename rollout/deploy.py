"""`gpu-rollout deploy-plan` and `gpu-rollout stacks`: what the workflows deploy, and the stacks they know.

Thin: ``deploy-plan`` reads the stack files (:mod:`promotion_train.stacks`), each stack's history and stack-file
config from the backend (:mod:`pulumi_backend.backend`) and main's first-parent history (git), and prints what
:mod:`promotion_train.deploy_plan` decides: which stacks to deploy, canary stages first, with the commit whose pack
each `up` enforces, and why each other stack is left alone. ``stacks`` prints the stack files alone (no
backend), for the workflows that need only the list (the soak schedule).

Exit codes: 0 when the plan (or list) was printed; 1 when the backend could not be read; 2 for a revision,
``--stack`` or project that cannot be used.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from git_revisions.repository import Repository, RevisionError
from promotion_train import deploy_plan
from pulumi_backend import backend
from rollout import documents
from rollout.console import stdout
from refusals.exits import Exit
from promotion_train.stacks import StackFile, stack_files
from fleetspec.base import Stage


def _chosen(project_dir: Path, names: list[str] | None, stage: Stage | None = None) -> list[StackFile]:
    found = stack_files(project_dir)
    unknown = sorted(set(names or []) - {s.name for s in found})
    if unknown:
        raise RevisionError("--stack", f"no stack file {', '.join(f'Pulumi.{n}.yaml' for n in unknown)} in {project_dir}")
    return [s for s in found if (not names or s.name in names) and (stage is None or s.stage == stage)]


def _deployed(project_dir: Path, stacks: list[StackFile]) -> dict[str, deploy_plan.Deployed]:
    workspace = backend.workspace(project_dir)
    found = {}
    for entry in stacks:
        stack = backend.select(workspace, entry.name) if entry.problem is None else None
        if stack is None:
            found[entry.name] = deploy_plan.Deployed(None)
            continue
        found[entry.name] = deploy_plan.Deployed(backend.history(stack), backend.stack_file_config(stack))
    return found


def execute(project_dir: Path, names: list[str] | None, head: str | None, as_json: bool,
            now: datetime | None = None) -> Exit:
    project_dir = project_dir.resolve()
    repo = Repository(project_dir)  # a bad revision raises RevisionError, an unreadable backend BackendError: refusals
    commit = repo.commit(head or "HEAD", "--head")
    stacks = _chosen(project_dir, names)
    deployed = _deployed(project_dir, stacks)
    result = deploy_plan.plan(stacks, deployed, commit, repo, now)
    if as_json:
        documents.write(result.as_json())
        return Exit.OK
    console = stdout(highlight=False)
    console.print(f"deploy plan for {commit[:12]}:", markup=False)
    for decision in result.to_deploy:
        console.print(f"  deploy {decision.stack.name} ({decision.stack.stage or 'stage unknown'}, environment "
                      f"{decision.stack.environment}, pack of {(decision.pack_ref or '?')[:12]}): {decision.reason}",
                      markup=False, soft_wrap=True)
    for decision in result.decisions:
        if not decision.deploy:
            console.print(f"  leave {decision.stack.name} alone: {decision.reason}", markup=False, soft_wrap=True)
    return Exit.OK


def list_stacks(project_dir: Path, names: list[str] | None, stage: Stage | None, as_json: bool) -> Exit:
    stacks = _chosen(project_dir.resolve(), names, stage)
    if as_json:
        documents.write({"stacks": [s.as_json() for s in stacks]})
        return Exit.OK
    console = stdout(highlight=False)
    for entry in stacks:
        console.print(f"{entry.name}: {entry.problem or f'{entry.stage} on {entry.cloud}'}", markup=False,
                      soft_wrap=True)
    return Exit.OK
