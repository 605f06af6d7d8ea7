"""How the cluster side of `gpu-rollout fleet status` scales with the fleet: 5, 10 and 20 clusters of 500 GPU nodes
each (8 pods per node, the model replicas on top), every cluster a fake API server of its own, in a process of its
own, on loopback.

The read is :func:`checks.fleet.observe_all`, what `fleet status` and `fleet advance` make of the clusters: each
stack polled as `watch --once` polls it (its cluster's identity, every node, the models' Deployments and pods, the
operator's events and objects), one thread per cluster. It runs in a fresh interpreter, so the seconds and the peak
resident memory are the reader's own. Prints figures; asserts nothing about time (tests/test_benchmarks.py checks
that it runs and reads every cluster).

    .venv/bin/python -m benchmarks.fleet_scale
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.checks_scale import prod_with
from tests.fakekube.fixtures import seed
from tests.fakekube.server import FakeKube

NODES = 500
CLUSTERS = (5, 10, 20)
PODS_PER_NODE = 8


def read(kubeconfigs: list[str], nodes: int) -> dict[str, float]:
    """The clusters read at once, in this interpreter: seconds, peak resident memory, nodes seen."""
    from checks import fleet
    from checks import kube as k

    spec = prod_with(nodes)
    targets = [fleet.Target(f"prod-{index:02d}", spec,
                            lambda path=path: k.connect(path, settings=k.ClientSettings()))  # type: ignore[misc]
               for index, path in enumerate(kubeconfigs)]
    start = time.perf_counter()
    views = fleet.observe_all(targets)
    seconds = time.perf_counter() - start
    failed = [str(v) for v in views.values() if not isinstance(v, fleet.ClusterView)]
    if failed:
        raise SystemExit(f"a cluster could not be read: {failed[0]}")
    seen = sum(v.nodes for v in views.values() if isinstance(v, fleet.ClusterView))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak, "nodes": seen, "clusters": len(views)}


def serve(nodes: int, pods_per_node: int) -> None:
    """One cluster: the fake API seeded with ``nodes`` nodes, until stdin closes; prints its kubeconfig."""
    import tempfile

    with FakeKube() as fake, tempfile.TemporaryDirectory() as tmp:
        seed(fake, prod_with(nodes), filler_pods_per_node=pods_per_node - 2)
        print(json.dumps({"kubeconfig": str(fake.write_kubeconfig(Path(tmp) / "kubeconfig"))}), flush=True)
        sys.stdin.read()


def start_servers(count: int, nodes: int, pods_per_node: int) -> tuple[list[subprocess.Popen[str]], list[str]]:
    servers, kubeconfigs = [], []
    for _ in range(count):
        server = subprocess.Popen([sys.executable, "-m", "benchmarks.fleet_scale", "--serve", str(nodes),
                                   str(pods_per_node)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        servers.append(server)
    for server in servers:
        assert server.stdout is not None
        kubeconfigs.append(json.loads(server.stdout.readline())["kubeconfig"])
    return servers, kubeconfigs


def stop_servers(servers: list[subprocess.Popen[str]]) -> None:
    for server in servers:
        assert server.stdin is not None
        server.stdin.close()
    for server in servers:
        server.wait(timeout=60)


def measure(clusters: int, nodes: int = NODES, pods_per_node: int = PODS_PER_NODE) -> dict[str, float]:
    """``clusters`` fake API servers of ``nodes`` nodes each, read at once by a fresh interpreter."""
    servers, kubeconfigs = start_servers(clusters, nodes, pods_per_node)
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.fleet_scale", "--read", str(nodes),
                               *kubeconfigs], capture_output=True, text=True, check=True)
        return json.loads(done.stdout)
    finally:
        stop_servers(servers)


def main() -> None:
    print(f"fleet status, the cluster side: clusters of {NODES} GPU nodes ({PODS_PER_NODE} pods each), each a fake API "
          "in a process of its own, read at once by a fresh interpreter")
    print(f"{'clusters':>8} {'nodes':>7} {'seconds':>8} {'peak MB':>8} {'s/cluster':>10}")
    for count in CLUSTERS:
        row = measure(count)
        print(f"{count:>8} {int(row['nodes']):>7} {row['seconds']:>8.2f} {row['peak_mb']:>8.0f} "
              f"{row['seconds'] / count:>10.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["--read"]:
        print(json.dumps(read(sys.argv[3:], int(sys.argv[2]))))
    else:
        main()
    sys.exit(0)

