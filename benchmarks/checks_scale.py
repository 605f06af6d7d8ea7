"""How preflight scales: API calls and seconds on 10, 100 and 1,000 GPU nodes (10 pods each).

Runs the real preflight through the real client against the fake API on loopback. Prints figures; it
asserts nothing about time. LIST queries stay constant as the fleet grows (no per-node calls): one LIST
of every node, classified in memory into the stack's pools (project label, cloud pool label or declared
selector, which no single label selector can express), the stacks' identity records, pods, Deployments,
PDBs, the operator's DaemonSets, ClusterPolicies and NVIDIADrivers. Only continuation pages grow, one per
``page_size`` objects, because large lists are paged on purpose.

    .venv/bin/python -m benchmarks.checks_scale

At scale (``make bench``): preflight, verify's read and ``simulate --from-cluster``'s read of 1,000, 3,000 and
10,000 GPU nodes with 8 pods each (driver, validator and six node agents; the model replicas come on top), the fake
API in a process of its own and each read in a fresh interpreter, so the seconds and the peak resident memory are
the reader's own. Verify's test requests to the model pods are answered in memory: they are no read.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checks import kube as k
from checks.preflight import run_preflight
from rollout.project import SOURCE_DIR
from fleetspec.load import read_stack_file, spec_from_config
from fleetspec.model import FleetSpec
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


SIZES = (1_000, 3_000, 10_000)
PODS_PER_NODE_AT_SCALE = 8
VERBS = ("preflight", "verify", "simulate")


def serve(nodes: int) -> None:
    """The fake API seeded with ``nodes`` nodes, until stdin closes; prints its kubeconfig and pod count."""
    spec = prod_with(nodes)
    with FakeKube() as fake, tempfile.TemporaryDirectory() as tmp:
        seed(fake, spec, filler_pods_per_node=PODS_PER_NODE_AT_SCALE - 2)
        path = fake.write_kubeconfig(Path(tmp) / "kubeconfig")
        print(json.dumps({"kubeconfig": str(path), "pods": len(fake.store["pods"])}), flush=True)
        sys.stdin.read()


def _answer(pod: Any, port: int, path: str, body: Any = None) -> dict[str, Any]:
    """A model server's answer to verify's test request, in memory."""
    return {"data": [{"id": "model"}], "choices": [{"text": "hello"}], "usage": {"completion_tokens": 2},
            "generated_text": "hello", "text_output": "hello"}


def read(verb: str, nodes: int, kubeconfig: str) -> dict[str, float]:
    """One verb's read of the cluster, in this interpreter: seconds and peak resident memory."""
    from checks import snapshot, verify_read

    spec = prod_with(nodes)
    adapter = k.connect(kubeconfig, settings=k.ClientSettings())
    start = time.perf_counter()
    if verb == "preflight":
        count = len(run_preflight(adapter, spec))
    elif verb == "verify":
        count = len(verify_read.gather(adapter, spec, None, ask=_answer).nodes)
    else:
        count = len(snapshot.read_fleet(adapter, spec).nodes)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak, "count": count}


def at_scale() -> None:
    print("reads at scale: the fake API in its own process, each read in a fresh interpreter")
    print(f"{'nodes':>6} {'pods':>7} {'verb':>10} {'seconds':>8} {'peak MB':>8}")
    for nodes in SIZES:
        server = subprocess.Popen([sys.executable, "-m", "benchmarks.checks_scale", "--serve", str(nodes)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            ready = json.loads(server.stdout.readline())
            for verb in VERBS:
                done = subprocess.run([sys.executable, "-m", "benchmarks.checks_scale", "--read", verb, str(nodes),
                                       ready["kubeconfig"]], capture_output=True, text=True, check=True)
                row = json.loads(done.stdout)
                print(f"{nodes:>6} {ready['pods']:>7} {verb:>10} {row['seconds']:>8.2f} {row['peak_mb']:>8.0f}")
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=60)


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
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--read"]:
        print(json.dumps(read(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
    elif sys.argv[1:2] == ["--at-scale"]:
        at_scale()
    else:
        main()
        at_scale()
