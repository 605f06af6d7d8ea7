"""watch honours the stack's maintenance window (issue 23), judged on a fixed clock: outside it no new node
starts (the watch re-adds the skip label, as pause does) while a node already upgrading finishes; inside it, or
with nothing waiting to start, the window is no trigger."""

from __future__ import annotations

from datetime import UTC, datetime

from checks import kube as k
from checks.watch import watch
from gpu_knowledge import labels
from fleetspec.model import FleetSpec
from tests.fakekube.fixtures import finish_upgrade, move_node
from tests.fakekube.plugin import stack_spec
from tests.fakekube.server import FakeKube

FRIDAY_EVENING = datetime(2026, 12, 11, 18, 0, tzinfo=UTC).timestamp()  # after Thursday's 09:00-14:00 in Amsterdam
WEDNESDAY_MORNING = datetime(2026, 12, 9, 9, 0, tzinfo=UTC).timestamp()  # 10:00 in Amsterdam
PATIENT = 1e9  # time in state is measured against the real timestamps the fake writes: no stuck trigger here


def _t4(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"])


def _rolling(prod: FakeKube, spec: FleetSpec) -> tuple[str, str, list[str]]:
    """One T4 node upgrading, one waiting for its slot, the other two done."""
    upgrading, waiting, *done = _t4(prod)
    move_node(prod, upgrading, "pod-deletion-required")
    move_node(prod, waiting, labels.UPGRADE_REQUIRED)
    for node in done:
        finish_upgrade(prod, node, spec.driver.version)
    return upgrading, waiting, done


def test_outside_the_window_no_new_node_starts(prod: FakeKube, kube: k.Kube) -> None:
    spec = stack_spec("prod")  # the example, with its window
    upgrading, waiting, done = _rolling(prod, spec)
    outcome = watch(kube, spec, "prod", once=True, stuck_after=PATIENT, clock=lambda: FRIDAY_EVENING)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.kind == "outside-window" and trigger.subject == "Europe/Amsterdam"
    assert trigger.message == (
        "the rollout is outside its maintenance window (tue,wed,thu 09:00-14:00 (Europe/Amsterdam)); the next one "
        f"opens Tue 2026-12-15 09:00 CET: 1 node(s) would start their upgrade ({waiting}); 1 node(s) already "
        f"upgrading finish ({upgrading})")
    # The pause holds every node that is not done; the operator lets the one in progress finish.
    assert outcome.paused is not None and waiting in outcome.paused.changed
    assert prod.obj("nodes", waiting)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"
    assert not any(labels.SKIP_UPGRADE in prod.obj("nodes", n)["metadata"]["labels"] for n in done)


def test_inside_the_window_the_rollout_goes_on(prod: FakeKube, kube: k.Kube) -> None:
    spec = stack_spec("prod")
    _, waiting, _ = _rolling(prod, spec)
    outcome = watch(kube, spec, "prod", once=True, stuck_after=PATIENT, clock=lambda: WEDNESDAY_MORNING)
    assert outcome.snapshot.triggers == [] and outcome.paused is None
    assert labels.SKIP_UPGRADE not in prod.obj("nodes", waiting)["metadata"]["labels"]


def test_outside_the_window_a_node_already_held_or_upgrading_is_no_trigger(prod: FakeKube, kube: k.Kube) -> None:
    spec = stack_spec("prod")
    upgrading, waiting, _ = _rolling(prod, spec)
    prod.update("nodes", waiting, {"metadata": {"labels": {labels.SKIP_UPGRADE: "true"}}})  # paused already
    outcome = watch(kube, spec, "prod", once=True, stuck_after=PATIENT, clock=lambda: FRIDAY_EVENING)
    assert outcome.snapshot.triggers == []
    assert labels.SKIP_UPGRADE not in prod.obj("nodes", upgrading)["metadata"]["labels"]
