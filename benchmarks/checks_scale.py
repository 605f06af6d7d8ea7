"""How preflight scales: API calls and seconds on 10, 100 and 1,000 GPU nodes (10 pods each).

Runs the real preflight through the real client against the fake API on loopback. Prints figures; it
asserts nothing about time. LIST queries stay constant as the fleet grows (no per-node calls): one LIST
of every node, classified in memory into the stack's pools (project label, cloud pool label or declared
selector, which no single label selector can express), the stacks' identity records, pods, Deployments,
PDBs, the operator's DaemonSets, ClusterPolicies and NVIDIADrivers. Only continuation pages grow, one per
``page_size`` objects, because large lists are paged on purpose.

    .venv/bin/python -m benchmarks.checks_scale
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from checks import kube as k
from checks.preflight import run_preflight
from rollout.project import SOURCE_DIR
from spec.load import read_stack_file, spec_from_config
from spec.model import FleetSpec
from tests.fakekube.fixtures import seed
from tests.fakekube.server import FakeKube

PODS_PER_NODE = 10


def prod_with(nodes: int) -> FleetSpec:
    """The prod stack with its pools scaled to ``nodes`` GPU nodes in all (a quarter, a half, a quarter)."""
    config = read_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    pools = json.loads(config["gpu-driver-upgrade:nodePools"])
    quarter = max(1, nodes // 4)
    for pool, count in zip(pools, (quarter, nodes - 2 * quarter, quarter), strict=False):
        pool["nodeCount"] = count
    config["gpu-driver-upgrade:nodePools"] = json.dumps(pools)
    return spec_from_config(config)


def measure(nodes: int, settings: k.ClientSettings) -> dict[str, float]:
    spec = prod_with(nodes)
    with FakeKube() as fake, tempfile.TemporaryDirectory() as tmp:
        # Each node: its driver pod, its validator pod, 8 node agents; the model replicas come on top.
        seed(fake, spec, filler_pods_per_node=PODS_PER_NODE - 2)
        fake.reset_counts()
        fake.pages = 0
        adapter = k.connect(str(fake.write_kubeconfig(Path(tmp) / "kubeconfig")), settings=settings)
        start = time.perf_counter()
        results = run_preflight(adapter, spec)
        seconds = time.perf_counter() - start
        return {"nodes": nodes, "pods": len(fake.store["pods"]), "queries": fake.counts["list"] - fake.pages,
                "requests": sum(fake.counts.values()), "writes": fake.writes, "checks": len(results),
                "seconds": seconds}


def main() -> None:
    for label, settings in (("page size 500 (default)", k.ClientSettings()),
                            ("one page per LIST", k.ClientSettings(page_size=100_000))):
        print(f"preflight, {label}")
        print(f"{'nodes':>6} {'pods':>7} {'LIST queries':>13} {'HTTP requests':>14} {'writes':>7} {'seconds':>8}")
        for nodes in (10, 100, 1000):
            row = measure(nodes, settings)
            print(f"{row['nodes']:>6} {row['pods']:>7} {row['queries']:>13} {row['requests']:>14} "
                  f"{row['writes']:>7} {row['seconds']:>8.2f}")


if __name__ == "__main__":
    main()
