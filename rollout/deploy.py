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
from typing import Any

from git_revisions.repository import Repository, RevisionError
from promotion_train import deploy_plan
from pulumi_backend import backend
from rollout import documents, schemas
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


def _entry(stack: StackFile) -> dict[str, Any]:
    """A workflow's matrix entry (``stacks``, and each stack of ``deploy-plan``): every key present (empty where
    it does not apply), so expressions such as ``matrix.aksClusterName`` always resolve."""
    given = dict(stack.credentials)
    keys = ("aksResourceGroup", "aksClusterName", "eksClusterName", "eksRegion", "existingContext")
    return {"stack": stack.name, "file": stack.file, "stage": stack.stage.value if stack.stage else "",
            "environment": stack.environment, "cloud": stack.cloud or "", "canary": stack.canary or "",
            "minSoakHours": stack.min_soak_hours, **{key: given.get(key, "") for key in keys},
            "maintenanceWindow": stack.window.describe() if stack.window is not None else "",
            "problem": stack.problem}


def stacks_document(stacks: list[StackFile]) -> schemas.StacksDocument:
    return schemas.StacksDocument(stacks=[schemas.StackEntry(**_entry(s)) for s in stacks])


def plan_document(result: deploy_plan.DeployPlan) -> schemas.DeployPlanDocument:
    """The plan as the workflows read it: ``canary`` and ``prod``, the matrices of the deploy jobs (a stack whose
    file does not load goes with prod, the stricter environment), and every stack skipped, with why."""
    def deployment(d: deploy_plan.Decision) -> schemas.Deployment:
        return schemas.Deployment(**_entry(d.stack), deploy=d.deploy, reason=d.reason, packRef=d.pack_ref or "",
                                  deployedCommit=d.deployed_commit or "")

    return schemas.DeployPlanDocument(
        head=result.head,
        canary=[deployment(d) for d in result.to_deploy if d.stack.stage == Stage.CANARY],
        prod=[deployment(d) for d in result.to_deploy if d.stack.stage != Stage.CANARY],
        skip=[schemas.Skipped(stack=d.stack.name, reason=d.reason) for d in result.decisions if not d.deploy])


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
        documents.write(plan_document(result))
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
        documents.write(stacks_document(stacks))
        return Exit.OK
    console = stdout(highlight=False)
    for entry in stacks:
        console.print(f"{entry.name}: {entry.problem or f'{entry.stage} on {entry.cloud}'}", markup=False,
                      soft_wrap=True)
    return Exit.OK
