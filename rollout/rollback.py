"""`gpu-rollout rollback`: go back to an earlier good update of a stack, through the Pulumi Automation API.

Thin: it reads the stack's history and config (and the canary stack's history) with the Automation API,
as the CLI's documents (:mod:`rollout.pulumi_config`), hands them to :mod:`rollout.history`, which decides,
prints the plan, and only with ``--yes`` (and not ``--dry-run``) sets the config of the plan's first step
and runs ``up`` with the policy pack. Every refusal comes before the first change. The program runs in this process, served to the engine by the SDK's
language runtime (an inline program: :func:`_program`), the way `Stack.up()` serves any inline program;
it is the project's own ``__main__.py``.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from rollout import history, pulumi_config
from rollout.console import say, stdout
from rollout.exits import Exit

if TYPE_CHECKING:
    from pulumi import automation as auto

PROJECT_NAME = "gpu-driver-upgrade"
HISTORY_PAGE = 100
UNDECRYPTABLE_HINTS = ("passphrase", "decrypt", "secrets manager", "secrets provider")


def _program(project_dir: Path) -> Callable[[], None]:
    """The project's program, as the Python language host runs it: ``__main__.py`` with the project on
    sys.path."""

    def run() -> None:
        if str(project_dir) not in sys.path:
            sys.path.insert(0, str(project_dir))
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")

    return run


def _first_error_line(error: Exception) -> str:
    """The CLI's own `error: ...` line out of a CommandError (which holds the code, stdout and stderr)."""
    text = str(error)
    for line in text.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith(("code:", "stdout:", "stderr:"))]
    return lines[-1] if lines else " ".join(text.split())[:300]


def _summary_to_json(summary: auto.UpdateSummary) -> dict[str, Any]:
    """An Automation API UpdateSummary back in the CLI's JSON shape, which rollout.pulumi_config reads."""
    return {
        "version": summary.version,
        "kind": summary.kind,
        "result": summary.result,
        "startTime": summary.start_time.isoformat() if summary.start_time else "",
        "message": summary.message,
        "endTime": summary.end_time.isoformat() if summary.end_time else None,
        "config": {key: {"value": value.value, "secret": value.secret} for key, value in summary.config.items()},
    }


def _config_to_json(config: auto.ConfigMap) -> dict[str, Any]:
    return {key: {"value": value.value, "secret": value.secret} for key, value in config.items()}


