"""`make sandbox`: a local cluster to try the live verbs on, seeded from a canary stack file, in a minute and
without a cloud.

    make sandbox                                     # the example AKS canary (STACK=eks-canary, existing-canary, ...)
    .venv/bin/python -m scripts.sandbox --stack team-a-canary --dir .sandbox

It is the test cluster of the fast tier, nothing more: the fake API server (tests/fakekube) seeded with the canary
stack's pools and models and moved through the upgrade to its target driver (tests/checks/verify_world.py), the
canary model's pods answering through the API server's pod proxy, and a real Prometheus (Debian's, `make
prometheus`) backfilled with the DCGM, vLLM and kube-state-metrics history of a soak as long as the prod stack
promoted from the canary asks, behind the Service the stack's ``validation.prometheus`` names. It writes a
kubeconfig to ``<dir>/kubeconfig``, prints the commands to try (preflight, watch, pause and resume, verify),
and serves until interrupted (Ctrl-C) or ``--hold`` seconds have passed. Nothing of it reaches a real cluster; a
verify there attests nothing a gate trusts (no signing key is given, and its attestations go to ``<dir>``).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path

from fleetspec.load import load_stack_file
from scripts.attest_examples import soaked_cluster
from tests.checks.verify_world import PROMETHEUS_SERVICE
from tests.conftest import PROJECT_DIR
from tests.prometheus.server import MISSING, binary


def commands(stack_file: Path, kubeconfig: Path, project: Path) -> list[str]:
    """What to try against the sandbox, each a command a user types in the checkout."""
    target = f"--stack-file {shlex.quote(str(stack_file))} --kubeconfig {shlex.quote(str(kubeconfig))}"
    return [
        f".venv/bin/gpu-rollout preflight {target}",
        f".venv/bin/gpu-rollout watch {target} --once",
        f".venv/bin/gpu-rollout pause {target}",
        f".venv/bin/gpu-rollout resume {target}",
        f".venv/bin/gpu-rollout verify {target} --project-dir {shlex.quote(str(project))}",
    ]


def serve(stack: str, directory: Path, hold: float | None, ready: threading.Event | None = None,
          stop: threading.Event | None = None) -> int:
    """Serve the sandbox of canary stack ``stack`` from ``directory`` until ``hold`` seconds pass, ``stop`` is set,
    SIGTERM or Ctrl-C; ``ready`` is set once the commands it prints can be run."""
    stack_file = PROJECT_DIR / f"Pulumi.{stack}.yaml"
    spec = load_stack_file(stack_file)
    if spec.stage.value != "canary":
        sys.stderr.write(f"sandbox: {stack} is a {spec.stage.value} stack; the sandbox plays a canary's cluster "
                         "after its upgrade (give a canary stack)\n")
        return 2
    directory.mkdir(parents=True, exist_ok=True)
    project = directory / "project"  # where a sandbox verify writes its (unsigned) attestations
    project.mkdir(exist_ok=True)
    (project / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    stopped = stop if stop is not None else threading.Event()
    with soaked_cluster(stack_file, directory) as (fake, kubeconfig):
        print(f"sandbox: the cluster of {stack} after its upgrade, at {fake.url} (kubeconfig {kubeconfig});"
              f" Prometheus behind {PROMETHEUS_SERVICE[0]}/{PROMETHEUS_SERVICE[1]}. Try, from the checkout:")
        for line in commands(stack_file, kubeconfig, project):
            print(f"  {line}")
        print("Ctrl-C stops it." if hold is None else f"It stops in {hold:.0f} s.", flush=True)
        if ready is not None:
            ready.set()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stopped.set())
        try:
            stopped.wait(hold)
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="canary", help="a canary stack of this project (default: canary)")
    parser.add_argument("--dir", type=Path, default=PROJECT_DIR / ".sandbox",
                        help="where the kubeconfig, Prometheus' data and a verify's attestations go")
    parser.add_argument("--hold", type=float, default=None, help="seconds to serve (default: until Ctrl-C)")
    args = parser.parse_args(argv)
    if binary("prometheus") is None or binary("promtool") is None:
        sys.stderr.write(MISSING + "\n")
        return 1
    return serve(args.stack, args.dir.resolve(), args.hold)


if __name__ == "__main__":
    raise SystemExit(main())
