"""How the offline plan scales with the fleet: CPU and wall seconds and peak memory of `gpu-rollout plan --json` on
generated prod stacks of 3, 50 and 150 GPU pools (one model each), as a pull request plans them: promoted from
the canary example beside them, their last deployment the stack file at the merge base (one change ticket
differs), so a plan renders the canary, the last deployment and the stack itself. Each is planned three ways
against the cache of renderings (preview/renderings.py): cold (emptied before the run: all three rendered), a new
change (the change ticket edited since the plan before: the stack itself rendered, the canary and the last
deployment kept, as a pull request's next push plans) and warm (the same plan run before: nothing rendered).
Then the prod example against the cost of importing the SDKs the program needs, cold and warm. Best of three
each; CPU time (user + system) is what the ratios are taken on: on a shared machine wall time mostly measures
the neighbours. Prints figures; asserts nothing about time.

    .venv/bin/python -m benchmarks.plan_scale

Targets (issues 8 and 38): 150 pools within 3x the 3-pool time and under 250 MB; the prod example within 1.3x of
importing the SDKs.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from preview.renderings import CACHE_ENV
from preview.run import SOURCE_DIR

SIZES = (3, 50, 150)
ROUNDS = 3
SDK_PACKAGES = ("pulumi", "pulumi_aws", "pulumi_azure_native", "pulumi_kubernetes", "pydantic", "yaml")
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def fleet_stack(pools: int) -> dict[str, Any]:
    """The prod example grown to ``pools`` T4-style pools, each with one model of two replicas."""
    document = yaml.safe_load((SOURCE_DIR / "Pulumi.prod.yaml").read_text())
    config = document["config"]
    template = copy.deepcopy(config["gpu-driver-upgrade:nodePools"][0])
    model = copy.deepcopy(config["gpu-driver-upgrade:models"][-1])
    config["gpu-driver-upgrade:nodePools"] = []
    config["gpu-driver-upgrade:models"] = []
    for index in range(pools):
        pool = copy.deepcopy(template)
        pool["name"] = f"gpup{index}"
        pool["rollout"] = {"wave": index % 5, "released": True}
        config["gpu-driver-upgrade:nodePools"].append(pool)
        served = copy.deepcopy(model)
        served["name"] = f"model-{index}"
        served["matchLabels"] = {"app": f"model-{index}"}
        served["nodePools"] = [pool["name"]]
        config["gpu-driver-upgrade:models"].append(served)
    config.pop("gpu-driver-upgrade:promotion", None)
    return document


def promoted_stack(pools: int) -> dict[str, Any]:
    """:func:`fleet_stack` promoted from the canary example as the prod example is, each pool with the prod
    example's waiver of its T4 pool."""
    document = fleet_stack(pools)
    promotion = yaml.safe_load((SOURCE_DIR / "Pulumi.prod.yaml").read_text())["config"]["gpu-driver-upgrade:promotion"]
    waiver = promotion["waivers"]["gput4"]
    promotion["waivers"] = {pool["name"]: copy.deepcopy(waiver)
                            for pool in document["config"]["gpu-driver-upgrade:nodePools"]}
    document["config"]["gpu-driver-upgrade:promotion"] = promotion
    return document


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, capture_output=True, check=True, env={**os.environ, **_GIT_ENV})


def edit_change_ticket(path: Path, ticket: str) -> None:
    """A new change to a stack file: its change ticket, nothing else."""
    document = yaml.safe_load(path.read_text())
    document["config"]["gpu-driver-upgrade:changeTicket"] = ticket
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def scale_project(root: Path, pools: int) -> str:
    """A git repository at ``root``: the program, the canary example, its attestations and the promoted stack of
    ``pools`` pools, committed on main; the stack's change ticket edited in the work tree. Returns the stack."""
    stack = f"scale{pools}"
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.canary.yaml"):
        shutil.copyfile(SOURCE_DIR / name, root / name)
    shutil.copytree(SOURCE_DIR / "attestations", root / "attestations")
    document = promoted_stack(pools)
    path = root / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "the fleet")
    document["config"]["gpu-driver-upgrade:changeTicket"] = "CHG-BENCH-NEXT"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return stack


class Cost(NamedTuple):
    """One child process, from wait4's rusage: CPU seconds (user + system), wall seconds, peak resident MB."""

    cpu: float
    wall: float
    peak: float


