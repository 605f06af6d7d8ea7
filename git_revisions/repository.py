"""The project's git wrapper: stack files at a git revision, for `gpu-rollout diff`, deploy-plan, rollback and the
fleet's train (which revisions to compare and what each holds), the commit a checkout is at (verify's
attestation) and whether a path is git-ignored (the policy pack's bundle). Every caller reaches git through here.

Read with the ``git`` command (no library): ``git rev-parse`` resolves a revision, ``git ls-tree`` lists
the project folder's stack files at it with their sizes, ``git cat-file`` reads one. The work tree is a side
too: its stack files are read where they lie, tracked or not. Nothing here checks a revision out or
touches the index, so a diff runs in a dirty checkout and in CI's detached one alike.

The default base is where the branch left the default branch: the merge base of ``HEAD`` with
``origin/HEAD`` (what ``git clone`` records as the remote's default branch), else with ``main``, else
``master`` (local or on ``origin``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fleetspec.load import MAX_STACK_FILE_BYTES
from refusals.errors import FlagError

# Pulumi.<stack>.yaml: the project file Pulumi.yaml is not a stack. Pulumi also reads .yml.
_STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.ya?ml$")
DEFAULT_BRANCHES = ("origin/HEAD", "main", "origin/main", "master", "origin/master")
WORK_TREE = "work tree"


class RevisionError(FlagError, ValueError):
    """A revision that cannot be used; ``flag`` is the option it came from (``--base``, ``--head``): exit 2,
    ``flag: message``."""


def head_commit(folder: Path) -> str | None:
    """``git rev-parse HEAD`` of the checkout holding ``folder``; None where it is no git checkout, or git is
    missing or hangs (ten seconds)."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def is_ignored(checkout: Path, path: Path) -> bool:
    """Whether the .gitignore files of ``checkout`` ignore ``path`` (False without git)."""
    try:
        result = subprocess.run(["git", "-C", str(checkout), "check-ignore", "-q", str(Path(path).resolve())],
                                capture_output=True, check=False)
    except OSError:
        return False
    return result.returncode == 0


@dataclass(frozen=True)
class StackBlob:
    """One stack file as a side holds it: where, and how to read it."""

    stack: str
    name: str  # the file's name, Pulumi.<stack>.yaml
    size: int
    blob: str | None = None  # the git object at a revision; None: the file in the work tree
    path: Path | None = None  # the file in the work tree


@dataclass(frozen=True)
class Commit:
    """A commit of the first-parent history and the project files it changed against its first parent."""

    sha: str
    parent: str | None  # its first parent; None for a root commit
    paths: tuple[str, ...]  # relative to the project folder; files outside it are left out


@dataclass(frozen=True)
class Side:
    """One side of a diff: a commit, or the work tree."""

    label: str  # as the user wrote it (or "work tree"), for messages and the report
    commit: str | None  # the full commit id; None for the work tree
    files: Mapping[str, StackBlob]  # by stack name
    flag: str  # the option that chose it: --base or --head


