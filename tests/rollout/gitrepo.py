"""A throwaway git repository holding a copy of the project's stack files, for `gpu-rollout diff` tests:
real commits, edited the way a person edits a stack file (load, change one key, write back)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR

# A fixed identity and no user or system config: the tests must not depend on the machine's git setup.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "diff test", "GIT_AUTHOR_EMAIL": "diff@example.invalid",
    "GIT_COMMITTER_NAME": "diff test", "GIT_COMMITTER_EMAIL": "diff@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    def __init__(self, root: Path, branch: str = "main") -> None:
        self.root = root
        root.mkdir(parents=True)
        self.git("init", "-q", "-b", branch)
        for name in ("Pulumi.yaml", "__main__.py", *(f"Pulumi.{stack}.yaml" for stack in EXAMPLE_STACKS)):
            shutil.copyfile(PROJECT_DIR / name, root / name)
        self.commit("the example stacks")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=True,
                              env={**os.environ, **GIT_ENV})
        return done.stdout.strip()

    def commit(self, message: str) -> str:
        # An empty index first: git trusts a file's size and mtime, and a test rewrites files of one size
        # within one second (a racily clean entry would keep the old content).
        self.git("read-tree", "--empty")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def edit(self, stack: str, key: str, change: Callable[[Any], object]) -> None:
        """Change the value of ``gpu-driver-upgrade:<key>`` in Pulumi.<stack>.yaml in place."""
        path = self.root / f"Pulumi.{stack}.yaml"
        document = yaml.safe_load(path.read_text())
        change(document["config"][f"gpu-driver-upgrade:{key}"])
        path.write_text(yaml.safe_dump(document, sort_keys=False))

    def pool(self, stack: str, name: str, change: Callable[[dict[str, Any]], object]) -> None:
        def edit(pools: list[dict[str, Any]]) -> None:
            (pool,) = [p for p in pools if p["name"] == name]
            change(pool)

        self.edit(stack, "nodePools", edit)
