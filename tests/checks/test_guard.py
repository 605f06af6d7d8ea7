"""The guard (checks/guard.py) against the fake API: its objects come through watch streams, each trigger pauses as
`pause` does and is recorded (Events, the fleet Lease's halt record and the guard's status), drift alerts and never
pauses, and of two replicas only the elected one writes. Time is injected where a trigger needs it; the streams run
in threads, and a test waits (bounded, never judged by time) until they caught up with the fake's last write."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from checks import kube as k
from checks.guard import REASON_DRIFT, REASON_TRIGGER, Guard, GuardSettings, validation_ages
from checks.inventory import pool_nodes_of
from checks.progress import epoch
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.checks.test_informer import wait_for
from tests.fakekube.fixtures import driver_labels, finish_upgrade, move_node, pods_of, set_pod_ready
from tests.fakekube.server import FakeKube
from vocabulary.triggers import DriftKind, TriggerKind
from workload import result as job_result

NAMESPACE = "gpu-rollout-guard"
HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def caught_up(guard: Guard, fake: FakeKube) -> None:
    """Until every stream saw the fake's last write (an event or a bookmark past it)."""
    last = fake.last_rv
    wait_for(lambda: all(not i.served or (i.version and int(i.version) >= last) for i in guard.informers.values()),
             "the guard's streams caught up")


@pytest.fixture
def guards(prod: FakeKube, kube: k.Kube) -> Iterator[Callable[..., Guard]]:
    made: list[Guard] = []
    prod.bookmark_interval = 0.05

    def make(spec: FleetSpec, identity: str = "guard-0", clock: Callable[[], float] = time.time,
             **settings: float) -> Guard:
        guard = Guard(kube, spec, "prod", identity, lease_namespace=NAMESPACE, clock=clock,
                      settings=GuardSettings(**settings))  # type: ignore[arg-type]
        guard.sync()
        guard.stream()
        made.append(guard)
        return guard

    yield make
    for guard in made:
        guard.stop()
    prod.drop_watches()


def t4_nodes(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"])


def events(fake: FakeKube, reason: str) -> list[dict]:
    return [e for e in fake.objects("events") if e.get("reason") == reason]


def fleet_lease(fake: FakeKube) -> dict:
    return fake.obj("leases", LEASE_NAME, LEASE_NAMESPACE)


def test_upgrade_failed_is_paused_as_pause_does_and_recorded(prod: FakeKube, prod_spec: FleetSpec,
                                                              guards: Callable[..., Guard]) -> None:
    guard = guards(prod_spec)
    assert guard.elect().leader
    nodes = t4_nodes(prod)
    for node in nodes:
        move_node(prod, node, "upgrade-required")
    move_node(prod, nodes[0], "upgrade-failed")
    caught_up(guard, prod)
    found = guard.look()
    assert [(t.kind, t.subject) for t in found.triggers] == [(TriggerKind.UPGRADE_FAILED, nodes[0])]
    # Paused exactly as `pause` does: the skip label and this stack's claim, in one patch, on every node not done.
    for node in nodes:
        meta = prod.obj("nodes", node)["metadata"]
        assert meta["labels"][labels.SKIP_UPGRADE] == "true"
        assert meta["annotations"][labels.ANNOTATION_PAUSED_BY] == "prod"
        assert "gpu-rollout guard: node" in meta["annotations"][labels.ANNOTATION_PAUSED_REASON]
    recorded = events(prod, REASON_TRIGGER)
    about = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in recorded)
    assert ("Node", nodes[0]) in about
    assert any(kind in ("NVIDIADriver", "ClusterPolicy") for kind, _ in about)
    halt = json.loads(fleet_lease(prod)["metadata"]["annotations"][labels.ANNOTATION_FLEET_HALTED])
    assert halt["cause"].startswith("guard of stack prod: node " + nodes[0])
    status = json.loads(fleet_lease(prod)["metadata"]["annotations"][labels.ANNOTATION_GUARD_STATUS])["prod"]
    assert status["paused"] and [t["kind"] for t in status["triggers"]] == ["upgrade-failed"]
    # A trigger that still stands is acted on once.
    writes = prod.writes
    caught_up(guard, prod)
    guard.look()
    assert prod.writes == writes and len(events(prod, REASON_TRIGGER)) == len(recorded)


