"""Issue 35, point 4: `fleet status` and `advance` take each cluster's halt from its guard (the status the guard writes
on the cluster's fleet Lease, seconds old) beside their own poll, and still work where a stack has no guard. The small
fleet of tests/rollout/test_fleet_verbs.py (its second prod stack has a cluster of its own); the guard's status is
written as the guard writes it (checks.lease)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from checks import kube as k
from checks.lease import TrainLease, micro_time
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from refusals.exits import Exit
from rollout import fleet
from tests.fakekube.plugin import FAST
from tests.rollout import test_fleet_verbs as fleet_verbs
from tests.rollout.test_fleet_verbs import CANARY, PROD_B, World, started_prod_wave

# The fleet's fixtures, shared with test_fleet_verbs.py.
repo, clusters, world = fleet_verbs.repo, fleet_verbs.clusters, fleet_verbs.world


def guard_says(world: World, stack: str, tmp_path: Path, at: float, triggers: list[dict[str, str]]) -> None:
    kube = k.connect(str(world.fakes[stack].write_kubeconfig(tmp_path / f"{stack}.kubeconfig")), settings=FAST)
    TrainLease(kube, LEASE_NAMESPACE, LEASE_NAME, f"gpu-rollout-guard/{stack}", 60).record_guard(stack, {
        "at": micro_time(at), "holder": "guard-0", "paused": True, "triggers": triggers, "drift": [],
        "driftCount": 0, "error": None})


def view_of(doc: dict[str, Any], stack: str) -> dict[str, Any]:
    return next(s["view"] for w in doc["waves"] for s in w["stacks"] if s["stack"] == stack)


FAILED = {"kind": "upgrade-failed", "subject": "node-x", "message": "node node-x (pool l40s-serving) is in "
          "upgrade-failed"}


def test_a_trigger_the_guard_saw_seconds_ago_halts_the_train(world: World, capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    started_prod_wave(world, capsys)
    guard_says(world, PROD_B, tmp_path, time.time() - 5, [FAILED])
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED
    assert doc["halt"]["stack"] == PROD_B and doc["halt"]["kind"] == "upgrade-failed"
    assert "(guard) node node-x" in doc["halt"]["message"]


def test_a_guard_that_stopped_writing_is_said_and_taken_for_nothing(world: World, capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    started_prod_wave(world, capsys)
    guard_says(world, PROD_B, tmp_path, time.time() - 3600, [FAILED])
    doc = world.status(capsys)
    guard = view_of(doc, PROD_B)["guard"]
    assert guard["fresh"] is False and guard["ageSeconds"] >= 3600 and guard["triggers"] == [FAILED]
    assert doc["signs"] == []  # an hour-old look is no sign: the poll of the cluster decides
    assert view_of(doc, CANARY)["guard"] is None  # no guard there: the poll alone, as before


def test_a_stack_without_a_guard_advances_on_its_poll_alone(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and doc["halt"] is None
    assert all(s["view"] is None or s["view"]["guard"] is None for w in doc["waves"] for s in w["stacks"])


def test_status_says_what_each_guard_saw(world: World, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    started_prod_wave(world, capsys)
    guard_says(world, PROD_B, tmp_path, time.time() - 5, [FAILED])
    assert fleet.status(world.project(), world.backend, world.reach, as_json=False) == Exit.OK
    out = capsys.readouterr().out
    assert "guard: looked " in out and ", paused; 1 trigger(s), 0 drift" in out
