"""How `gpu-rollout simulate` scales, and how near its recommendation comes to the lower bound.

Scale: wall time and peak memory for fleets of 100, 1,000 and 10,000 nodes of 8 GPUs with 5 replicas per 8 GPUs of
capacity (1-GPU replicas, 50 per model keeping 45, weights cached), four pools in four waves, one NVIDIADriver each
(maxParallelUpgrades 10, pod deletion timing out after 300 s). Each size runs in a fresh interpreter, so its peak
resident memory is its own. Prints, per size: the simulation of the configured policy alone, then the whole verb's
work (that run, the lower bound and the search for the safest fast parallelism with its confirming runs).

Near the bound (issue 39): the example prod stack, and a generated fleet whose four pools leave different spare
capacity (7, 6, 5 and 4 replicas per 8 GPUs), each pool its own policy (``nodePools[].upgradePolicy``), configured
one node at a time (the replicas placed by the simulator's scheduler, ties at random as kube-scheduler breaks
them). Prints the predicted duration as configured and under the recommendation, each over the lower
bound (target for the recommendation: within 1.25x), the bound within what the policy pack admits with the
recommendation over it, the fewest Ready replicas any model had against its minimum
(target: never below), the parallelism and pod-deletion timeouts recommended per pool, and the search's cost
(target: under 10 s at 10,000 nodes). Then, for the prod stack and the 1,000-node fleet, the floor the search
works against (:func:`sweep`): the fastest safe run any parallelism gives each policy alone, with the pack's
parallelism rule lifted, over the lower bound. Figures only; nothing is asserted about time.

    .venv/bin/python -m benchmarks.simulate_scale
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetspec.load import load_stack_file
from simulate.assess import assess
from simulate.engine import simulate
from simulate.search import DELETION_TIMEOUT_CAP, UNLIMITED, moving_nodes, rolling_alone
from simulate.fleet import NVIDIA_DRIVER, Fleet, Group, Model, Node, Policy, Pool, fleet_from_spec
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


def measure(nodes: int) -> dict[str, float | None]:
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
            # None: the configured run never finishes (a node stopped for good), so it has no duration
            "predicted_hours": None if outcome.seconds is None else outcome.seconds / 3600,
            "recommended": assessment.recommended.max_parallel or 0}


SPREAD = (7, 6, 5, 4)  # replicas per 8 GPUs of each pool of the generated fleet: spare capacity differs by pool


def spread_fleet(nodes: int) -> Fleet:
    """The generated fleet near the bound: four pools in four waves, each with its own policy, one node at a time."""
    pools, members, models, groups = [], [], [], []
    per_pool = max(1, nodes // POOLS)
    for k, density in enumerate(SPREAD):
        name = f"pool{k}"
        pools.append(Pool(name, k, GPUS_PER_NODE))
        members += [Node(f"{name}-{i:05d}", name, GPUS_PER_NODE) for i in range(per_pool)]
        replicas = per_pool * density
        for j in range(max(1, replicas // REPLICAS_PER_MODEL)):
            size = min(REPLICAS_PER_MODEL, replicas)
            models.append(Model(f"serving/{name}-m{j}", size, 1, size * 9 // 10, (name,), 180,
                                (size * 9 // 10, None), f"serving/{name}-m{j}-pdb"))
        groups.append(Group(NVIDIA_DRIVER, f"gpu-{name}", (name,),
                            Policy(max_parallel=1, max_unavailable=1, deletion_timeout=300)))
    return Fleet(tuple(pools), tuple(members), tuple(models), tuple(groups), Simulation(), place_replicas=True,
                 per_pool_policies=True)


def near_the_bound(name: str, fleet: Fleet) -> dict[str, object]:
    """The assessment of ``fleet``: configured and recommended durations over the lower bound, the search's cost."""
    start = time.perf_counter()
    assessment = assess(fleet, seed=0)
    seconds = time.perf_counter() - start
    recommended = assessment.recommended
    outcome = recommended.outcome
    lowest = min(((m.lowest - m.minimum) for m in outcome.models), default=0) if outcome is not None else None
    values = sorted({pair[0] for pair in recommended.values if pair is not None}) if recommended.per_pool else \
        [recommended.max_parallel]
    timeouts = sorted({t for t in recommended.timeouts if t is not None})
    return {"fleet": name, "nodes": len(fleet.nodes), "lower_bound_h": assessment.lower_bound.seconds / 3600,
            "configured_h": (assessment.outcome.seconds or 0) / 3600, "configured_ratio": assessment.ratio,
            "recommended_h": None if outcome is None or outcome.seconds is None else outcome.seconds / 3600,
            "recommended_ratio": assessment.recommended_ratio, "margin": lowest,
            "within_pack_h": None if assessment.within_pack is None else assessment.within_pack.seconds / 3600,
            "within_pack_ratio": assessment.recommended_within_pack_ratio,
            "values": ", ".join(str(v) for v in values), "timeouts": ", ".join(str(t) for t in timeouts) or "-",
            "search_seconds": seconds}


