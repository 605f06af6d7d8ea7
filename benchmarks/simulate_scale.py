"""How `gpu-rollout simulate` scales: wall time and peak memory for fleets of 100, 1,000 and 10,000 nodes of 8 GPUs
with 5 replicas per 8 GPUs of capacity (1-GPU replicas, 50 per model keeping 45, weights cached), four pools in
four waves, one NVIDIADriver each (maxParallelUpgrades 10, pod deletion timing out after 300 s).

Each size runs in a fresh interpreter, so its peak resident memory is its own. Prints, per size: the simulation of
the configured policy alone, then the whole verb's work (that run, the lower bound and the search for the safest
fast parallelism with its confirming runs). Figures only; nothing is asserted about time.

    .venv/bin/python -m benchmarks.simulate_scale
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from simulate.assess import assess
from simulate.engine import simulate
from simulate.fleet import NVIDIA_DRIVER, Fleet, Group, Model, Node, Policy, Pool
from fleetspec.simulation import Simulation

SIZES = (100, 1_000, 10_000)
POOLS = 4
GPUS_PER_NODE = 8
REPLICAS_PER_NODE = 5  # 5 replicas per 8 GPUs of capacity
REPLICAS_PER_MODEL = 50


def fleet(nodes: int) -> Fleet:
    pools, members, models, groups = [], [], [], []
    per_pool = max(1, nodes // POOLS)
    for k in range(POOLS):
        name = f"pool{k}"
        pools.append(Pool(name, k, GPUS_PER_NODE))
        members += [Node(f"{name}-{i:05d}", name, GPUS_PER_NODE) for i in range(per_pool)]
        replicas = per_pool * REPLICAS_PER_NODE
        for j in range(max(1, replicas // REPLICAS_PER_MODEL)):
            size = min(REPLICAS_PER_MODEL, replicas)
            models.append(Model(f"serving/{name}-m{j}", size, 1, size * 9 // 10, (name,), 180,
                                (size * 9 // 10, None), f"serving/{name}-m{j}-pdb"))
        groups.append(Group(NVIDIA_DRIVER, f"gpu-{name}", (name,),
                            Policy(max_parallel=min(10, per_pool), max_unavailable="25%", deletion_timeout=300)))
    return Fleet(tuple(pools), tuple(members), tuple(models), tuple(groups), Simulation(), place_replicas=True)


def measure(nodes: int) -> dict[str, float]:
    """One size, in this interpreter: seconds of one simulation, of the whole assessment, and the peak RSS."""
    built = fleet(nodes)
    start = time.perf_counter()
    outcome = simulate(built, seed=0)
    one = time.perf_counter() - start
    start = time.perf_counter()
    assessment = assess(built, seed=0)
    whole = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"nodes": len(built.nodes), "replicas": sum(m.replicas for m in built.models),
            "simulate_seconds": one, "assess_seconds": whole, "peak_mb": peak_kib / 1024,
            "predicted_hours": (outcome.seconds or 0) / 3600,
            "recommended": assessment.recommended.max_parallel or 0}


def main() -> None:
    print(f"{'nodes':>6} {'replicas':>9} {'simulate s':>11} {'with search s':>14} {'peak MB':>8} "
          f"{'predicted h':>12} {'recommended':>12}")
    for nodes in SIZES:
        done = subprocess.run([sys.executable, "-m", "benchmarks.simulate_scale", "--one", str(nodes)],
                              capture_output=True, text=True, check=True)
        row = json.loads(done.stdout)
        print(f"{row['nodes']:>6} {row['replicas']:>9} {row['simulate_seconds']:>11.2f} {row['assess_seconds']:>14.2f} "
              f"{row['peak_mb']:>8.0f} {row['predicted_hours']:>12.1f} {row['recommended']:>12}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
    else:
        main()