def _child(args: list[str], cache: Path | None = None, cwd: Path = SOURCE_DIR) -> Cost:
    env = {**os.environ, **_GIT_ENV}
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    start = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    # A plan that rendered exits 0, or 1 when a mandatory policy fails: both cost a whole plan. Anything
    # else (bad input, a defect) means the figure measures no plan.
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)} exited {process.returncode}")
    return Cost(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def best(costs: list[Cost]) -> Cost:
    """Each figure at its least over the rounds (load from other processes only ever adds)."""
    return Cost(min(c.cpu for c in costs), min(c.wall for c in costs), min(c.peak for c in costs))


def cold_and_warm(args: list[str], cache: Path) -> tuple[Cost, Cost]:
    """Best of ``ROUNDS`` with the cache emptied before each run, then best of ``ROUNDS`` with it filled;
    interleaved, so load from other processes falls on both alike."""
    cold, warm = [], []
    for _ in range(ROUNDS):
        shutil.rmtree(cache, ignore_errors=True)
        cold.append(_child(args, cache))
        warm.append(_child(args, cache))  # the run before filled it
    return best(cold), best(warm)


def three_ways(args: list[str], cache: Path, stack_file: Path) -> tuple[Cost, Cost, Cost]:
    """Best of ``ROUNDS`` each: cold (the cache emptied), a new change (the change ticket edited after the run
    before) and warm (the same plan again); interleaved, so load from other processes falls on all alike."""
    cold, changed, warm = [], [], []
    for round_ in range(ROUNDS):
        shutil.rmtree(cache, ignore_errors=True)
        cold.append(_child(args, cache))
        edit_change_ticket(stack_file, f"CHG-BENCH-{round_}")
        changed.append(_child(args, cache))
        warm.append(_child(args, cache))  # the run before rendered this very file
    return best(cold), best(changed), best(warm)


def sdk_modules(stack_file: Path, cache: Path) -> list[str]:
    """The SDK modules a plan of ``stack_file`` imports (the SDKs load submodules lazily, so the top-level
    packages alone would understate the cost)."""
    script = (
        "import sys, runpy\n"
        f"sys.argv = ['gpu-rollout', 'plan', '--stack-file', {str(stack_file)!r}, '--json']\n"
        "from rollout.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {SDK_PACKAGES!r})), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=SOURCE_DIR, check=True,
                          env={**os.environ, CACHE_ENV: str(cache)})
    return done.stderr.strip().splitlines()[-1].split()


def _figure(label: str, cost: Cost) -> str:
    return f"{label} {cost.cpu:5.2f} s CPU ({cost.wall:5.2f} s wall), peak {cost.peak:3.0f} MB"


def _line(label: str, cold: Cost, warm: Cost) -> str:
    return f"{label}: {_figure('cold', cold)}; {_figure('warm', warm)}"


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for pools in SIZES:
            root = Path(folder) / f"fleet{pools}"
            stack = scale_project(root, pools)
            args = [sys.executable, "-m", "rollout", "plan", "--project-dir", str(root), "--stack", stack, "--json"]
            cold, changed, warm = three_ways(args, Path(folder) / "renderings", root / f"Pulumi.{stack}.yaml")
            rows.append((pools, cold, changed, warm))
            print(f"plan --json, {pools:>3} pools: {_figure('cold', cold)}; {_figure('a new change', changed)}; "
                  f"{_figure('warm', warm)}")
        first, last = rows[0], rows[-1]
        ratios = [last[k].cpu / first[k].cpu for k in (1, 2, 3)]
        print(f"{SIZES[-1]} pools / {SIZES[0]} pools in CPU time (target <= 3x): cold {ratios[0]:.2f}x, a new change "
              f"{ratios[1]:.2f}x, warm {ratios[2]:.2f}x; in wall time: cold {last[1].wall / first[1].wall:.2f}x, a new "
              f"change {last[2].wall / first[2].wall:.2f}x, warm {last[3].wall / first[3].wall:.2f}x; peak "
              f"{max(max(r[1].peak, r[2].peak, r[3].peak) for r in rows):.0f} MB (target <= 250 MB)")
        prod_file = SOURCE_DIR / "Pulumi.prod.yaml"
        cache = Path(folder) / "prod-renderings"
        modules = sdk_modules(prod_file, cache)
        imports = best([_child([sys.executable, "-c", "import " + ", ".join(modules)]) for _ in range(ROUNDS)])
        prod_args = [sys.executable, "-m", "rollout", "plan", "--stack-file", str(prod_file), "--json"]
        prod_cold, prod_warm = cold_and_warm(prod_args, cache)
    print(f"importing the {len(modules)} SDK modules the prod plan uses: {imports.cpu:.2f} s CPU ({imports.wall:.2f} s "
          f"wall); {_line('plan of the prod example', prod_cold, prod_warm)}; in CPU time: cold "
          f"{prod_cold.cpu / imports.cpu:.2f}x, warm {prod_warm.cpu / imports.cpu:.2f}x (target <= 1.3x); in wall "
          f"time: cold {prod_cold.wall / imports.wall:.2f}x, warm {prod_warm.wall / imports.wall:.2f}x")

    def figures(cost: Cost) -> dict[str, float]:
        return {"cpu_seconds": round(cost.cpu, 2), "wall_seconds": round(cost.wall, 2), "peak_mb": round(cost.peak)}

    print(json.dumps({"pools": [{"pools": p, "cold": figures(c), "newChange": figures(n), "warm": figures(w)}
                                for p, c, n, w in rows],
                      "imports": figures(imports), "prod": {"cold": figures(prod_cold), "warm": figures(prod_warm)}}))


if __name__ == "__main__":
    main()
