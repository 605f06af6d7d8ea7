"""What `plan` and `diff` judge a stack file against besides the file itself: the stack's last deployment (what
the program's StackReference to itself answers, components/previous.py) and, for a prod stack, its canary's
outputs (the prod gate's StackReference, components/promotion.py). Both verbs take them from the same place, in
this order (README.md, "What plan and diff assume"), so they judge one stack file alike:

1. given: ``--previous-outputs FILE`` and ``--canary-outputs FILE``, what `pulumi stack output --json` printed;
2. ``--from-backend``: the stacks' own outputs, read from the Pulumi backend (:func:`pulumi_backend.backend.stack_outputs`);
   a stack the backend does not hold has not been deployed;
3. else, offline, assumed: the last deployment is the stack file as committed at the base revision (the merge
   base of HEAD with the default branch, or ``diff --base``); where it has none (a new file, a file outside the
   project's git history) a first deployment. The canary runs what its stack file on the same side declares.

Each :class:`Source` says where it came from, and whether that is an assumption: a mandatory finding that
depends on an assumed source says so and names the flags that answer it (:func:`rollout.plan.assumption_notes`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_revisions.repository import Repository, RevisionError
from pulumi_backend import backend
from rollout import schemas
from fleetspec.load import SpecError, read_stack_file

LAST_DEPLOYMENT_FLAGS = ("--previous-outputs FILE", "--from-backend")
CANARY_FLAGS = ("--canary-outputs FILE", "--from-backend")


def either(flags: tuple[str, ...]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} or {flags[-1]}"


@dataclass(frozen=True)
class Source:
    """Where one input of a rendering came from, in words; ``assumed`` when it is the offline assumption rather
    than the stack's own record, and then ``flags`` answer it."""

    role: str  # "last deployment", "canary 'canary'"
    text: str
    assumed: bool
    flags: tuple[str, ...]

    def line(self) -> str:
        note = f" (offline assumption: {either(self.flags)} reads what is deployed)" if self.assumed else ""
        return f"{self.role}: {self.text}{note}"

    def model(self) -> schemas.Source:
        """As the plan's and the diff's ``--json`` print it."""
        return schemas.Source(role=self.role, source=self.text, assumed=self.assumed,
                              answeredBy=list(self.flags) if self.assumed else [], line=self.line())


@dataclass(frozen=True)
class Committed:
    """A stack file as committed at the base revision: its config, or why there is none to use."""

    config: dict[str, str] | None
    text: str  # "Pulumi.prod.yaml at the merge base with main (6ed58ba9a63d)", or why none


def committed_base(project_dir: Path, path: Path) -> Committed:
    """The stack file ``path`` at the merge base of HEAD with the default branch, the base `diff` compares with
    by default; None config (with the reason) where there is no such version to read."""
    if path.resolve().parent != project_dir.resolve():
        return Committed(None, f"none: {path} is outside the project folder's git history")
    try:
        repo = Repository(project_dir)
        base = repo.default_base()
        label = f"{repo.prefix}{path.name} at the merge base with {repo.default_branch()} ({base[:12]})"
    except RevisionError as error:
        return Committed(None, f"none: {error}")
    except OSError as error:  # no git on this machine: plan needs none
        return Committed(None, f"none: git cannot be run ({error.strerror or error})")
    return _stack_file_at(repo, base, path, label)


def backend_base(project_dir: Path, path: Path, stack: str) -> Committed:
    """The stack file ``path`` as the stack's last succeeded update ran it: at the commit `pulumi stack history`
    records for that update (``git.head``). None config (with the reason) where the backend holds no such update,
    recorded no commit, or ran from a checkout with changes beyond it (the commit alone does not say what ran)."""
    update = backend.last_good_update(project_dir, stack)
    if update is None:
        return Committed(None, f"none: the backend holds no succeeded update of stack '{stack}'")
    commit = update.commit
    if commit is None:
        return Committed(None, f"none: update {update.version} of stack '{stack}' recorded no commit (git.head)")
    if update.dirty:
        return Committed(None, f"none: update {update.version} of stack '{stack}' ran from a checkout with changes "
                               f"beyond {commit[:12]} (git.dirty)")
    if path.resolve().parent != project_dir.resolve():
        return Committed(None, f"none: {path} is outside the project folder's git history")
    try:
        repo = Repository(project_dir)
        label = (f"{repo.prefix}{path.name} at {commit[:12]}, the commit of update {update.version} of stack "
                 f"'{stack}' (pulumi stack history)")
    except RevisionError as error:
        return Committed(None, f"none: {error}")
    except OSError as error:
        return Committed(None, f"none: git cannot be run ({error.strerror or error})")
    return _stack_file_at(repo, commit, path, label)


def _stack_file_at(repo: Repository, revision: str, path: Path, label: str) -> Committed:
    try:
        data = repo.file_at(revision, path.name)
    except (RevisionError, OSError) as error:
        return Committed(None, f"none: {error}")
    if data is None:
        return Committed(None, f"none: {label} does not exist")
    with tempfile.TemporaryDirectory(prefix="gpu-rollout-base-") as folder:
        copy = Path(folder) / path.name
        copy.write_bytes(data)
        try:
            config = read_stack_file(copy)
        except SpecError:
            return Committed(None, f"none: {label} is not a stack file this program reads")
    return Committed(config, label)


def backend_outputs(project_dir: Path, stack: str, role: str, flags: tuple[str, ...]) -> tuple[dict[str, Any] | None, Source]:
    """A stack's outputs from the backend, and their source; None outputs when the backend holds no such stack."""
    outputs = backend.stack_outputs(project_dir, stack)
    if outputs is None:
        return None, Source(role, f"none: the backend holds no stack '{stack}' (not deployed)", False, flags)
    return outputs, Source(role, f"stack '{stack}' in the backend (pulumi stack output --json)", False, flags)


def given_outputs(path: Path, role: str, flag: str) -> Source:
    return Source(role, f"{flag} {path}", False, ())


__all__ = ["either", "CANARY_FLAGS", "LAST_DEPLOYMENT_FLAGS", "Committed", "Source", "backend_base", "backend_outputs",
           "committed_base", "given_outputs"]