def _read_history(stack: auto.Stack) -> list[pulumi_config.Update]:
    from pulumi.automation import errors

    summaries: list[auto.UpdateSummary] = []
    try:
        while True:  # every page: the CLI returns 10 updates unless asked for more
            page = stack.history(page_size=HISTORY_PAGE, page=len(summaries) // HISTORY_PAGE + 1, show_secrets=True)
            summaries += page
            if len(page) < HISTORY_PAGE:
                return pulumi_config.parse_history([_summary_to_json(s) for s in summaries])
    except errors.CommandError as error:
        raise _cli_refusal(f"stack {stack.name}'s history", error) from None


def _cli_refusal(what: str, error: Exception) -> history.RollbackRefused:
    line = _first_error_line(error)
    if any(hint in line.lower() for hint in UNDECRYPTABLE_HINTS):
        return history.RollbackRefused(f"{what}: secrets cannot be decrypted ({line}); give the stack's passphrase "
                                       "(PULUMI_CONFIG_PASSPHRASE) or access to its secrets provider", Exit.INVALID)
    return history.RollbackRefused(f"{what}: the pulumi CLI failed: {line}")


def _lock_files(workspace: auto.LocalWorkspace, stack: str) -> list[str]:
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


def _select(workspace: auto.LocalWorkspace, name: str) -> auto.Stack:
    from pulumi import automation as auto
    from pulumi.automation import errors

    try:
        return auto.Stack.select(name, workspace)
    except errors.StackNotFoundError:
        raise history.RollbackRefused(f"--stack {name}: no such stack in the backend", Exit.INVALID) from None


def _canary_history(workspace: auto.LocalWorkspace, name: str) -> list[pulumi_config.Update] | None:
    from pulumi import automation as auto
    from pulumi.automation import errors

    try:
        canary = auto.Stack.select(name, workspace)
    except errors.StackNotFoundError:
        return None
    return _read_history(canary)


def _plan_document(plan: history.Plan, commands: list[list[str]]) -> dict[str, Any]:
    def change(c: pulumi_config.Change) -> dict[str, Any]:
        return {"path": c.path, "old": c.shown(c.old) if c.secret or c.old is pulumi_config.ABSENT else c.old,
                "new": c.shown(c.new) if c.secret or c.new is pulumi_config.ABSENT else c.new,
                "secret": c.secret, "remove": c.removes}

    return {
        "stack": plan.stack,
        "target": {"version": plan.target.version, "startTime": plan.target.start_time},
        "driver": {"current": plan.current_driver, "target": plan.target_driver, "owner": plan.owner},
        "how": plan.how,
        "canary": plan.canary,
        "changes": [change(c) for c in plan.changes],
        "steps": [{"title": s.title, "changes": [change(c) for c in s.changes], "commands": cmds}
                  for s, cmds in zip(plan.steps, commands, strict=True)],
    }


def _print_plan(plan: history.Plan, commands: list[list[str]]) -> None:
    console = stdout(highlight=False)
    console.print(f"Rollback of stack {plan.stack} to update {plan.target.version} ({plan.target.start_time}): "
                  f"driver {plan.current_driver} -> {plan.target_driver}", markup=False, soft_wrap=True)
    console.print(plan.how, markup=False, soft_wrap=True)
    console.print(f"canary: {plan.canary}", markup=False, soft_wrap=True)
    console.print("config that changes (now -> update %d):" % plan.target.version, markup=False, soft_wrap=True)
    for c in plan.changes:
        console.print(f"  {c.path}: {c.shown(c.old)} -> {c.shown(c.new)}", markup=False, soft_wrap=True)
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
            as_json: bool, policy_pack: str | None, policy_pack_config: str | None) -> Exit:
    from pulumi import automation as auto
    from pulumi.automation import errors

    project_dir = project_dir.resolve()
    try:
        workspace = auto.LocalWorkspace(work_dir=str(project_dir), program=_program(project_dir))
    except FileNotFoundError as error:
        say(f"rollback: the pulumi CLI is not installed or not on PATH ({error})")
        return Exit.FAILED
    try:
        stack = _select(workspace, stack_name)
        past = _read_history(stack)
        try:
            current = pulumi_config.parse_config(_config_to_json(stack.get_all_config()))
        except errors.CommandError as error:
            raise _cli_refusal(f"stack {stack_name}'s config", error) from None
        locks = _lock_files(workspace, stack_name)
        if locks:
            raise history.RollbackRefused(f"stack {stack_name}: an update is in progress (the backend holds its lock "
                                          f"{locks[0]}); wait for it to end, or `pulumi cancel` a dead one")
        canary_stack = history.canary_stack_of(current)
        canary_past = (_canary_history(workspace, canary_stack)
                       if canary_stack is not None and canary_stack != stack_name else None)
        plan = history.plan_rollback(stack_name, past, current, to_version=to_version, canary_stack=canary_stack,
                                     canary_history=canary_past, force=force)
    except history.RollbackRefused as refusal:
        say(f"rollback refused: {refusal}")
        return refusal.code

    stage = history.stage(plan.target.config) or history.stage(current)
    pack = policy_pack or str(project_dir / "policy")
    pack_config = policy_pack_config or (str(project_dir / "policy" / f"{stage}.json") if stage else None)
    commands = [[pulumi_config.command(c, stack_name, plan.target.version) for c in step.changes]
                + [pulumi_config.up_command(stack_name, pack, pack_config)] for step in plan.steps]
    if as_json:
        print(json.dumps({**_plan_document(plan, commands), "applies": yes and not dry_run}))
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
    step = plan.steps[0]
    say(f"step 1 of {len(plan.steps)}: {step.title}")
    try:
        _apply(stack, step)
        stack.up(message=history.ROLLBACK_MESSAGE.format(version=plan.target.version), policy_packs=[pack],
                 policy_pack_configs=[pack_config] if pack_config else None,
                 on_output=lambda line: say(line.rstrip("\n")), color="never", show_secrets=False)
    except errors.CommandError as error:
        say(f"rollback: the pulumi CLI failed after step 1 began ({_first_error_line(error)}); the stack's config "
            f"may now hold update {plan.target.version}'s values for the keys above: fix the cause, then "
            f"`gpu-rollout rollback --stack {stack_name} --to-version {plan.target.version} --yes`")
        return Exit.FAILED
    if len(plan.steps) > 1:
        say(f"step 1 done; when `gpu-rollout watch --stack {stack_name}` shows the pools healthy, continue with "
            f"`gpu-rollout rollback --stack {stack_name} --to-version {plan.target.version} --yes`")
    else:
        say(f"rolled back stack {stack_name} to the config of update {plan.target.version}")
    return Exit.OK
