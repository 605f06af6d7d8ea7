"""How the guard scales (issue 35, point 5): a 10,000-node cluster's initial sync, then a burst of 1,000 node updates,
each a trigger (a node into ``upgrade-failed``), against the fake API, which speaks the watch protocol.

The fake API runs in a process of its own, the guard in another (so the peak resident memory printed is the guard's
own), as a follower (another replica holds its Lease), so it judges and writes nothing: what is measured is how long
each trigger takes from the node's update to a look of the guard that has it. Prints figures; asserts nothing about
time or memory (the targets, 300 MB and 10 s a trigger, are read off the output).

    .venv/bin/python -m benchmarks.guard_scale [NODES [BURST]]
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.checks_scale import prod_with
from checks import kube as k
from checks.guard import Assessment, Guard, GuardSettings
from fleetspec.discipline import WEEKDAYS, MaintenanceWindow, WeeklyWindow
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.fakekube.fixtures import seed
from tests.fakekube.server import FakeKube

NODES, BURST = 10_000, 1_000
NAMESPACE = "gpu-rollout-guard"


def spec_of(nodes: int) -> FleetSpec:
    """The prod stack at ``nodes`` nodes, its window open around the clock (the burst is no outside-window)."""
    spec = prod_with(nodes)
    always = MaintenanceWindow(timeZone="UTC", weekly=[WeeklyWindow(days=list(WEEKDAYS), start="00:00", end="24:00")])
    return spec.model_copy(update={"rollout": spec.rollout.model_copy(update={"maintenanceWindow": always})})


def serve(nodes: int) -> None:
    """The fake API seeded with ``nodes`` nodes and the guard's Lease held by another replica. Prints its kubeconfig;
    then, for each ``burst N`` on stdin, moves N released nodes into upgrade-failed and prints when each moved."""
    spec = spec_of(nodes)
    with FakeKube() as fake, tempfile.TemporaryDirectory() as tmp:
        seed(fake, spec)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() + 86400))
        fake.add({"kind": "Lease", "metadata": {"name": "gpu-rollout-guard", "namespace": NAMESPACE},
                  "spec": {"holderIdentity": "the-other-replica", "leaseDurationSeconds": 86400, "renewTime": stamp}})
        path = fake.write_kubeconfig(Path(tmp) / "kubeconfig")
        released = {p.name for p in spec.nodePools if not spec.pool_held(p)}
        names = sorted(n["metadata"]["name"] for n in fake.objects("nodes")
                       if (n["metadata"].get("labels") or {}).get(labels.POOL) in released)
        print(json.dumps({"kubeconfig": str(path), "nodes": len(fake.store["nodes"])}), flush=True)
        for line in sys.stdin:
            count = int(line.split()[1])
            moved: dict[str, float] = {}
            for name in names[:count]:
                fake.update("nodes", name, {"metadata": {"labels": {labels.UPGRADE_STATE: labels.UPGRADE_FAILED}}})
                moved[name] = time.time()
            print(json.dumps(moved), flush=True)


def guard(nodes: int, kubeconfig: str) -> None:
    """The guard, following: prints the initial sync's figures, then, for ``expect N`` on stdin, when each of N
    triggers was first in a look, and the peak resident memory."""
    spec = spec_of(nodes)
    seen: dict[str, float] = {}
    looks: list[float] = []
    arrived = threading.Condition()

    def on_look(found: Assessment) -> None:
        now = time.time()
        with arrived:
            looks.append(found.seconds)
            for trigger in found.triggers:
                seen.setdefault(trigger.subject, now)
            arrived.notify_all()

    kube = k.connect(kubeconfig, settings=k.ClientSettings())
    watcher = Guard(kube, spec, "prod", "bench-guard", lease_namespace=NAMESPACE, on_look=on_look,
                    settings=GuardSettings(tick=15.0, settle=0.5))
    start = time.perf_counter()
    watcher.start()
    with arrived:
        arrived.wait_for(lambda: looks, timeout=600)
    print(json.dumps({"sync_seconds": time.perf_counter() - start, "first_look_seconds": looks[0] if looks else None,
                      "leader": watcher.leadership.leader, "peak_mb": _peak_mb()}), flush=True)
    for line in sys.stdin:
        count = int(line.split()[1])
        with arrived:
            arrived.wait_for(lambda count=count: len(seen) >= count, timeout=600)
        print(json.dumps({"seen": seen, "looks": len(looks), "look_seconds_max": max(looks), "peak_mb": _peak_mb()}),
              flush=True)
    watcher.stop()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(nodes: int = NODES, burst: int = BURST) -> dict[str, Any]:
    """The fake API and the guard, each a process; the initial sync, then the burst. Figures, never a verdict."""
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.guard_scale", "--serve", str(nodes)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    watcher = None
    try:
        assert server.stdin is not None and server.stdout is not None
        ready = json.loads(server.stdout.readline())
        watcher = subprocess.Popen([sys.executable, "-m", "benchmarks.guard_scale", "--guard", str(nodes),
                                    ready["kubeconfig"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert watcher.stdin is not None and watcher.stdout is not None
        synced = json.loads(watcher.stdout.readline())
        server.stdin.write(f"burst {burst}\n")
        server.stdin.flush()
        moved = json.loads(server.stdout.readline())
        watcher.stdin.write(f"expect {len(moved)}\n")
        watcher.stdin.flush()
        after = json.loads(watcher.stdout.readline())
        latencies = sorted(after["seen"][node] - at for node, at in moved.items() if node in after["seen"])
        return {"nodes": ready["nodes"], "burst": len(moved), "seen": len(latencies),
                "sync_seconds": synced["sync_seconds"], "first_look_seconds": synced["first_look_seconds"],
                "leader": synced["leader"], "peak_mb_after_sync": synced["peak_mb"], "peak_mb": after["peak_mb"],
                "looks": after["looks"], "look_seconds_max": after["look_seconds_max"],
                "latency_p50": statistics.median(latencies) if latencies else None,
                "latency_p95": latencies[int(0.95 * (len(latencies) - 1))] if latencies else None,
                "latency_max": latencies[-1] if latencies else None}
    finally:
        for process in (watcher, server):
            if process is not None and process.stdin is not None:
                process.stdin.close()
        for process in (watcher, server):
            if process is not None:
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()


def main(nodes: int = NODES, burst: int = BURST) -> None:
    row = measure(nodes, burst)
    print(f"guard at scale: {row['nodes']} nodes, a burst of {row['burst']} node updates, each a trigger")
    print(f"  initial sync (LISTs, watches, first look): {row['sync_seconds']:.1f} s; first look judged in "
          f"{row['first_look_seconds']:.2f} s; following (writes nothing): {not row['leader']}")
    print(f"  peak resident memory of the guard: {row['peak_mb_after_sync']:.0f} MB after the sync, "
          f"{row['peak_mb']:.0f} MB after the burst (target: under 300 MB)")
    print(f"  triggers seen: {row['seen']} of {row['burst']}, over {row['looks']} looks (the longest judged in "
          f"{row['look_seconds_max']:.2f} s)")
    if row["latency_max"] is not None:
        print(f"  from a node's update to a look that has its trigger: p50 {row['latency_p50']:.1f} s, "
              f"p95 {row['latency_p95']:.1f} s, max {row['latency_max']:.1f} s (target: under 10 s each)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--guard"]:
        guard(int(sys.argv[2]), sys.argv[3])
    else:
        main(*(int(a) for a in sys.argv[1:3]))
