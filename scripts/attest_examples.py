"""The attestations the example prod stacks ship, made the way a canary's are: `gpu-rollout verify` of each
example canary stack against the test cluster, never written by hand.

    .venv/bin/python -m scripts.attest_examples            # all three example canaries (make attest-examples)
    .venv/bin/python -m scripts.attest_examples --stack eks-canary --out /tmp/project

The test cluster is the one tests/checks/test_verify.py checks verify against: the fake API server
(tests/fakekube) seeded with the canary stack's cluster and moved through the upgrade to its target driver
(tests/checks/verify_world.py), the canary model's pods answering through the API server's pod proxy (a
loopback OpenAI-compatible server each), and a real Prometheus (Debian's, `make prometheus`) backfilled with
the DCGM, vLLM and kube-state-metrics history of that upgrade, reached through the API server's service proxy
as the stack's ``validation.prometheus`` names it (no ``--prometheus``), the way the soak workflow reaches it.
The canary nodes finished their upgrade ``minSoakHours`` of the prod stack promoted from the canary plus
``SOAK_MARGIN_HOURS`` ago, so the soak the attestation records is long enough for the prod gate.

Each canary is verified with the real CLI (``python -m rollout verify``) in a process of its own, signing with
the example key (tests/data/example-attestation-key.pem, in ``GPU_ROLLOUT_SIGNING_KEY``), on the
example stack file as it is, with ``--project-dir`` the folder that receives ``attestations/<canary>/<driver>.json``
(default: this checkout; the commit recorded is its HEAD). Re-running replaces each file with one whose soak
ended later (verify never replaces a newer one). Exit 0 when every canary passed and was attested; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fleetspec.load import load_stack_file
from tests.checks.verify_world import PROMETHEUS_SERVICE, ProxyKube, Soak, build, history, promoted_from
from engine_contracts.attestation import SIGNING_KEY_ENV
from tests.conftest import EXAMPLE_KEY_FILE, PROJECT_DIR
from tests.prometheus.server import MISSING, binary, start
from tests.workload.openai_server import Behaviour, OpenAIServer

EXAMPLE_CANARIES = ("canary", "eks-canary", "existing-canary")
SOAK_MARGIN_HOURS = 2  # beyond the prod stack's promotion.minSoakHours
VERIFY_TIMEOUT = 300  # seconds for one verify run


def soak_hours(canary: str) -> float:
    """How long the canary has soaked on the test cluster: what its prod stack's gate asks, plus the margin."""
    promotion = promoted_from(canary).promotion
    assert promotion is not None
    return promotion.minSoakHours + SOAK_MARGIN_HOURS


@contextmanager
def soaked_cluster(stack_file: Path, workdir: Path) -> Iterator[tuple[ProxyKube, Path]]:
    """The test cluster of the canary stack ``stack_file`` after its upgrade, soaked as long as its prod stacks
    ask: the fake API server, a loopback model server behind each canary model pod, and the Prometheus with the
    soak's history behind the Service ``validation.prometheus`` names; yields the fake and a kubeconfig for the
    stack's context (in ``workdir``), and stops every server afterwards."""
    spec = load_stack_file(stack_file)
    canary = stack_file.stem.removeprefix("Pulumi.")
    servers: list[OpenAIServer] = []
    with ProxyKube() as fake:
        world = build(fake, workdir, stack_file=stack_file, soak_minutes=soak_hours(canary) * 60)
        try:
            for pod in world.canary_pods:
                server = OpenAIServer(Behaviour(model=pod.rsplit("-7d9f8c-", 1)[0])).start()
                fake.backends[("inference", pod)] = server.url
                servers.append(server)
            context = spec.cluster.existing.context if spec.cluster.existing else "fake"
            kubeconfig = fake.write_kubeconfig(workdir / "kubeconfig", context=context)
            with start(history(world, soak=Soak(kube_state_metrics=True)), workdir / "prometheus") as url:
                fake.services[PROMETHEUS_SERVICE] = url  # the Service the stack's validation.prometheus names
                yield fake, kubeconfig
        finally:
            for server in servers:
                server.stop()


def verify(canary: str, project_dir: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """`gpu-rollout verify --stack-file Pulumi.<canary>.yaml --project-dir <project_dir> --json` against the test
    cluster built for the example canary stack (its file in this checkout, unchanged)."""
    stack_file = PROJECT_DIR / f"Pulumi.{canary}.yaml"
    with soaked_cluster(stack_file, workdir) as (_, kubeconfig):
        return subprocess.run(
            [sys.executable, "-m", "rollout", "verify", "--stack-file", str(stack_file), "--project-dir",
             str(project_dir), "--kubeconfig", str(kubeconfig), "--json"],
            capture_output=True, text=True, timeout=VERIFY_TIMEOUT, cwd=PROJECT_DIR, check=False,
            env={**os.environ, SIGNING_KEY_ENV: EXAMPLE_KEY_FILE.read_text()})


def attest(canaries: tuple[str, ...], project_dir: Path) -> dict[str, str | None]:
    """Verify each canary; the attestation each wrote (None where verify did not pass or did not write one)."""
    written: dict[str, str | None] = {}
    for canary in canaries:
        with tempfile.TemporaryDirectory(prefix=f"attest-{canary}-") as workdir:
            done = verify(canary, project_dir, Path(workdir))
        try:
            written[canary] = json.loads(done.stdout).get("attestation")
        except json.JSONDecodeError:
            written[canary] = None
        if done.returncode != 0 or written[canary] is None:
            sys.stderr.write(f"{canary}: verify exited {done.returncode}\n{done.stderr}")
            written[canary] = None
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", choices=EXAMPLE_CANARIES,
                        help="an example canary stack (repeatable; default: all three)")
    parser.add_argument("--out", type=Path, default=PROJECT_DIR,
                        help="the project folder that receives attestations/ (default: this checkout)")
    args = parser.parse_args(argv)
    if binary("prometheus") is None or binary("promtool") is None:
        sys.stderr.write(MISSING + "\n")
        return 1
    written = attest(tuple(args.stack or EXAMPLE_CANARIES), args.out.resolve())
    for canary, path in written.items():
        print(f"{canary}: {path or 'NOT attested'}")
    return 0 if all(written.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
