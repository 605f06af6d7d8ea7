"""What `gpu-rollout diff` costs: a diff over the four example stacks (every one of their files changed, so
eight renderings and eight policy reports in one process) against one `gpu-rollout plan` of the prod stack, each
with an empty cache of renderings (preview/renderings.py: both keep every rendering, so a second run of either
renders nothing and would measure only the reading). Prints figures; asserts nothing about time.

    .venv/bin/python -m benchmarks.diff_scale

Target (issue 11): the diff within 1.5x of the plan, in CPU seconds (wall seconds printed beside them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from preview.renderings import CACHE_ENV
from preview.run import SOURCE_DIR

STACKS = ("canary", "prod", "eks-canary", "eks-prod")
ROUNDS = 5
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          env={**os.environ, **_GIT_ENV})
    return done.stdout.strip()


def changed_repo(root: Path) -> str:
    """A git repository at ``root`` holding the project and the four example stacks, committed, with every
    stack file changed in the work tree (a new change ticket: each stack re-rendered, nothing refused).
    Returns the commit to diff against."""
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    for name in ("Pulumi.yaml", "__main__.py", *(f"Pulumi.{stack}.yaml" for stack in STACKS)):
        (root / name).write_bytes((SOURCE_DIR / name).read_bytes())
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "the example stacks")
    for stack in STACKS:
        path = root / f"Pulumi.{stack}.yaml"
        document = yaml.safe_load(path.read_text())
        document["config"]["gpu-driver-upgrade:changeTicket"] = f"CHG-BENCH-{stack}"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    return _git(root, "rev-parse", "HEAD")


def _seconds(args: list[str], cwd: Path, cache: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the git it runs included) of one run that rendered, with ``cache``
    emptied first: exit 0, or 1 for a plan with a mandatory violation (the prod example has one while no canary
    attestation is in the repository). CPU time is what the ratio is judged on: on a shared machine wall time
    mostly measures the neighbours."""
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL,
                               env={**os.environ, **_GIT_ENV, CACHE_ENV: str(cache)})
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "fleet"
        base = changed_repo(root)
        diff_args = [sys.executable, "-m", "rollout", "diff", "--project-dir", str(root), "--base", base, "--markdown"]
        plan_args = [sys.executable, "-m", "rollout", "plan", "--stack", "prod", "--json"]
        # Interleaved, best of five each: load from other processes falls on both alike.
        cache = Path(folder) / "renderings"
        runs = [(_seconds(diff_args, SOURCE_DIR, cache), _seconds(plan_args, SOURCE_DIR, cache)) for _ in range(ROUNDS)]
    diff_wall, diff_cpu = min(d[0] for d, _ in runs), min(d[1] for d, _ in runs)
    plan_wall, plan_cpu = min(p[0] for _, p in runs), min(p[1] for _, p in runs)
    print(f"diff --markdown of the {len(STACKS)} example stacks (all changed): {diff_cpu:.2f} s CPU ({diff_wall:.2f} s "
          f"wall); plan of the prod example: {plan_cpu:.2f} s CPU ({plan_wall:.2f} s wall); "
          f"{diff_cpu / plan_cpu:.2f}x in CPU time (target <= 1.5x), {diff_wall / plan_wall:.2f}x in wall time")
    print(json.dumps({"diff_cpu_seconds": round(diff_cpu, 2), "plan_cpu_seconds": round(plan_cpu, 2),
                      "diff_wall_seconds": round(diff_wall, 2), "plan_wall_seconds": round(plan_wall, 2),
                      "ratio": round(diff_cpu / plan_cpu, 2)}))


if __name__ == "__main__":
    main()
