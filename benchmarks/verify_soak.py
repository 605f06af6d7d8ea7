"""What `gpu-rollout verify` costs over a week of soak, coverage judged (DCGM samples per GPU per hour): a 50-node canary (8 GPUs a node, a model pod of 8 GPUs on
each) soaked 168 hours, against a real Prometheus backfilled with that week (tests/prometheus: DCGM for every GPU,
vLLM for every model pod, kube-state-metrics; every 5 minutes, every 30 s in the last hour).

    .venv/bin/python -m benchmarks.verify_soak          # make bench

The fake API (tests/checks/verify_world.py) is served by this process; verify's read and checks run in a fresh
interpreter (``--read``), so the seconds and the peak resident memory printed are verify's own. The test requests
to the model pods are answered in memory: they are no read. Prints figures; it asserts nothing about time.
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

import yaml

from rollout.project import SOURCE_DIR

NODES = 50
GPUS = 8
WEEK_MINUTES = 168 * 60 + 3


def _stack(directory: Path, nodes: int, gpus: int) -> Path:
    """The AKS example canary with its model's pool grown to ``nodes`` nodes of ``gpus`` H100 SXM GPUs, a model pod
    on each but one."""
    doc = yaml.safe_load((SOURCE_DIR / "Pulumi.canary.yaml").read_text(encoding="utf-8"))
    config = doc["config"]
    pool = config["gpu-driver-upgrade:nodePools"][0]
    pool.update(gpuProduct="NVIDIA-H100-80GB-HBM3", gpusPerNode=gpus, nodeCount=nodes, nvswitch=True)
    pool["aks"]["vmSize"] = "Standard_ND96isr_H100_v5"
    model = config["gpu-driver-upgrade:models"][0]
    model.update(replicas=nodes - 1, gpusPerReplica=gpus, minAvailable="50%")
    model["serving"] = {"baselineMatchLabels": {"app": "llm-chat"}}
    config["gpu-driver-upgrade:validation"].pop("prometheus", None)
    path = directory / "Pulumi.canary.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _answer(pod: Any, port: int, path: str, body: Any = None) -> dict[str, Any]:
    return {"data": [{"id": "llm-chat"}], "choices": [{"text": " hello"}], "usage": {"completion_tokens": 2}}


def _peak_mb() -> float:
    """This process's peak resident memory: VmHWM (ru_maxrss keeps the high-water mark of the process that
    started it, the one holding the whole week of history), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read(kubeconfig: str, stack_file: str, url: str, now: float) -> dict[str, Any]:
    """verify's read and checks, in this interpreter: seconds, peak resident memory, queries and the outcome."""
    from checks import kube as k
    from checks.catalogue import CATALOGUE
    from checks.prometheus import Prometheus
    from checks.verify_read import gather
    from fleetspec.load import load_stack_file

    spec = load_stack_file(Path(stack_file))
    prometheus = Prometheus(url)
    start = time.perf_counter()
    facts = gather(k.connect(kubeconfig), spec, prometheus, now=now, ask=_answer)
    results = CATALOGUE.run("verify", facts)
    seconds = time.perf_counter() - start
    statuses: dict[str, int] = {}
    for result in results:
        statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
    cells = sum(len(c.gpus) * len(c.buckets) for c in facts.coverage.values())
    missing = sum(len(g) for c in facts.coverage.values() for g in c.missing().values())
    return {"seconds": seconds, "peak_mb": _peak_mb(),
            "queries": prometheus.requests, "nodes": len(facts.nodes), "statuses": statuses,
            "coverage": {"gpuBuckets": cells, "judged": cells - missing}}


def measure(nodes: int = NODES, gpus: int = GPUS, soak_minutes: int = WEEK_MINUTES) -> dict[str, Any]:
    """Build the canary, backfill its soak, run verify's read in a fresh interpreter: its figures."""
    from tests.checks.verify_world import ProxyKube, Soak, build, history
    from tests.prometheus.server import start

    with ProxyKube() as fake, tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        now = float(int(time.time()))
        begun = time.perf_counter()
        world = build(fake, directory, now, stack_file=_stack(directory, nodes, gpus), soak_minutes=soak_minutes,
                      like_for_like=True)
        node = world.canary_nodes[min(7, len(world.canary_nodes) - 1)]
        fatal = world.soak_start + (soak_minutes // 120) * 60 + 60  # half way through the soak
        made = history(world, soak=Soak(kube_state_metrics=True, gpus=gpus, xids=[(node, fatal, 79),
                                                                                   (node, fatal + 600, 43)]))
        samples = made.samples()
        with start(made, directory / "prometheus", timeout=600) as url:
            del made
            ready = time.perf_counter() - begun
            kubeconfig = str(fake.write_kubeconfig(directory / "kubeconfig"))
            done = subprocess.run([sys.executable, "-m", "benchmarks.verify_soak", "--read", kubeconfig,
                                   str(world.stack_file), url, str(now)], capture_output=True, text=True, check=True)
    return {**json.loads(done.stdout), "samples": samples, "ready": ready}


def main() -> None:
    from tests.prometheus.server import MISSING, binary

    if binary("prometheus") is None or binary("promtool") is None:
        print(f"verify over a week: skipped ({MISSING})")
        return
    row = measure()
    print(f"verify over a week: {row['nodes']} upgraded nodes, {GPUS} GPUs on each of the {NODES} of its model's "
          f"pool, {row['samples']:,} samples backfilled ({row['ready']:.0f} s to build and backfill)")
    coverage = row["coverage"]
    print(f"{'seconds':>8} {'peak MB':>8} {'queries':>8}  checks (the one fail: an Xid 79 half way through)")
    print(f"{row['seconds']:>8.2f} {row['peak_mb']:>8.0f} {row['queries']:>8}  "
          + ", ".join(f"{count} {status}" for status, count in sorted(row["statuses"].items())))
    print(f"coverage judged: DCGM samples in {coverage['judged']:,} of {coverage['gpuBuckets']:,} GPU-buckets "
          "(every GPU of every upgraded node, every hour of the soak); target: under 30 s and 300 MB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read"]:
        print(json.dumps(read(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))))
    else:
        main()
