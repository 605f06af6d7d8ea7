"""`gpu-rollout keygen`: a key pair whose public entry the gate reads and whose private key verify signs with."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from typer.testing import CliRunner

from policy.promotion_rules import read_settings
from rollout.cli import app
from rollout.keygen import ENTRY_FILE, PRIVATE_FILE
from engine_contracts import attestation as att

runner = CliRunner()


def test_keygen_writes_a_pair_the_gate_and_verify_agree_on(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    result = runner.invoke(app, ["keygen", "--out", str(out), "--comment", "CI canary verify, 2026-12"])
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)
    assert entry == json.loads((out / ENTRY_FILE).read_text())
    assert entry["comment"] == "CI canary verify, 2026-12" and entry["id"].startswith("ed25519:")
    assert stat.S_IMODE((out / PRIVATE_FILE).stat().st_mode) == 0o600
    # The printed entry is what canary-attested.trustedKeys takes; the private key is what verify reads.
    (trusted,) = read_settings({"trustedKeys": [entry]}).trusted_keys
    key = att.signing_key_from_environment({att.SIGNING_KEY_ENV: (out / PRIVATE_FILE).read_text()})
    assert key is not None and att.key_id(key.public_key()) == trusted.id != att.EXAMPLE_KEY_ID
    assert "GPU_ROLLOUT_SIGNING_KEY" in result.stderr and "policy/prod.json" in result.stderr


def test_keygen_never_replaces_a_key(tmp_path: Path) -> None:
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path)]).exit_code == 0
    before = (tmp_path / PRIVATE_FILE).read_bytes()
    again = runner.invoke(app, ["keygen", "--out", str(tmp_path)])
    assert again.exit_code == 2 and f"{PRIVATE_FILE} exists; refusing to replace a key" in again.stderr
    assert (tmp_path / PRIVATE_FILE).read_bytes() == before
