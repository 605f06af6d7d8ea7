"""`pulumi up` of the project's program through the Automation API, as `gpu-rollout rollback` and `gpu-rollout fleet
advance` run it: the project's own ``__main__.py`` served to the engine by the SDK's language runtime (an inline
program, the way `Stack.up()` serves any; no Python language host is needed), in the project folder as the engine
runs a program, with the policy pack and its stage's config.

:func:`up_in_process` is what `fleet advance` hands each worker process: one `up` per process, so the stacks of a
wave go up at once without two programs sharing one interpreter's working directory, and a worker finishes its `up`
even when the `advance` that started it is killed (the engine's update is never cut off midway by it).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pulumi_backend import backend
from rollout.console import say


def program(project_dir: Path) -> Callable[[], None]:
    """The project's program, as the Python language host runs it: ``__main__.py`` with the project on
    sys.path and the project folder as the working directory (restored afterwards)."""

    def run() -> None:
        if str(project_dir) not in sys.path:
            sys.path.insert(0, str(project_dir))
        started_in = os.getcwd()
        os.chdir(project_dir)
        try:
            runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        finally:
            os.chdir(started_in)

    return run


@dataclass(frozen=True)
class UpResult:
    stack: str
    ok: bool
    detail: str  # the update's version and changes, or the CLI's error line

    def as_json(self) -> dict[str, object]:
        return {"stack": self.stack, "ok": self.ok, "detail": self.detail}


def up_in_process(project_dir: str, stack_name: str, pack: str, pack_config: str | None, message: str) -> UpResult:
    """`pulumi up` of one stack (created when the backend has none, as the deploy workflow's `upsert`), with the
    pack and its config; every line the engine prints goes to stderr with the stack's name."""
    from pulumi import automation as auto
    from pulumi.automation import errors

    project = Path(project_dir)
    try:
        workspace = backend.workspace(project, program(project))
        stack = auto.Stack.create_or_select(stack_name, workspace)
        result = stack.up(message=message, policy_packs=[pack],
                          policy_pack_configs=[pack_config] if pack_config else None,
                          on_output=lambda line: say(f"[{stack_name}] {line.rstrip()}"), color="never",
                          show_secrets=False)
    except backend.BackendError as error:
        return UpResult(stack_name, False, str(error))
    except errors.CommandError as error:
        return UpResult(stack_name, False, backend.first_error_line(error))
    changes = ", ".join(f"{kind} {count}" for kind, count in sorted((result.summary.resource_changes or {}).items()))
    return UpResult(stack_name, True, f"update {result.summary.result}" + (f" ({changes})" if changes else ""))
