"""pause/resume: only our skip labels, only nodes not done, idempotent, and safe after an interruption."""

from __future__ import annotations

import pytest

from checks import kube as k
from checks.nodestate import NoNodesError
from checks.pause import ChangeInterrupted, pause, resume
from gpu_knowledge import labels
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from tests.conftest import edited
from tests.fakekube.fixtures import driver_labels, finish_upgrade, move_node
from tests.fakekube.server import Fault, FakeKube

SKIP = labels.SKIP_UPGRADE


def skipped(fake: FakeKube) -> dict[str, str | None]:
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(SKIP) for n in fake.objects("nodes")}


def t4_nodes(fake: FakeKube) -> list[str]:
    return sorted(n for n in skipped(fake) if "gput4" in n)


def test_before_the_bump_upgrade_done_nodes_on_the_old_driver_are_held(prod: FakeKube, kube: k.Kube,
                                                                       prod_spec: FleetSpec) -> None:
    # Steady state: every gput4 node is upgrade-done, but on 570 while its released pool targets 580.
    t4 = t4_nodes(prod)
    assert {prod.obj("nodes", n)["metadata"]["labels"][labels.UPGRADE_STATE] for n in t4} == {"upgrade-done"}
    report = pause(kube, prod_spec, "prod")
    assert report.changed == t4 and report.done == []
    assert all(skipped(prod)[n] == "true" for n in t4)


def test_a_node_without_a_state_label_is_done_only_on_its_target(prod: FakeKube, kube: k.Kube,
                                                                 prod_spec: FleetSpec) -> None:
    t4 = t4_nodes(prod)
    for node in t4[:2]:
        prod.update("nodes", node, {"metadata": {"labels": {labels.UPGRADE_STATE: None}}})
    prod.update("nodes", t4[0], {"metadata": {"labels": driver_labels(prod_spec.driver.version)}})
    report = pause(kube, prod_spec, "prod")
    assert report.done == [t4[0]] and report.changed == t4[1:]


def test_pause_labels_nodes_not_done_and_resume_removes_exactly_those(prod: FakeKube, kube: k.Kube,
                                                                     prod_spec: FleetSpec) -> None:
    t4 = t4_nodes(prod)
    move_node(prod, t4[0], "upgrade-required")
    move_node(prod, t4[1], "cordon-required")
    for node in t4[2:]:
        finish_upgrade(prod, node, prod_spec.driver.version)
    before = skipped(prod)  # the held pools (a100, h100) already carry a skip label that is not ours
    seen: list[tuple[str, str]] = []
    report = pause(kube, prod_spec, "prod", on_change=lambda action, node: seen.append((action, node)))
    assert report.changed == t4[:2] and seen == [("labelled", n) for n in t4[:2]]
    assert sorted(report.done) == t4[2:]  # upgrade-done on 580: nothing to hold back
    assert len(report.foreign) == 12
    after = skipped(prod)
    assert {n for n in after if after[n] == "true"} == {n for n in before if before[n] == "true"} | set(t4[:2])

    again = pause(kube, prod_spec, "prod")
    assert again.changed == [] and again.unchanged == t4[:2]

    released = resume(kube, prod_spec, "prod")
    assert released.changed == t4[:2] and released.held == []
    assert skipped(prod) == before
    assert all(labels.ANNOTATION_PAUSED_BY not in (n["metadata"].get("annotations") or {})
               for n in prod.objects("nodes"))
    assert resume(kube, prod_spec, "prod").changed == []


def test_resume_keeps_the_skip_label_on_a_pool_the_stack_holds_now(prod: FakeKube, kube: k.Kube,
                                                                   prod_spec: FleetSpec) -> None:
    t4 = t4_nodes(prod)
    assert pause(kube, prod_spec, "prod").changed == t4
    # Someone flips gput4 back to released: false and `pulumi up` applies the pool's skip label.
    held_spec = spec_from_config(edited("prod", "nodePools", lambda pools: pools[0]["rollout"].update(released=False)))
    assert held_spec.pool_held(held_spec.pool("gput4"))
    seen: list[tuple[str, str]] = []
    report = resume(kube, held_spec, "prod", on_change=lambda action, node: seen.append((action, node)))
    assert report.held == t4 and report.changed == [] and seen == [("unclaimed", n) for n in t4]
    for node in t4:
        meta = prod.obj("nodes", node)["metadata"]
        assert meta["labels"][SKIP] == "true"  # the stack wants it: kept
        assert labels.ANNOTATION_PAUSED_BY not in (meta.get("annotations") or {})  # but it is no longer ours
    # Released again later: our resume has nothing to remove; the label is the stack's to drop now.
    assert resume(kube, prod_spec, "prod").changed == []


def test_interrupted_pause_is_finished_by_a_rerun(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    t4 = t4_nodes(prod)
    for node in t4:
        move_node(prod, node, "upgrade-required")
    prod.faults.append(Fault(500, verb="patch", plural="nodes", skip=2, times=99))  # the 3rd patch keeps failing
    with pytest.raises(ChangeInterrupted) as raised:
        pause(kube, prod_spec, "prod")
    assert raised.value.report.changed == t4[:2]  # what is on the cluster now, carried with the error
    assert f"stopped at node {t4[2]}" in str(raised.value) and t4[1] in str(raised.value)
    assert [skipped(prod)[n] for n in t4] == ["true", "true", None, None]
    prod.faults.clear()
    report = pause(kube, prod_spec, "prod")
    assert report.changed == t4[2:] and report.unchanged == t4[:2]
    assert resume(kube, prod_spec, "prod").changed == t4
    assert [skipped(prod)[n] for n in t4] == [None] * 4


def test_interrupted_resume_is_finished_by_a_rerun(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    t4 = t4_nodes(prod)
    for node in t4:
        move_node(prod, node, "upgrade-required")
    pause(kube, prod_spec, "prod")
    prod.faults.append(Fault(503, verb="patch", plural="nodes", skip=1, times=99))
    with pytest.raises(ChangeInterrupted) as raised:
        resume(kube, prod_spec, "prod")
    assert raised.value.report.changed == t4[:1]
    prod.faults.clear()
    assert resume(kube, prod_spec, "prod").changed == t4[1:]
    assert [skipped(prod)[n] for n in t4] == [None] * 4
    assert sum(v == "true" for v in skipped(prod).values()) == 12  # the held pools keep their labels


def test_no_node_of_the_stack_is_an_error_not_a_no_op(fake: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    with pytest.raises(NoNodesError, match="no node of the stack's pools on this cluster"):
        pause(kube, prod_spec, "prod")
    with pytest.raises(NoNodesError):
        resume(kube, prod_spec, "prod")
    assert fake.writes == 0


def test_our_patches_are_recorded_under_our_field_manager(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    node = t4_nodes(prod)[0]
    pause(kube, prod_spec, "prod")
    entries = prod.obj("nodes", node)["metadata"]["managedFields"]
    [ours] = [e for e in entries if e["manager"] == k.FIELD_MANAGER]
    assert f"f:{SKIP}" in ours["fieldsV1"]["f:metadata"]["f:labels"]