class Repository:
    """The git repository holding a Pulumi project folder (which may be a subfolder of it)."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir.resolve()
        top = self._git("rev-parse", "--show-toplevel", check=False)
        if top is None:
            raise RevisionError("--project-dir", f"{self.project_dir} is not in a git repository: diff compares git revisions")
        self.prefix = self._git("rev-parse", "--show-prefix") or ""  # the project folder inside the repository

    def _git(self, *args: str, check: bool = True, flag: str = "--project-dir") -> str | None:
        """The command's stdout, stripped; None when it fails and ``check`` is off."""
        done = subprocess.run(["git", *args], cwd=self.project_dir, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            if check:
                raise RevisionError(flag, f"git {' '.join(args)} failed: {done.stderr.strip()}")
            return None
        return done.stdout.strip()

    def commit(self, revision: str, flag: str) -> str:
        """The commit ``revision`` names; RevisionError naming ``flag`` when it names none."""
        if revision.startswith("-"):  # never an option to git
            raise RevisionError(flag, f"{revision!r} is not a revision")
        found = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}", check=False)
        if not found:
            raise RevisionError(flag, f"{revision!r} names no commit in {self.project_dir}")
        return found

    def default_branch(self) -> str | None:
        """The first of the default branches (``DEFAULT_BRANCHES``) the repository has; None without one."""
        for branch in DEFAULT_BRANCHES:
            if self._git("rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}", check=False):
                return branch
        return None

    def file_at(self, revision: str, name: str) -> bytes | None:
        """The bytes of the project folder's file ``name`` at ``revision``; None where it has none."""
        done = subprocess.run(["git", "cat-file", "blob", f"{revision}:{self.prefix}{name}"], cwd=self.project_dir,
                              capture_output=True, check=False)
        return done.stdout if done.returncode == 0 else None

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        """Whether ``ancestor`` is ``commit`` or one of its ancestors (False for a commit the repository lacks)."""
        done = subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, commit], cwd=self.project_dir,
                              capture_output=True, check=False)
        return done.returncode == 0

    def first_parent(self, commit: str) -> str | None:
        return self._git("rev-parse", "--verify", "--quiet", f"{commit}^1", check=False) or None

    def first_parent_history(self, since: str | None, until: str) -> list[Commit]:
        """The commits of ``until``'s first-parent line after ``since`` (all of them when None), oldest first,
        each with the project files it changed against its first parent (a merge: what it brought to the line).
        No pathspec: git's history simplification would hide a merge that is TREESAME to its second parent."""
        span = f"{since}..{until}" if since else until
        listing = self._git("log", "--first-parent", "--diff-merges=first-parent", "--reverse", "--no-renames",
                            "--format=%x01%H %P", "--name-only", span, flag="--project-dir") or ""
        found = []
        for block in listing.split("\x01")[1:]:
            lines = [line for line in block.splitlines() if line.strip()]
            ids = lines[0].split()
            paths = tuple(line.removeprefix(self.prefix) for line in lines[1:] if line.startswith(self.prefix))
            found.append(Commit(ids[0], ids[1] if len(ids) > 1 else None, paths))
        return found

    def added_on_first_parent_line(self, name: str, until: str) -> Commit | None:
        """The newest commit of ``until``'s first-parent line that added the project file ``name`` against its
        first parent (a merge that brought it, never the branch commit that wrote it); None where that line never
        added it (a file only in the work tree, a shallow history). With --first-parent a merge is compared with
        its first parent alone, so the pathspec hides no merge that brought the file."""
        listing = self._git("log", "--first-parent", "--diff-merges=first-parent", "--diff-filter=A", "--no-renames",
                            "--name-only", "--format=%x01%H %P", until, "--", f"{self.prefix}{name}",
                            flag="--project-dir") or ""
        for block in listing.split("\x01")[1:]:
            ids = block.splitlines()[0].split()
            return Commit(ids[0], ids[1] if len(ids) > 1 else None, (name,))
        return None

    def default_base(self) -> str:
        """The merge base of HEAD with the default branch (see the module's docstring)."""
        for branch in DEFAULT_BRANCHES:
            if self._git("rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}", check=False):
                base = self._git("merge-base", "HEAD", branch, check=False)
                if not base:
                    raise RevisionError("--base", f"HEAD and {branch} share no history: pass --base REV")
                return base
        raise RevisionError(
            "--base", f"no default branch to compare with ({', '.join(DEFAULT_BRANCHES)} are all missing): pass --base REV"
        )

    def side(self, revision: str | None, flag: str) -> Side:
        """The stack files at ``revision`` (None: the work tree)."""
        if revision is None:
            return Side(WORK_TREE, None, self._work_tree_files(), flag)
        commit = self.commit(revision, flag)
        return Side(revision, commit, self._files_at(commit, flag), flag)

    def _work_tree_files(self) -> dict[str, StackBlob]:
        found = {}
        for path in sorted(self.project_dir.iterdir()):
            match = _STACK_FILE.match(path.name)
            if match and path.is_file():
                found[match["stack"]] = StackBlob(match["stack"], path.name, path.stat().st_size, path=path)
        return found

    def _files_at(self, commit: str, flag: str) -> dict[str, StackBlob]:
        # -l adds sizes; -z keeps odd names intact; the pathspec limits the listing to the project folder.
        listing = self._git("ls-tree", "-l", "-z", commit, "--", ".", flag=flag) or ""  # paths from cwd
        found = {}
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            name = path.rsplit("/", 1)[-1]
            match = _STACK_FILE.match(name)
            if len(parts) == 4 and parts[1] == "blob" and match:
                size = int(parts[3]) if parts[3].isdigit() else 0
                found[match["stack"]] = StackBlob(match["stack"], name, size, blob=parts[2])
        return found

    def files_under(self, side: Side, folder: str) -> dict[str, bytes]:
        """Every file of the project's ``folder`` (such as ``policy/``) on a side, by its path in the project:
        at a revision what git holds, in the work tree what git tracks or would (not what it ignores)."""
        if side.commit is None:
            listing = self._git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder) or ""
            names = sorted({name for name in listing.split("\0") if name})
            return {name: (self.project_dir / name).read_bytes() for name in names
                    if (self.project_dir / name).is_file()}
        listing = self._git("ls-tree", "-r", "-z", side.commit, "--", folder, flag=side.flag) or ""
        found = {}
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                found[path] = subprocess.run(["git", "cat-file", "blob", parts[2]], cwd=self.project_dir,
                                             capture_output=True, check=True).stdout
        return found

    def check_size(self, side: Side, stack: str) -> None:
        """A stack file past the stack-file limit (fleetspec.load) is refused unread."""
        file = side.files[stack]
        if file.size > MAX_STACK_FILE_BYTES:
            raise RevisionError(
                side.flag,
                f"{side.label}:{self.prefix}{file.name} is larger than {MAX_STACK_FILE_BYTES // (1024 * 1024)} MiB",
            )

    def read(self, side: Side, stack: str) -> bytes:
        """The bytes of a side's stack file; refused unread past the stack-file limit."""
        self.check_size(side, stack)
        file = side.files[stack]
        if file.path is not None:
            return file.path.read_bytes()
        done = subprocess.run(["git", "cat-file", "blob", str(file.blob)], cwd=self.project_dir, capture_output=True,
                              check=False)
        if done.returncode != 0:
            raise RevisionError(side.flag, f"cannot read {side.label}:{self.prefix}{file.name}: {done.stderr.decode().strip()}")
        return done.stdout

    def display_path(self, side: Side, stack: str) -> str:
        """How a report names a side's stack file: ``REV:path`` at a revision, the path in the work tree."""
        name = f"{self.prefix}{side.files[stack].name}"
        return name if side.commit is None else f"{side.label}:{name}"