def _parallelism_grid(nodes: int) -> list[int]:
    """1 to ``nodes``, each step at most a fifth larger than the one before."""
    grid, value = [], 1
    while value < nodes:
        grid.append(value)
        value = max(value + 1, value * 6 // 5)
    return [*grid, nodes]


def sweep(fleet: Fleet) -> dict[str, object]:
    """The floor the search works against: each policy run alone (seed 0) at every parallelism of a fine grid, pod
    deletion timing out at the longest a recommendation sets and the pack's parallelism rule lifted; the fastest
    run that stays safe (no model below its minimum, no node stopped on a PDB) per policy, then the waves one after
    the other, each as long as its slowest policy. Over the lower bound it estimates the part of the gap that no
    choice of per-pool parallelism closes (an estimate: one seed, each policy alone, a grid)."""
    waves: dict[int, float] = {}
    best: list[str] = []
    for k, group in enumerate(fleet.groups):
        moving = moving_nodes(fleet, group)[0]
        if not moving or not group.policy.auto_upgrade:
            continue
        alone = rolling_alone(fleet, k)
        fastest: tuple[float, int] | None = None
        for parallel in _parallelism_grid(moving):
            policy = replace(group.policy.with_parallelism(parallel, UNLIMITED), deletion_timeout=DELETION_TIMEOUT_CAP)
            outcome = simulate(alone.with_policy(k, policy), seed=0)
            spans = [span for span in outcome.pools if span.name in group.pools and span.start is not None]
            if outcome.disruptive or not spans or any(span.end is None for span in spans):
                continue
            seconds = max(span.end or 0.0 for span in spans) - min(span.start or 0.0 for span in spans)
            if fastest is None or seconds < fastest[0]:
                fastest = (seconds, parallel)
        if fastest is None:
            return {"sweep_h": None, "sweep_values": f"{group.title}: no safe parallelism"}
        wave = min(p.wave for p in fleet.pools if p.name in group.pools)
        waves[wave] = max(waves.get(wave, 0.0), fastest[0])
        best.append(str(fastest[1]))
    return {"sweep_h": sum(waves.values()) / 3600, "sweep_values": ", ".join(best)}


def _hours(value: float | None) -> str:
    return "never ends" if value is None else f"{value:.1f}"


def _ratio(value: object) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    print(f"{'nodes':>6} {'replicas':>9} {'simulate s':>11} {'with search s':>14} {'peak MB':>8} "
          f"{'predicted h':>12} {'recommended':>12}")
    for nodes in SIZES:
        row = _fresh("--one", nodes)
        print(f"{row['nodes']:>6} {row['replicas']:>9} {row['simulate_seconds']:>11.2f} {row['assess_seconds']:>14.2f} "
              f"{row['peak_mb']:>8.0f} {_hours(row['predicted_hours']):>12} {row['recommended']:>12}")
    print()
    print("near the lower bound (each pool its own policy; target: recommended / bound within 1.25, no model below "
          "its minimum, search under 10 s at 10,000 nodes)")
    print(f"{'fleet':>22} {'nodes':>6} {'bound h':>8} {'configured h':>13} {'ratio':>6} {'recommended h':>14} "
          f"{'ratio':>6} {'min margin':>11} {'per pool':>18} {'timeouts s':>10} {'search s':>9} "
          f"{'pack bound h':>13} {'ratio':>6}")
    rows = [_fresh("--prod", 0), *(_fresh("--spread", n) for n in (1_000, 10_000))]
    for row in rows:
        recommended = "-" if row["recommended_h"] is None else f"{row['recommended_h']:.2f}"
        print(f"{row['fleet']:>22} {row['nodes']:>6} {row['lower_bound_h']:>8.2f} {row['configured_h']:>13.2f} "
              f"{_ratio(row['configured_ratio']):>6} {recommended:>14} {_ratio(row['recommended_ratio']):>6} "
              f"{row['margin'] if row['margin'] is not None else '-':>11} {row['values']:>18} "
              f"{row['timeouts']:>10} {row['search_seconds']:>9.2f} "
              f"{'-' if row['within_pack_h'] is None else format(row['within_pack_h'], '.2f'):>13} "
              f"{_ratio(row['within_pack_ratio']):>6}")
    print("(pack bound: the lower bound with no pool rolling more nodes at once than the policy pack admits; the "
          "recommendation over it is what the controller's schedule costs, the step between the bounds what the "
          "pack's rules cost)")
    print()
    print(f"the floor the search works against (sweep(): each policy alone at every parallelism of a grid, pod "
          f"deletion timing out at {DELETION_TIMEOUT_CAP} s, the pack's parallelism rule lifted; the fastest safe "
          f"run of each)")
    print(f"{'fleet':>22} {'nodes':>6} {'bound h':>8} {'sweep h':>8} {'ratio':>6} {'per pool':>18}")
    for row in rows[:2]:
        swept = _fresh("--sweep-prod" if row["fleet"] == "example prod stack" else "--sweep-spread", row["nodes"])
        hours = swept["sweep_h"]
        shown = "-" if hours is None else f"{hours:.2f}"
        ratio = None if hours is None else hours / row["lower_bound_h"]
        print(f"{row['fleet']:>22} {row['nodes']:>6} {row['lower_bound_h']:>8.2f} {shown:>8} {_ratio(ratio):>6} "
              f"{swept['sweep_values']:>18}")


def _fresh(what: str, nodes: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.simulate_scale", what, str(nodes)],
                          capture_output=True, text=True, check=True)
    row: dict[str, Any] = json.loads(done.stdout)
    return row


def prod_example() -> Fleet:
    return fleet_from_spec(load_stack_file(Path(__file__).resolve().parent.parent / "Pulumi.prod.yaml"))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
    elif len(sys.argv) == 3 and sys.argv[1] == "--spread":
        print(json.dumps(near_the_bound("generated, 4 pools", spread_fleet(int(sys.argv[2])))))
    elif len(sys.argv) == 3 and sys.argv[1] == "--prod":
        print(json.dumps(near_the_bound("example prod stack", prod_example())))
    elif len(sys.argv) == 3 and sys.argv[1] == "--sweep-spread":
        print(json.dumps(sweep(spread_fleet(int(sys.argv[2])))))
    elif len(sys.argv) == 3 and sys.argv[1] == "--sweep-prod":
        print(json.dumps(sweep(prod_example())))
    else:
        main()