def test_a_node_stuck_past_its_limit_is_a_trigger(prod: FakeKube, prod_spec: FleetSpec,
                                                  guards: Callable[..., Guard]) -> None:
    clock = Clock()
    node = t4_nodes(prod)[0]
    move_node(prod, node, "cordon-required", at=clock.now - 2 * HOUR, event=False)
    guard = guards(prod_spec, clock=clock, stuck_after=HOUR)
    caught_up(guard, prod)
    assert [t.kind for t in guard.look().triggers] == [TriggerKind.STUCK]


def test_a_node_upgraded_without_a_validation_result_past_the_deadline(prod: FakeKube, prod_spec: FleetSpec,
                                                                       guards: Callable[..., Guard]) -> None:
    clock = Clock()
    first, second, third = t4_nodes(prod)[:3]
    target = prod_spec.driver.version
    finish_upgrade(prod, first, target, at=clock.now - HOUR)  # an hour ago, no result: missing
    finish_upgrade(prod, second, target, at=clock.now - HOUR)
    prod.update("nodes", second, {"metadata": {"labels": {job_result.LABEL_VALIDATED_DRIVER: target,
                                                          job_result.LABEL_OUTCOME: job_result.PASSED}}})
    finish_upgrade(prod, third, target, at=clock.now - 60)  # a minute ago: the job has time yet
    guard = guards(prod_spec, clock=clock, validation_deadline=1800)
    caught_up(guard, prod)
    found = guard.look()
    assert [(t.kind, t.subject) for t in found.triggers] == [(TriggerKind.VALIDATION_MISSING, first)]
    assert "no validation result" in found.triggers[0].message and "deadline 30 min" in found.triggers[0].message


def test_a_model_below_min_available_is_a_trigger(prod: FakeKube, prod_spec: FleetSpec,
                                                  guards: Callable[..., Guard]) -> None:
    guard = guards(prod_spec)
    pods = pods_of(prod, "inference", {"app": "embed-triton"})
    set_pod_ready(prod, "inference", pods[0], False)
    set_pod_ready(prod, "inference", pods[1], False)
    caught_up(guard, prod)
    found = guard.look()
    assert [t.kind for t in found.triggers] == [TriggerKind.BELOW_MIN_AVAILABLE]
    set_pod_ready(prod, "inference", pods[0], True)
    set_pod_ready(prod, "inference", pods[1], True)
    caught_up(guard, prod)
    assert guard.look().triggers == []  # the pods' watch saw them Ready again


