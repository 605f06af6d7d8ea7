"""watch: each trigger is detected and pauses the rollout; time is injected, nothing sleeps."""

from __future__ import annotations

import time

import pytest

from checks import kube as k
from checks.watch import watch
from spec import labels
from spec.model import FleetSpec
from tests.fakekube.fixtures import driver_labels, move_node, pods_of, set_pod_ready
from tests.fakekube.server import FakeKube


class Clock:
    """Wall time that only moves when the watch sleeps; ``on_tick`` plays the operator between polls."""

    def __init__(self, on_tick=None) -> None:
        self.now, self.on_tick, self.sleeps = time.time(), on_tick, 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.on_tick:
            self.on_tick(self.sleeps)


def t4_nodes(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"])


def finish(fake: FakeKube, node: str, version: str) -> None:
    fake.update("nodes", node, {"metadata": {"labels": driver_labels(version)}})
    move_node(fake, node, "upgrade-done")


def test_upgrade_failed_pauses_and_exits_with_reason(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    nodes = t4_nodes(prod)
    for node in nodes:
        move_node(prod, node, "upgrade-required")
    clock = Clock(on_tick=lambda tick: move_node(prod, nodes[0], "upgrade-failed" if tick == 2 else "cordon-required"))
    outcome = watch(kube, prod_spec, "prod", interval=30, clock=clock, sleep=clock.sleep)
    assert [t.kind for t in outcome.snapshot.triggers] == ["upgrade-failed"]
    assert outcome.paused is not None and sorted(outcome.paused.changed) == nodes
    assert all(prod.obj("nodes", n)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true" for n in nodes)


def test_model_below_min_available_pauses(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    pods = pods_of(prod, "inference", {"app": "embed-triton"})
    set_pod_ready(prod, "inference", pods[0], False)
    set_pod_ready(prod, "inference", pods[1], False)  # 2 of 4 available, minAvailable 3
    move_node(prod, t4_nodes(prod)[0], "pod-deletion-required")
    outcome = watch(kube, prod_spec, "prod", once=True)
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("below-min-available", "inference/embed-triton")]
    assert outcome.paused is not None and outcome.paused.changed == [t4_nodes(prod)[0]]


def test_stuck_node_is_detected_across_polls(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    node = t4_nodes(prod)[1]
    move_node(prod, node, "validation-required")
    clock = Clock()
    outcome = watch(kube, prod_spec, "prod", interval=600, stuck_after=3600, clock=clock, sleep=clock.sleep,
                    auto_pause=False)
    assert [t.kind for t in outcome.snapshot.triggers] == ["stuck"]
    assert clock.sleeps == 6  # 3600 s at 600 s per poll, stuck on the seventh look
    assert outcome.paused is None and prod.writes == 0  # --no-auto-pause writes nothing


def test_no_auto_pause_reports_without_writing(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    move_node(prod, t4_nodes(prod)[0], "upgrade-failed")
    outcome = watch(kube, prod_spec, "prod", once=True, auto_pause=False)
    assert outcome.triggered and outcome.paused is None
    assert prod.writes == 0


def test_completes_when_released_pools_run_the_target(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    nodes = t4_nodes(prod)
    for node in nodes:
        move_node(prod, node, "upgrade-required")

    def progress(tick: int) -> None:
        if tick <= len(nodes):
            finish(prod, nodes[tick - 1], prod_spec.driver.version)

    clock = Clock(on_tick=progress)
    outcome = watch(kube, prod_spec, "prod", interval=30, clock=clock, sleep=clock.sleep)
    assert not outcome.triggered and outcome.snapshot.complete(prod_spec)
    pools = {p["pool"]: p for p in outcome.snapshot.pools(prod_spec)}
    assert pools["gput4"]["done"] == 4 and pools["gpua100"]["held"]
    assert prod.writes == 0


@pytest.mark.parametrize("state", ["upgrade-required", "upgrade-done"])
def test_snapshot_is_quiet_when_nothing_is_wrong(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                  state: str) -> None:
    move_node(prod, t4_nodes(prod)[0], state)
    outcome = watch(kube, prod_spec, "prod", once=True)
    assert not outcome.triggered and outcome.paused is None and prod.writes == 0
    assert {e["node"] for e in outcome.snapshot.events} == {t4_nodes(prod)[0]}
