"""How the offline plan scales with the fleet: wall time and peak memory of `gpu-rollout plan --json` on
generated prod stacks of 3, 30 and 150 GPU pools (one model each), and the prod example against the cost
of importing the SDKs the program needs. Prints figures; asserts nothing about time.

    .venv/bin/python -m benchmarks.plan_scale

Targets (issue 8): 150 pools within 3x the 3-pool time and under 250 MB; the prod example within 1.3x of
importing the SDKs.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from preview.run import SOURCE_DIR

SIZES = (3, 30, 150)
SDK_PACKAGES = ("pulumi", "pulumi_aws", "pulumi_azure_native", "pulumi_kubernetes", "pydantic", "yaml")


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


def _child(args: list[str]) -> tuple[float, float]:
    """Seconds and peak resident MB of one child process (its own rusage, from wait4)."""
    start = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, cwd=SOURCE_DIR)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    # A plan that rendered exits 0, or 1 when a mandatory policy fails: both cost a whole plan. Anything
    # else (bad input, a defect) means the figure measures no plan.
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)} exited {process.returncode}")
    return seconds, usage.ru_maxrss / 1024


def plan_cost(stack_file: Path) -> tuple[float, float]:
    return _child([sys.executable, "-m", "rollout", "plan", "--stack-file", str(stack_file), "--json"])


def sdk_modules(stack_file: Path) -> list[str]:
    """The SDK modules a plan of ``stack_file`` imports (the SDKs load submodules lazily, so the top-level
    packages alone would understate the cost)."""
    script = (
        "import sys, runpy\n"
        f"sys.argv = ['gpu-rollout', 'plan', '--stack-file', {str(stack_file)!r}, '--json']\n"
        "from rollout.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {SDK_PACKAGES!r})), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=SOURCE_DIR, check=True)
    return done.stderr.strip().splitlines()[-1].split()


def import_cost(modules: list[str]) -> float:
    seconds, _ = _child([sys.executable, "-c", "import " + ", ".join(modules)])
    return seconds


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for pools in SIZES:
            path = Path(folder) / f"Pulumi.scale{pools}.yaml"
            path.write_text(yaml.safe_dump(fleet_stack(pools), sort_keys=False))
            seconds, peak = plan_cost(path)
            rows.append((pools, seconds, peak))
            print(f"plan --json, {pools:>3} pools: {seconds:6.2f} s, peak {peak:6.0f} MB")
    base = rows[0][1]
    print(f"150 pools / 3 pools: {rows[-1][1] / base:.2f}x (target <= 3x)")
    prod_file = SOURCE_DIR / "Pulumi.prod.yaml"
    modules = sdk_modules(prod_file)
    imports = min(import_cost(modules) for _ in range(3))
    prod = min(plan_cost(prod_file)[0] for _ in range(3))
    print(f"importing the {len(modules)} SDK modules the prod plan uses: {imports:.2f} s; plan of the prod "
          f"example: {prod:.2f} s ({prod / imports:.2f}x, target <= 1.3x)")
    print(json.dumps({"pools": [{"pools": p, "seconds": round(s, 2), "peak_mb": round(m)} for p, s, m in rows],
                      "import_seconds": round(imports, 2), "prod_seconds": round(prod, 2)}))


if __name__ == "__main__":
    main()
