"""`make sandbox` (scripts/sandbox.py): the commands it prints work against the cluster it serves."""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path

from typer.testing import CliRunner

from rollout.cli import app
from scripts import sandbox
from tests.prometheus.server import binary

runner = CliRunner()


def test_the_sandbox_serves_what_its_commands_need(tmp_path: Path) -> None:
    assert binary("prometheus") is not None, "make prometheus"
    ready, stop = threading.Event(), threading.Event()
    result: list[int] = []
    server = threading.Thread(target=lambda: result.append(
        sandbox.serve("canary", tmp_path, hold=300, ready=ready, stop=stop)), daemon=True)
    server.start()
    try:
        assert ready.wait(90), "the sandbox did not come up"
        lines = sandbox.commands(sandbox.PROJECT_DIR / "Pulumi.canary.yaml", tmp_path / "kubeconfig",
                                 tmp_path / "project")
        preflight, _, _, _, verify = (shlex.split(line)[1:] for line in lines)
        checked = runner.invoke(app, [*preflight, "--json"])
        document = json.loads(checked.stdout)
        assert checked.exit_code == 0 and not [c for c in document["checks"] if c["status"] == "fail"]
        verified = runner.invoke(app, [*verify, "--json"])
        document = json.loads(verified.stdout)
        # Every check of the soak passes on the sandbox; with no signing key nothing is attested (exit 1, saying so).
        assert document["checks"] and not [c for c in document["checks"] if c["status"] != "pass"]
        assert document["attestation"] is None and verified.exit_code == 1
        assert "no signing key" in verified.output
    finally:
        stop.set()
        server.join(30)
    assert result == [0]
