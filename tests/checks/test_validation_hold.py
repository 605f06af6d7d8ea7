"""A node held by a failed validation (checks/hold.py): watch pauses on it like on upgrade-failed and moves its
model pods off through the Eviction API (PDBs decide, refusals asked again, never forced); resume leaves it
cordoned; release-node alone puts it back, and refuses while it still fails on the driver it runs.

The canary example stack's cluster in the fake API: pool gpucanary's three one-GPU nodes, llm-chat-canary's
two replicas on the first two (PDB minAvailable 1)."""

from __future__ import annotations

import json

import pytest

from checks import kube as k
from checks.hold import ReleaseRefused, release_node
from vocabulary.triggers import TriggerKind
from checks.pause import resume
from checks.watch import watch
from gpu_knowledge import labels
from fleetspec.model import FleetSpec
from tests.checks.test_watch import Clock
from tests.fakekube.fixtures import driver_labels, move_node, node_name, pod, pods_of, seed
from tests.fakekube.plugin import stack_spec
from tests.fakekube.server import Fault, FakeKube
from workload import result as job_result

MODEL = {"app": "llm-chat", "track": "canary"}


@pytest.fixture
def spec() -> FleetSpec:
    return stack_spec("canary")


@pytest.fixture
def canary(fake: FakeKube, spec: FleetSpec) -> FakeKube:
    seed(fake, spec)
    fake.reset_counts()
    return fake


def nodes(spec: FleetSpec) -> list[str]:
    pool = spec.pool("gpucanary")
    return [node_name(spec, pool, i) for i in range(pool.nodeCount)]


def model_pods_on(fake: FakeKube, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in fake.objects("pods")
                  if p["spec"].get("nodeName") == node and all(p["metadata"]["labels"].get(key) == value
                                                               for key, value in MODEL.items()))


def fail_validation(fake: FakeKube, spec: FleetSpec, node: str, check: str = "tokens-per-second",
                    upgraded: bool = True) -> None:
    """What the job's pod on ``node`` writes after a failed validation on the target (workload.result)."""
    if upgraded:  # the operator upgraded the node, GFD reports the new driver
        fake.update("nodes", node, {"metadata": {"labels": driver_labels(spec.driver.version)}})
    checks = [job_result.Check(c, job_result.FAIL if c == check else job_result.PASS, f"{c}: 12.0, below 40")
              for c in job_result.CHECKS]
    assert spec.validation is not None
    validation = job_result.Result(
        node=node, pool="gpucanary", stage="canary", cluster=spec.cluster.name, targetDriver=spec.driver.version,
        image=spec.validation.image, model=spec.validation.model, program="sha256:" + "ab" * 32,
        startedAt="2026-12-02T10:00:00Z", finishedAt="2026-12-02T10:05:00Z", durationSeconds=300.0, checks=checks)
    fake.update("nodes", node, job_result.node_patch(validation), manager="gpu-validation")


# ---------------------------------------------------------------- watch


def test_a_failed_validation_pauses_the_rollout_and_moves_the_model_pod_off(canary: FakeKube, kube: k.Kube,
                                                                            spec: FleetSpec) -> None:
    first, second, third = nodes(spec)
    [evicted] = model_pods_on(canary, first)
    fail_validation(canary, spec, first)
    outcome = watch(kube, spec, "canary", once=True)
    [trigger] = outcome.snapshot.triggers
    assert (trigger.kind, trigger.subject) == (TriggerKind.VALIDATION_FAILED, first)
    assert trigger.message.startswith(f"node {first} (pool gpucanary) failed its validation: tokens-per-second "
                                      f"failed on driver {spec.driver.version}")
    # Paused as on upgrade-failed: the skip label on every node not done (the held one is done: upgraded).
    assert outcome.paused is not None and first in outcome.paused.done
    assert {second, third} <= set(outcome.paused.changed)
    assert canary.obj("nodes", second)["metadata"]["labels"][labels.SKIP_UPGRADE] == "true"
    # Its model pod went through the Eviction API (the PDB allowed one disruption); nothing was deleted.
    assert outcome.evictions is not None and outcome.evictions.evicted == [f"inference/{evicted}"]
    assert model_pods_on(canary, first) == [] and canary.counts_by_resource[("create", "pods")] == 1
    assert canary.counts["delete"] == 0
    assert canary.obj("nodes", first)["spec"]["unschedulable"] is True  # still held