def test_a_follower_writes_nothing_and_takes_over_when_the_leases_holder_stops(
        prod: FakeKube, prod_spec: FleetSpec, guards: Callable[..., Guard]) -> None:
    clock = Clock()
    first = guards(prod_spec, "guard-a", clock=clock, lease_duration=15)
    second = guards(prod_spec, "guard-b", clock=clock, lease_duration=15)
    assert first.elect().leader and not second.elect().leader
    assert second.leadership.holder == "guard-a"
    move_node(prod, t4_nodes(prod)[0], "upgrade-failed")
    caught_up(second, prod)
    writes = prod.writes
    assert second.look().triggers and prod.writes == writes  # judged, not acted on
    # guard-a stops renewing; once its Lease expired guard-b takes it and acts.
    clock.now += 16
    assert second.elect().leader and second.leadership.transitions == 1
    second.look()
    assert prod.obj("nodes", t4_nodes(prod)[0])["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"
    lease = prod.obj("leases", "gpu-rollout-guard", NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "guard-b" and lease["spec"]["leaseTransitions"] == 1
    assert not first.elect().leader  # the old leader, back, follows


def test_outside_the_window_pauses_but_halts_no_train(prod: FakeKube, prod_spec: FleetSpec,
                                                      guards: Callable[..., Guard]) -> None:
    from fleetspec.discipline import MaintenanceWindow, WeeklyWindow
    never = MaintenanceWindow(timeZone="UTC", weekly=[WeeklyWindow(days=["sat"], start="00:00", end="00:01")])
    spec = prod_spec.model_copy(update={"rollout": prod_spec.rollout.model_copy(update={"maintenanceWindow": never})})
    clock = Clock()
    clock.now = 1_764_000_000.0 - (1_764_000_000 % 86400) + 12 * HOUR  # a noon, not Saturday's first minute
    nodes = t4_nodes(prod)
    move_node(prod, nodes[0], "upgrade-required")
    guard = guards(spec, clock=clock)
    assert guard.elect().leader
    caught_up(guard, prod)
    found = guard.look()
    assert [t.kind for t in found.triggers] == [TriggerKind.OUTSIDE_WINDOW]
    assert prod.obj("nodes", nodes[0])["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"
    assert labels.ANNOTATION_FLEET_HALTED not in (fleet_lease(prod)["metadata"].get("annotations") or {})


def test_drift_alerts_with_an_event_and_never_pauses(prod: FakeKube, prod_spec: FleetSpec,
                                                     guards: Callable[..., Guard]) -> None:
    nodes = t4_nodes(prod)
    target = prod_spec.driver.version
    for node in nodes[1:]:
        finish_upgrade(prod, node, target)
    # The pool arrived; one node came back (a repair) on another driver, with no upgrade-state label.
    prod.update("nodes", nodes[0], {"metadata": {"labels": {**driver_labels("570.195.03"),
                                                            labels.UPGRADE_STATE: None,
                                                            labels.GPU_PRODUCT: "NVIDIA-A10"}}})
    guard = guards(prod_spec)
    assert guard.elect().leader
    caught_up(guard, prod)
    found = guard.look()
    assert found.triggers == []
    kinds = sorted((d.kind, d.subject) for d in found.drift if d.subject == nodes[0])
    assert kinds == [(DriftKind.GFD_LABELS, nodes[0]), (DriftKind.OTHER_DRIVER, nodes[0])]
    said = [e for e in events(prod, REASON_DRIFT) if e["involvedObject"]["name"] == nodes[0]]
    assert len(said) == 2 and all("nothing was paused" in e["message"] for e in said)
    assert not any((n["metadata"].get("labels") or {}).get(labels.SKIP_UPGRADE) == "true"
                   for n in prod.objects("nodes") if n["metadata"]["name"] in nodes)
    status = json.loads(fleet_lease(prod)["metadata"]["annotations"][labels.ANNOTATION_GUARD_STATUS])["prod"]
    assert status["driftCount"] == len(found.drift) and not status["triggers"]


def test_validation_ages_count_verdicts_per_pool(prod: FakeKube, prod_spec: FleetSpec) -> None:
    nodes = t4_nodes(prod)
    target = prod_spec.driver.version
    result = json.dumps({"finishedAt": "2026-12-01T10:00:00Z"})
    prod.update("nodes", nodes[0], {"metadata": {
        "labels": {job_result.LABEL_VALIDATED_DRIVER: target, job_result.LABEL_OUTCOME: job_result.PASSED},
        "annotations": {job_result.result_annotation(target): result}}})
    finished = epoch("2026-12-01T10:00:00Z")
    assert finished is not None
    counts, age = validation_ages(pool_nodes_of(prod_spec, prod.objects("nodes")), finished + 600)["gput4"]
    assert counts["passed"] == 1 and counts["none"] == len(nodes) - 1 and age == 600.0


def test_a_silence_on_its_lease_keeps_it_from_pausing_during_planned_work(
        prod: FakeKube, prod_spec: FleetSpec, guards: Callable[..., Guard]) -> None:
    clock = Clock()
    guard = guards(prod_spec, clock=clock)
    assert guard.elect().leader
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.now + HOUR))
    prod.update("leases", "gpu-rollout-guard", {"metadata": {"annotations": {
        labels.ANNOTATION_GUARD_SILENCED_UNTIL: until}}}, NAMESPACE)
    assert guard.elect().silenced(clock.now)
    node = t4_nodes(prod)[0]
    move_node(prod, node, "upgrade-failed")
    caught_up(guard, prod)
    assert [t.kind for t in guard.look().triggers] == [TriggerKind.UPGRADE_FAILED]  # judged and reported...
    assert labels.SKIP_UPGRADE not in prod.obj("nodes", node)["metadata"]["labels"]  # ...not paused
    assert events(prod, REASON_TRIGGER) == []
    status = json.loads(fleet_lease(prod)["metadata"]["annotations"][labels.ANNOTATION_GUARD_STATUS])["prod"]
    assert status["silencedUntil"] and status["triggers"]
    clock.now += 2 * HOUR  # the silence is over: the standing trigger is acted on
    guard.elect()
    guard.look()
    assert prod.obj("nodes", node)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"


def test_a_node_a_failed_validation_holds_has_its_model_pods_moved_off_through_the_eviction_api(
        fake: FakeKube, kube: k.Kube) -> None:
    from tests.checks.test_validation_hold import fail_validation, model_pods_on, nodes
    from tests.fakekube.fixtures import seed
    from tests.fakekube.plugin import stack_spec

    spec = stack_spec("canary")
    seed(fake, spec)
    fake.bookmark_interval = 0.05
    guard = Guard(kube, spec, "canary", "guard-0", lease_namespace=NAMESPACE)
    try:
        guard.sync()
        guard.stream()
        assert guard.elect().leader
        first = nodes(spec)[0]
        [on_first] = model_pods_on(fake, first)
        fail_validation(fake, spec, first)
        caught_up(guard, fake)
        found = guard.look()
        assert [(t.kind, t.subject) for t in found.triggers] == [(TriggerKind.VALIDATION_FAILED, first)]
        assert model_pods_on(fake, first) == [] and guard.counters.evictions == 1
        assert fake.counts["delete"] == 0 and fake.counts_by_resource[("create", "pods")] == 1  # an Eviction
        assert on_first not in [p["metadata"]["name"] for p in fake.objects("pods")]
    finally:
        guard.stop()
        fake.drop_watches()


def test_an_image_owned_stack_is_judged_for_drift_only(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    eks.bookmark_interval = 0.05
    guard = Guard(kube, eks_spec, "eks-prod", "guard-0", lease_namespace=NAMESPACE)
    try:
        guard.sync()
        guard.stream()
        assert guard.elect().leader and set(guard.informers) == {"nodes"}
        node = sorted(n["metadata"]["name"] for n in eks.objects("nodes"))[0]
        eks.update("nodes", node, {"metadata": {"labels": {labels.GPU_COUNT: "3"}}})
        caught_up(guard, eks)
        found = guard.look()
        assert found.snapshot is None and found.triggers == []
        assert (DriftKind.GFD_LABELS, node) in {(d.kind, d.subject) for d in found.drift}
        assert not any((n["metadata"].get("labels") or {}).get(labels.SKIP_UPGRADE) == "true"
                       for n in eks.objects("nodes") if n["metadata"]["name"] == node)
    finally:
        guard.stop()
        eks.drop_watches()


def test_a_burst_is_recorded_as_a_few_events_and_counted_whole(prod: FakeKube, prod_spec: FleetSpec,
                                                                guards: Callable[..., Guard],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import checks.guard

    monkeypatch.setattr(checks.guard, "EVENTS_PER_LOOK", 1)
    guard = guards(prod_spec)
    assert guard.elect().leader
    nodes = t4_nodes(prod)[:2]
    for node in nodes:
        prod.update("nodes", node, {"metadata": {"labels": {labels.GPU_COUNT: "3"}}})
    caught_up(guard, prod)
    found = guard.look()
    assert sum(d.kind == DriftKind.GFD_LABELS for d in found.drift) == 2
    assert len(events(prod, REASON_DRIFT)) == 1
    status = json.loads(fleet_lease(prod)["metadata"]["annotations"][labels.ANNOTATION_GUARD_STATUS])["prod"]
    assert status["driftCount"] == 2


def test_prometheus_is_asked_at_most_once_a_minute_and_its_answer_stands_between(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    from checks.prometheus import Prometheus
    from tests.checks.test_drift import Answers

    clock = Clock()
    prod.bookmark_interval = 0.05
    names = sorted(n["metadata"]["name"] for n in prod.objects("nodes"))
    answers = Answers(gpu_util=names[1:], xids={})
    prometheus = Prometheus(transport=answers)
    guard = Guard(kube, prod_spec, "prod", "guard-0", lease_namespace=NAMESPACE, clock=clock, prometheus=prometheus,
                  settings=GuardSettings(prometheus_every=60.0))
    try:
        guard.sync()
        silent = {(d.kind, d.subject) for d in guard.look().drift if d.kind == DriftKind.DCGM_SILENT}
        asked = prometheus.requests
        assert silent and asked > 0
        clock.now += 30
        assert {(d.kind, d.subject) for d in guard.look().drift if d.kind == DriftKind.DCGM_SILENT} == silent
        assert prometheus.requests == asked  # not asked again within the minute; the last answer stands
        clock.now += 31
        answers.gpu_util = names  # the exporter is back
        assert not [d for d in guard.look().drift if d.kind == DriftKind.DCGM_SILENT]
        assert prometheus.requests > asked
    finally:
        guard.stop()
