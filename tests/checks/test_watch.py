"""watch: each trigger is detected and pauses the rollout; time is injected, nothing sleeps."""

from __future__ import annotations

import time

import pytest

from checks import kube as k
from checks.errors import AccessDeniedError, ClusterError, GaveUpError
from checks.nodestate import NoNodesError
from checks.watch import watch
from gpu_knowledge import labels
from fleetspec.model import FleetSpec
from tests.fakekube.fixtures import OPERATOR_MANAGER, finish_upgrade, move_node, pods_of, set_pod_ready
from tests.fakekube.server import Fault, FakeKube

HOUR = 3600.0


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
    nodes = t4_nodes(prod)
    for node in nodes[1:]:
        finish_upgrade(prod, node, prod_spec.driver.version)  # done on 580: nothing to hold back there
    pods = pods_of(prod, "inference", {"app": "embed-triton"})
    set_pod_ready(prod, "inference", pods[0], False)
    set_pod_ready(prod, "inference", pods[1], False)  # 2 of 4 available, minAvailable 3
    move_node(prod, t4_nodes(prod)[0], "pod-deletion-required")
    outcome = watch(kube, prod_spec, "prod", once=True)
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("below-min-available", "inference/embed-triton")]
    assert outcome.paused is not None and outcome.paused.changed == [nodes[0]]
    assert sorted(outcome.paused.done) == nodes[1:]


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
            finish_upgrade(prod, nodes[tick - 1], prod_spec.driver.version)

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


def test_upgrade_done_on_the_old_driver_is_not_done(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    # Before the operator's next reconcile every node is still upgrade-done, on 570; gput4 targets 580.
    outcome = watch(kube, prod_spec, "prod", once=True)
    pools = {p["pool"]: p for p in outcome.snapshot.pools(prod_spec)}
    assert pools["gput4"]["done"] == 0 and pools["gput4"]["states"] == {"upgrade-done": 4}
    assert pools["gpua100"]["done"] == 8  # held on previousVersion, which it runs
    assert not outcome.snapshot.complete(prod_spec)


@pytest.mark.parametrize("bracketed", [False, True])
def test_an_old_event_makes_the_first_once_poll_report_stuck(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                             bracketed: bool) -> None:
    node = t4_nodes(prod)[1]
    now = time.time()
    move_node(prod, node, "validation-required", at=now - 2 * HOUR, bracketed=bracketed)
    # The operator wrote the node since (the validation timer): managedFields only bound it to a minute.
    prod.update("nodes", node, {"metadata": {"annotations": {
        "nvidia.com/gpu-driver-upgrade-validation-start-time": str(int(now - 60))}}}, manager=OPERATOR_MANAGER,
        at=now - 60)
    outcome = watch(kube, prod_spec, "prod", once=True, stuck_after=HOUR, auto_pause=False, clock=lambda: now)
    [trigger] = outcome.snapshot.triggers
    assert (trigger.kind, trigger.subject) == ("stuck", node) and "for 120 min" in trigger.message


def test_expired_events_fall_back_to_managed_fields(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    node = t4_nodes(prod)[2]
    now = time.time()
    move_node(prod, node, "pod-restart-required", at=now - 3 * HOUR, event=False)  # events are gone after ~1 h
    outcome = watch(kube, prod_spec, "prod", once=True, stuck_after=HOUR, auto_pause=False, clock=lambda: now)
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("stuck", node)]
    [progress] = [n for n in outcome.snapshot.nodes if n.name == node]
    assert progress.seconds_in_state == pytest.approx(3 * HOUR, abs=1)


def test_warning_events_do_not_date_a_state(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    node = t4_nodes(prod)[0]
    now = time.time()
    move_node(prod, node, "validation-required", at=now - 60)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 2 * HOUR))
    prod.add({"kind": "Event", "metadata": {"name": f"{node}.warn", "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": node}, "reason": "GPUDriverUpgrade", "type": "Warning",
              "lastTimestamp": when, "message": "Failed to update node state label to validation-required"})
    outcome = watch(kube, prod_spec, "prod", once=True, stuck_after=HOUR, auto_pause=False, clock=lambda: now)
    assert outcome.snapshot.triggers == []


