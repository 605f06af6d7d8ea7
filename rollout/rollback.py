"""`gpu-rollout rollback`: go back to an earlier good update of a stack, through the Pulumi Automation API.

Thin: it reads the stack's history and config (and the canary stack's history) from the backend
(:mod:`pulumi_backend.backend`), hands them to :mod:`pulumi_backend.history`, which decides what to restore (only what
decides what runs on the GPU nodes, unless ``--all-config``), prints the plan with every other difference
it leaves alone, and only with ``--yes`` (and not ``--dry-run``) sets the config of the plan's first step in
the stack file and runs ``up`` with the policy pack. ``--yes`` refuses, before any change, where the stack file
is not the default branch's (an unmerged edit would ride along, and a deploy from the default branch would
undo what it sets) unless ``--reason`` says why (printed with what it overrides). Every refusal comes
before the first change. The program runs in this process, served to the engine by the SDK's language runtime
(an inline program: :func:`rollout.engine.program`), the way `Stack.up()` serves any inline program; it is the project's own
``__main__.py``, run in the project folder as the engine runs a program, so what it reads relative to the
project (``attestations/``) is the project's wherever gpu-rollout is started.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from git_revisions.repository import Repository, RevisionError
from pulumi_backend import backend, history, pulumi_config
from rollout import documents, schemas
from rollout.engine import program
from rollout.console import say, stdout
from refusals.exits import Exit

if TYPE_CHECKING:
    from pulumi import automation as auto


def _canary_history(workspace: auto.LocalWorkspace, name: str) -> list[pulumi_config.Update] | None:
    canary = backend.select(workspace, name)
    return backend.history(canary) if canary is not None else None


def unmerged_stack_file(project_dir: Path, stack: str) -> str | None:
    """Why the stack file cannot be taken as the default branch's; None when it is the same, byte for byte.
    A rollback writes it and its pull request carries it: an edit not on the default branch would ride along,
    and the deploy from the default branch would go back to what that branch holds."""
    name = f"Pulumi.{stack}.yaml"
    try:
        repo = Repository(project_dir)
    except RevisionError:
        return f"{project_dir} is not a git checkout, so whether {name} is the default branch's cannot be told"
    branch = repo.default_branch()
    if branch is None:
        return f"the checkout has no default branch (origin/HEAD, main, master), so {name} cannot be compared with it"
    merged = repo.file_at(branch, name)
    here = project_dir / name
    if merged is None:
        return f"{name} is not on the default branch ({branch})"
    if not here.is_file() or here.read_bytes() != merged:
        return f"{name} differs from the default branch ({branch})"
    return None


def _plan_document(plan: history.Plan, commands: list[list[str]], *, applies: bool) -> schemas.RollbackDocument:
    def change(c: pulumi_config.Change) -> schemas.RollbackChange:
        return schemas.RollbackChange(path=c.path, old=c.shown(c.old) if c.secret or c.old is pulumi_config.ABSENT else c.old,
                              new=c.shown(c.new) if c.secret or c.new is pulumi_config.ABSENT else c.new,
                              secret=c.secret, remove=c.removes)

    return schemas.RollbackDocument(
        stack=plan.stack,
        target={"version": plan.target.version, "startTime": plan.target.start_time},
        driver={"current": plan.current_driver, "target": plan.target_driver, "owner": plan.owner},
        how=plan.how,
        canary=plan.canary,
        allConfig=plan.all_config,
        changes=[change(c) for c in plan.changes],
        leftAlone=[change(c) for c in plan.left_alone],
        notes=plan.notes,
        steps=[schemas.RollbackStep(title=s.title, changes=[change(c) for c in s.changes], commands=cmds)
               for s, cmds in zip(plan.steps, commands, strict=True)],
        applies=applies,
    )


def _print_plan(plan: history.Plan, commands: list[list[str]]) -> None:
    console = stdout(highlight=False)
    console.print(f"Rollback of stack {plan.stack} to update {plan.target.version} ({plan.target.start_time}): "
                  f"driver {plan.current_driver} -> {plan.target_driver}", markup=False, soft_wrap=True)
    console.print(plan.how, markup=False, soft_wrap=True)
    console.print(f"canary: {plan.canary}", markup=False, soft_wrap=True)
    scope = "the whole config" if plan.all_config else "what decides what runs on the GPU nodes"
    console.print(f"config that changes (now -> update {plan.target.version}; {scope}):", markup=False,
                  soft_wrap=True)
    for c in plan.changes:
        console.print(f"  {c.path}: {c.shown(c.old)} -> {c.shown(c.new)}", markup=False, soft_wrap=True)
    if plan.left_alone:
        console.print(f"left alone (update {plan.target.version} differs; --all-config restores these too):",
                      markup=False, soft_wrap=True)
        for c in plan.left_alone:
            console.print(f"  {c.path}: stays {c.shown(c.old)} (update {plan.target.version}: {c.shown(c.new)})",
                          markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    for number, (step, cmds) in enumerate(zip(plan.steps, commands, strict=True), start=1):
        console.print(f"step {number}: {step.title}", markup=False, soft_wrap=True)
        for line in cmds:
            console.print(f"  {line}", markup=False, soft_wrap=True)


def _apply(stack: auto.Stack, step: history.Step) -> None:
    """The step's changes in their order, with as few CLI calls as that order allows: consecutive plain
    leaves in one `config set-all --path`, consecutive removals in one `config rm-all`."""
    from pulumi import automation as auto

    def kind(change: pulumi_config.Change) -> str:
        if change.removes:
            return "rm-path" if not change.whole_key else "rm"
        return "set-path" if not change.whole_key and not change.secret else "set"

    batch: list[pulumi_config.Change] = []
    for index, change in enumerate(step.changes):
        batch.append(change)
        following = step.changes[index + 1] if index + 1 < len(step.changes) else None
        if following is not None and kind(following) == kind(change) and kind(change) != "set":
            continue
        what = kind(change)
        if what in ("rm", "rm-path"):
            stack.remove_all_config([c.path for c in batch], path=what == "rm-path")
        elif what == "set-path":
            values = {}
            for leaf in batch:
                text = pulumi_config.path_value_text(leaf.new)
                assert text is not None  # untypeable leaves are refused before anything is applied
                values[leaf.path] = auto.ConfigValue(text)
            stack.set_all_config(values, path=True)
        else:
            text = change.new if isinstance(change.new, str) else json.dumps(change.new)
            stack.set_config(change.path, auto.ConfigValue(text, secret=change.secret))
        batch = []


def execute(stack_name: str, project_dir: Path, *, to_version: int | None, dry_run: bool, yes: bool, force: bool,
            all_config: bool, reason: str | None, as_json: bool, policy_pack: str | None,
            policy_pack_config: str | None) -> Exit:
    from pulumi.automation import errors

    project_dir = project_dir.resolve()
    try:
        workspace = backend.workspace(project_dir, program(project_dir))
        stack = backend.select(workspace, stack_name)
        if stack is None:
            raise history.RollbackRefused(f"--stack {stack_name}: no such stack in the backend", Exit.INVALID)
        past = backend.history(stack)
        current = backend.stack_file_config(stack)
        locks = backend.lock_files(workspace, stack_name)
        if locks:
            raise history.RollbackRefused(f"stack {stack_name}: an update is in progress (the backend holds its lock "
                                          f"{locks[0]}); wait for it to end, or `pulumi cancel` a dead one")
        canary_stack = history.canary_stack_of(current)
        canary_past = (_canary_history(workspace, canary_stack)
                       if canary_stack is not None and canary_stack != stack_name else None)
        plan = history.plan_rollback(stack_name, past, current, to_version=to_version, canary_stack=canary_stack,
                                     canary_history=canary_past, force=force, all_config=all_config)
    except backend.BackendError as error:  # refused as the rollback's own refusals are
        raise history.RollbackRefused(str(error), error.code) from None

    stage = history.stage(plan.target.config) or history.stage(current)
    pack = policy_pack or str(project_dir / "policy")
    pack_config = policy_pack_config or (str(project_dir / "policy" / f"{stage}.json") if stage else None)
    commands = [[pulumi_config.command(c, stack_name, plan.target.version) for c in step.changes]
                + [pulumi_config.up_command(stack_name, pack, pack_config)] for step in plan.steps]
    if as_json:
        documents.write(_plan_document(plan, commands, applies=yes and not dry_run))
    else:
        _print_plan(plan, commands)
    if dry_run or not yes:
        if not as_json:
            say("nothing changed: run the commands above, or again with --yes")
        return Exit.OK
    if plan.untypeable:
        say("rollback refused: these values cannot be set back with `pulumi config set --path` without changing "
            f"their type: {', '.join(c.path for c in plan.untypeable)}; edit the stack file instead")
        return Exit.FAILED
    unmerged = unmerged_stack_file(project_dir, stack_name)
    if unmerged is not None and not reason:
        say(f"rollback refused: {unmerged}. The rollback writes this file and its pull request carries it, so "
            "start from the default branch's (`git checkout` it, or `pulumi config refresh --stack "
            f"{stack_name} --force` to take the deployed config), or give --reason TEXT to say why not")
        return Exit.FAILED
    step = plan.steps[0]
    say(f"step 1 of {len(plan.steps)}: {step.title}")
    if reason:
        say(f"reason: {reason}" + (f" (runs although {unmerged})" if unmerged else ""))
    message = history.ROLLBACK_MESSAGE.format(version=plan.target.version)
    try:
        _apply(stack, step)
        stack.up(message=message, policy_packs=[pack], policy_pack_configs=[pack_config] if pack_config else None,
                 on_output=lambda line: say(line.rstrip("\n")), color="never", show_secrets=False)
    except errors.CommandError as error:
        say(f"rollback: the pulumi CLI failed after step 1 began ({backend.first_error_line(error)}); the stack's "
            f"config may now hold update {plan.target.version}'s values for the keys above: fix the cause, then "
            f"`gpu-rollout rollback --stack {stack_name} --to-version {plan.target.version} --yes`")
        return Exit.FAILED
    if len(plan.steps) > 1:
        say(f"step 1 done; when `gpu-rollout watch --stack {stack_name}` shows the pools healthy, continue with "
            f"`gpu-rollout rollback --stack {stack_name} --to-version {plan.target.version} --yes`")
    else:
        say(f"rolled back stack {stack_name} to update {plan.target.version}"
            + ("" if plan.all_config else " (what runs on its GPU nodes)"))
    say(f"the stack file {project_dir / f'Pulumi.{stack_name}.yaml'} now holds the config the stack runs: commit it "
        "and open a pull request with it. Until it merges, the default branch still holds the config rolled back "
        "from, and the deploy workflow leaves this stack alone (gpu-rollout deploy-plan)")
    return Exit.OK
