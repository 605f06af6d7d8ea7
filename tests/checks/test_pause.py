"""pause/resume: only our skip labels, idempotent, and safe after an interruption midway."""

from __future__ import annotations

import pytest

from checks import kube as k
from checks.errors import GaveUpError
from checks.pause import PAUSED_BY, pause, resume
from spec import labels
from spec.model import FleetSpec
from tests.fakekube.fixtures import move_node
from tests.fakekube.server import Fault, FakeKube

SKIP = labels.SKIP_UPGRADE


def skipped(fake: FakeKube) -> dict[str, str | None]:
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(SKIP) for n in fake.objects("nodes")}


def test_pause_labels_nodes_not_done_and_resume_removes_exactly_those(prod: FakeKube, kube: k.Kube,
                                                                     prod_spec: FleetSpec) -> None:
    t4 = sorted(n for n in skipped(prod) if "gput4" in n)
    move_node(prod, t4[0], "upgrade-required")
    move_node(prod, t4[1], "cordon-required")
    before = skipped(prod)  # the held pools (a100, h100) already carry a skip label that is not ours
    report = pause(kube, prod_spec, "prod")
    assert report.changed == t4[:2]  # t4[2:] are upgrade-done: nothing to hold back
    assert sorted(report.done) == t4[2:]
    assert len(report.foreign) == 12
    after = skipped(prod)
    assert {n for n in after if after[n] == "true"} == {n for n in before if before[n] == "true"} | set(t4[:2])

    again = pause(kube, prod_spec, "prod")
    assert again.changed == [] and again.unchanged == t4[:2]

    released = resume(kube, prod_spec, "prod")
    assert released.changed == t4[:2]
    assert skipped(prod) == before
    assert all(PAUSED_BY not in (n["metadata"].get("annotations") or {}) for n in prod.objects("nodes"))
    assert resume(kube, prod_spec, "prod").changed == []


def test_interrupted_pause_is_finished_by_a_rerun(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    t4 = sorted(n for n in skipped(prod) if "gput4" in n)
    for node in t4:
        move_node(prod, node, "upgrade-required")
    prod.faults.append(Fault(500, verb="patch", plural="nodes", skip=2, times=99))  # the 3rd patch keeps failing
    with pytest.raises(GaveUpError):
        pause(kube, prod_spec, "prod")
    assert [skipped(prod)[n] for n in t4] == ["true", "true", None, None]
    prod.faults.clear()
    report = pause(kube, prod_spec, "prod")
    assert report.changed == t4[2:] and report.unchanged == t4[:2]
    assert resume(kube, prod_spec, "prod").changed == t4
    assert [skipped(prod)[n] for n in t4] == [None] * 4


def test_interrupted_resume_is_finished_by_a_rerun(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    t4 = sorted(n for n in skipped(prod) if "gput4" in n)
    for node in t4:
        move_node(prod, node, "upgrade-required")
    pause(kube, prod_spec, "prod")
    prod.faults.append(Fault(503, verb="patch", plural="nodes", skip=1, times=99))
    with pytest.raises(GaveUpError):
        resume(kube, prod_spec, "prod")
    prod.faults.clear()
    assert resume(kube, prod_spec, "prod").changed == t4[1:]
    assert [skipped(prod)[n] for n in t4] == [None] * 4
    assert sum(v == "true" for v in skipped(prod).values()) == 12  # the held pools keep their labels