def test_a_failed_auto_pause_keeps_the_trigger(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    nodes = t4_nodes(prod)
    move_node(prod, nodes[0], "upgrade-failed")
    prod.faults.append(Fault(500, verb="patch", plural="nodes", skip=1, times=99))  # 2nd patch onwards fails
    outcome = watch(kube, prod_spec, "prod", once=True)
    assert [t.kind for t in outcome.snapshot.triggers] == ["upgrade-failed"]
    assert outcome.pause_error is not None and f"stopped at node {nodes[1]}" in outcome.pause_error
    assert outcome.paused is not None and outcome.paused.changed == nodes[:1]  # what did land


def test_a_pause_that_cannot_even_list_is_reported(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    move_node(prod, t4_nodes(prod)[0], "upgrade-failed")
    prod.faults.append(Fault(403, verb="patch", plural="nodes"))
    outcome = watch(kube, prod_spec, "prod", once=True)
    assert outcome.triggered and outcome.pause_error is not None and "'patch' 'nodes'" in outcome.pause_error


def test_loop_keeps_polling_through_failed_polls(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    nodes = t4_nodes(prod)
    prod.faults.append(Fault(503, verb="list", plural="nodes", times=6))  # two polls of three attempts each
    failures: list[int] = []

    def progress(tick: int) -> None:
        if tick == 3:
            move_node(prod, nodes[0], "upgrade-failed")

    clock = Clock(on_tick=progress)
    outcome = watch(kube, prod_spec, "prod", interval=30, clock=clock, sleep=clock.sleep, auto_pause=False,
                    on_poll_error=lambda error, n: failures.append(n))
    assert failures == [1, 2]
    assert [t.kind for t in outcome.snapshot.triggers] == ["upgrade-failed"]


def test_loop_gives_up_after_consecutive_failed_polls(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.faults.append(Fault(500, verb="list", plural="deployments", times=999))
    failures: list[ClusterError] = []
    clock = Clock()
    with pytest.raises(GaveUpError, match="3 consecutive failed polls"):
        watch(kube, prod_spec, "prod", interval=30, clock=clock, sleep=clock.sleep, max_failed_polls=3,
              on_poll_error=lambda error, n: failures.append(error))
    assert len(failures) == 3 and clock.sleeps == 2
    assert prod.writes == 0


def test_permanent_errors_end_the_watch_at_once(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.faults.append(Fault(403, verb="list", plural="events"))
    clock = Clock()
    with pytest.raises(AccessDeniedError):
        watch(kube, prod_spec, "prod", clock=clock, sleep=clock.sleep)
    assert clock.sleeps == 0


def test_no_node_of_the_stack_is_an_error(fake: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    with pytest.raises(NoNodesError):
        watch(kube, prod_spec, "prod", once=True)


def test_a_node_is_stuck_only_past_the_wait_its_pools_own_policy_allows(prod: FakeKube, kube: k.Kube,
                                                                       prod_spec: FleetSpec) -> None:
    # gput4 (batch) lets the controller wait 3 h for its jobs; gpua100 keeps the stack's 1 h. Both nodes have
    # waited 90 min: only gpua100's is stuck.
    config = prod_spec.model_dump(mode="json", exclude_unset=True)
    config["nodePools"][0]["upgradePolicy"] = {"waitForCompletion": {"timeoutSeconds": 3 * 3600}}
    spec = FleetSpec.model_validate(config)
    now = time.time()
    t4 = t4_nodes(prod)[0]
    a100 = sorted(n["metadata"]["name"] for n in prod.objects("nodes") if "gpua100" in n["metadata"]["name"])[0]
    for node in (t4, a100):
        move_node(prod, node, "wait-for-jobs-required", at=now - 1.5 * HOUR)
    outcome = watch(kube, spec, "prod", once=True, stuck_after=HOUR, auto_pause=False, clock=lambda: now)
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("stuck", a100)]
    # Past its own wait, gput4's node is stuck too, and the message names the key that allowed it.
    later = now + 2 * HOUR
    outcome = watch(kube, spec, "prod", once=True, stuck_after=HOUR, auto_pause=False, clock=lambda: later)
    [found] = [t for t in outcome.snapshot.triggers if t.subject == t4]
    assert "threshold 180 min: nodePools[0].upgradePolicy.waitForCompletion.timeoutSeconds 10800, pool gput4" in \
        found.message