def test_a_refusing_pdb_is_asked_again_never_forced(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first, second, third = nodes(spec)
    fail_validation(canary, spec, first)
    fail_validation(canary, spec, second)
    [on_first], [on_second] = model_pods_on(canary, first), model_pods_on(canary, second)

    # --once: the first eviction spends the budget (minAvailable 1 of 2), the second is refused and stays.
    outcome = watch(kube, spec, "canary", once=True)
    assert {t.subject for t in outcome.snapshot.triggers if t.kind == TriggerKind.VALIDATION_FAILED} == {first, second}
    assert outcome.evictions is not None
    assert outcome.evictions.evicted == [f"inference/{on_first}"]
    assert outcome.evictions.refused == [f"inference/{on_second}"] and outcome.evictions.pending
    assert model_pods_on(canary, second) == [on_second] and canary.counts["delete"] == 0

    # Looping: the Deployment's replacement becomes Ready on the third node, and the next ask goes through.
    def replaced(tick: int) -> None:
        if tick == 2:
            canary.add(pod("llm-chat-canary-7d9f8c-new", "inference", third, dict(MODEL), [{"name": "server",
                                                                                          "image": "x"}]))

    clock = Clock(on_tick=replaced)
    canary.reset_counts()
    outcome = watch(kube, spec, "canary", interval=30, clock=clock, sleep=clock.sleep)
    assert outcome.evictions is not None and outcome.evictions.evicted == [f"inference/{on_second}"]
    assert not outcome.evictions.pending and clock.sleeps == 2  # refused twice, then allowed
    assert canary.counts_by_resource[("create", "pods")] == 3 and canary.counts["delete"] == 0


def test_a_pdb_refusing_for_longer_than_stuck_after_ends_the_watch(canary: FakeKube, kube: k.Kube,
                                                                   spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    fail_validation(canary, spec, first)
    canary.faults.append(Fault(429, "create", "pods", times=100))  # every eviction refused
    clock = Clock()
    outcome = watch(kube, spec, "canary", interval=600, stuck_after=3600, clock=clock, sleep=clock.sleep)
    assert outcome.evictions is not None and len(outcome.evictions.refused) == 1
    assert clock.sleeps == 6  # asked 7 times over an hour, then reported
    assert model_pods_on(canary, first) and canary.counts["delete"] == 0


def test_a_pool_that_says_no_keeps_its_model_pods(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    assert spec.validation is not None
    told = spec.model_copy(update={"validation": spec.validation.model_copy(update={
        "evictOnFailure": {"gpucanary": False}})})
    first = nodes(spec)[0]
    [kept] = model_pods_on(canary, first)
    fail_validation(canary, told, first)
    outcome = watch(kube, told, "canary", once=True)
    assert outcome.evictions is not None and outcome.evictions.kept == [f"inference/{kept}"]
    assert outcome.evictions.evicted == [] and canary.counts_by_resource[("create", "pods")] == 0
    assert [t.kind for t in outcome.snapshot.triggers] == [TriggerKind.VALIDATION_FAILED]  # still paused on it
    assert outcome.paused is not None and outcome.paused.changed


def test_no_auto_pause_reports_the_hold_and_changes_nothing(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    fail_validation(canary, spec, nodes(spec)[0])
    canary.reset_counts()
    outcome = watch(kube, spec, "canary", once=True, auto_pause=False)
    assert [t.kind for t in outcome.snapshot.triggers] == [TriggerKind.VALIDATION_FAILED]
    assert outcome.paused is None and outcome.evictions is None and canary.writes == 0


def test_an_unreadable_hold_record_still_holds(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    canary.update("nodes", first, {"metadata": {"annotations": {job_result.HOLD_ANNOTATION: "{"}}})
    outcome = watch(kube, spec, "canary", once=True, auto_pause=False)
    [trigger] = outcome.snapshot.triggers
    assert trigger.kind == TriggerKind.VALIDATION_FAILED and "its hold record cannot be read" in trigger.message


def test_an_image_owned_stack_reports_the_hold_and_writes_nothing(eks: FakeKube, kube: k.Kube,
                                                                  eks_spec: FleetSpec) -> None:
    node = sorted(n["metadata"]["name"] for n in eks.objects("nodes") if "gpu-l40s" in n["metadata"]["name"])[0]
    eks.update("nodes", node, {"metadata": {"annotations": {job_result.HOLD_ANNOTATION: json.dumps({
        "apiVersion": job_result.HOLD_API_VERSION, "node": node, "pool": "gpu-l40s", "stage": "prod",
        "driver": "580.173.02", "checks": ["no-xid"], "message": "Xid 79", "at": "2026-12-02T10:05:00Z"})}}})
    eks.reset_counts()
    outcome = watch(kube, eks_spec, "eks-prod", once=True)
    assert TriggerKind.VALIDATION_FAILED in [t.kind for t in outcome.snapshot.triggers]
    assert outcome.paused is None and outcome.evictions is None and eks.writes == 0


# ---------------------------------------------------------------- resume and release


def test_resume_leaves_a_held_node_cordoned_and_says_so(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    fail_validation(canary, spec, first)
    watch(kube, spec, "canary", once=True)
    report = resume(kube, spec, "canary")
    assert report.validation_held == [first] and report.changed
    assert canary.obj("nodes", first)["spec"]["unschedulable"] is True
    assert job_result.HOLD_ANNOTATION in canary.obj("nodes", first)["metadata"]["annotations"]
    assert [t.kind for t in watch(kube, spec, "canary", once=True, auto_pause=False).snapshot.triggers] == [
        TriggerKind.VALIDATION_FAILED]  # pauses again until released


def test_release_refuses_a_node_still_failing_on_the_driver_it_runs(canary: FakeKube, kube: k.Kube,
                                                                    spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    fail_validation(canary, spec, first)
    canary.reset_counts()
    with pytest.raises(ReleaseRefused, match=rf"still runs, failed\. Validate it again .*kubectl label node {first} "
                                             rf"{job_result.LABEL_VALIDATED_DRIVER}-"):
        release_node(kube, spec, first)
    assert canary.writes == 0
    released = release_node(kube, spec, first, accept_failed=True)
    assert released.uncordoned and released.hold is not None and released.hold.checks == ("tokens-per-second",)
    node = canary.obj("nodes", first)
    assert not node["spec"].get("unschedulable") and job_result.HOLD_ANNOTATION not in node["metadata"]["annotations"]
    # The result stays: verify still sees the failure on the driver.
    assert node["metadata"]["labels"][job_result.LABEL_OUTCOME] == job_result.FAILED
    assert not watch(kube, spec, "canary", once=True, auto_pause=False).snapshot.triggers


def test_release_after_a_passing_revalidation(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    fail_validation(canary, spec, first)
    # Validated again while held, and passed: the job writes its labels, never the hold or the cordon.
    canary.update("nodes", first, {"metadata": {"labels": {job_result.LABEL_OUTCOME: job_result.PASSED}}})
    released = release_node(kube, spec, first)
    assert released.uncordoned and not canary.obj("nodes", first)["spec"].get("unschedulable")


def test_release_of_a_node_back_on_its_old_driver(canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first = nodes(spec)[0]
    fail_validation(canary, spec, first)
    assert spec.driver.previousVersion is not None
    canary.update("nodes", first, {"metadata": {"labels": driver_labels(spec.driver.previousVersion)}})  # rolled back
    assert release_node(kube, spec, first).uncordoned


def test_release_keeps_the_cordon_when_asked_or_while_the_operator_upgrades_the_node(
        canary: FakeKube, kube: k.Kube, spec: FleetSpec) -> None:
    first, second, _ = nodes(spec)
    for node in (first, second):
        fail_validation(canary, spec, node)
    kept = release_node(kube, spec, first, keep_cordoned=True, accept_failed=True)
    assert (kept.uncordoned, kept.note) == (False, "left cordoned (--keep-cordoned)")
    move_node(canary, second, "pod-restart-required")
    upgrading = release_node(kube, spec, second, accept_failed=True)
    assert not upgrading.uncordoned and "upgrade of the node is in progress (pod-restart-required)" in upgrading.note
    for node in (first, second):
        after = canary.obj("nodes", node)
        assert after["spec"]["unschedulable"] is True
        assert job_result.HOLD_ANNOTATION not in after["metadata"]["annotations"]


@pytest.mark.parametrize(("which", "reason"), [
    ("not held", "is not held by a failed validation"),
    ("not the stack's", "is not a node of this stack's pools"),
])
def test_release_refuses_what_is_not_a_held_node_of_the_stack(canary: FakeKube, kube: k.Kube, spec: FleetSpec,
                                                              which: str, reason: str) -> None:
    name = nodes(spec)[0] if which == "not held" else "aks-system-12345678-vmss000000"
    with pytest.raises(ReleaseRefused, match=reason):
        release_node(kube, spec, name)
    assert canary.writes == 0


def test_pods_of_the_model_still_count_as_the_fixture_placed_them(canary: FakeKube, spec: FleetSpec) -> None:
    """The scenario above relies on this placement; it fails loudly if the fixture changes."""
    first, second, third = nodes(spec)
    assert len(model_pods_on(canary, first)) == len(model_pods_on(canary, second)) == 1
    assert model_pods_on(canary, third) == [] and len(pods_of(canary, "inference", MODEL)) == 2
