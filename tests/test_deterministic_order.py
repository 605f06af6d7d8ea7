"""Every list the product prints is in an order of meaning, never in hash order or in the order the SDK's
tasks finished: `plan --json` of every example stack, `diff --json` of a change to four stacks and the
pack's findings are byte-identical across interpreters started with different ``PYTHONHASHSEED``s, the
pack being handed the resources in a differently shuffled order each time (tests/order_probe.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_DIR

SEEDS = ("0", "1", "2")
FIXED_GIT_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def test_plan_diff_and_pack_print_the_same_bytes_under_any_hash_seed_and_arrival_order(tmp_path: Path) -> None:
    running = []
    for seed in SEEDS:
        env = {**os.environ, **FIXED_GIT_DATES, "PYTHONHASHSEED": seed}
        running.append(subprocess.Popen(
            [sys.executable, "-m", "tests.order_probe", str(tmp_path / f"seed-{seed}"), seed],
            cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ))
    printed = []
    for seed, process in zip(SEEDS, running, strict=True):
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"PYTHONHASHSEED={seed}: {err.decode()[-2000:]}"
        printed.append(out)
    document = json.loads(printed[0])  # it printed every plan, findings that list several resources, a diff
    assert all("violations" in json.loads(plan) for plan in document["plan"].values())
    assert any(len(found) > 1 for found in document["pack"].values())
    assert len(json.loads(document["diff"])["stacks"]) == 4
    first = printed[0]
    for seed, out in zip(SEEDS[1:], printed[1:], strict=True):
        assert out == first, f"PYTHONHASHSEED={seed} printed otherwise than PYTHONHASHSEED={SEEDS[0]}"
