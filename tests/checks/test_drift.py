"""Each drift kind (checks/drift.py) on its own: what the guard alerts on between rollouts."""

from __future__ import annotations

from typing import Any

from checks.drift import metric_drift, node_drift
from checks.inventory import pool_nodes_of
from checks.prometheus import Prometheus, PrometheusError
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.fakekube.fixtures import driver_labels, finish_upgrade
from tests.fakekube.server import FakeKube
from vocabulary.triggers import DriftKind
from workload import result as job_result

DAY = 86400.0


def t4(fake: FakeKube) -> list[dict]:
    return [n for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"]]


def drift_of(fake: FakeKube, spec: FleetSpec, now: float, deadline: float = 1800.0) -> set[tuple[str, str]]:
    return {(d.kind.value, d.subject) for d in node_drift(spec, pool_nodes_of(spec, fake.objects("nodes")), now,
                                                            deadline)}


def test_a_steady_cluster_before_its_rollout_shows_no_driver_drift(prod: FakeKube, prod_spec: FleetSpec) -> None:
    found = drift_of(prod, prod_spec, 0.0)
    assert not {kind for kind, _ in found} & {DriftKind.OTHER_DRIVER.value, DriftKind.GFD_LABELS.value}


def test_other_driver_once_the_pool_arrived(prod: FakeKube, prod_spec: FleetSpec) -> None:
    names = [n["metadata"]["name"] for n in t4(prod)]
    for name in names[1:]:
        finish_upgrade(prod, name, prod_spec.driver.version)
    assert (DriftKind.OTHER_DRIVER.value, names[0]) in drift_of(prod, prod_spec, 0.0)  # no state label: settled
    prod.update("nodes", names[0], {"metadata": {"labels": {labels.UPGRADE_STATE: "upgrade-required"}}})
    assert (DriftKind.OTHER_DRIVER.value, names[0]) not in drift_of(prod, prod_spec, 0.0)  # upgrading: no drift
    prod.update("nodes", names[0], {"metadata": {"labels": {labels.UPGRADE_STATE: "upgrade-done"}}})
    assert (DriftKind.OTHER_DRIVER.value, names[0]) in drift_of(prod, prod_spec, 0.0)


def test_unvalidated_after_the_deadline_and_passed_for_the_driver_it_runs(prod: FakeKube, prod_spec: FleetSpec) -> None:
    first, second, third = [n["metadata"]["name"] for n in t4(prod)][:3]
    running = driver_labels("570.195.03")["nvidia.com/cuda.driver-version.full"]
    prod.update("nodes", second, {"metadata": {"labels": {job_result.LABEL_VALIDATED_DRIVER: running,
                                                          job_result.LABEL_OUTCOME: job_result.PASSED}}})
    prod.update("nodes", third, {"metadata": {"labels": {job_result.LABEL_VALIDATED_DRIVER: "560.35.03",
                                                         job_result.LABEL_OUTCOME: job_result.PASSED}}})
    later = {subject for kind, subject in drift_of(prod, prod_spec, 4e9) if kind == DriftKind.UNVALIDATED}
    assert first in later and third in later and second not in later
    assert not {s for k, s in drift_of(prod, prod_spec, 0.0) if k == DriftKind.UNVALIDATED}  # young nodes: not yet


def test_gfd_labels_contradicting_the_pools_declaration(prod: FakeKube, prod_spec: FleetSpec) -> None:
    name = t4(prod)[0]["metadata"]["name"]
    prod.update("nodes", name, {"metadata": {"labels": {labels.GPU_COUNT: "2"}}})
    [found] = [d for d in node_drift(prod_spec, pool_nodes_of(prod_spec, prod.objects("nodes")), 0.0, 1800.0)
               if d.kind == DriftKind.GFD_LABELS]
    assert found.subject == name and f"{labels.GPU_COUNT}=2" in found.message


class Answers:
    """A Prometheus transport answering each query by the metric it names; ``fail`` raises as a down server does."""

    where = "http://prometheus.test"

    def __init__(self, gpu_util: list[str], xids: dict[str, int], fail: bool = False) -> None:
        self.gpu_util, self.xids, self.fail = gpu_util, xids, fail

    def post(self, path: str, form: list[tuple[str, str]], expr: str) -> dict[str, Any]:
        if self.fail:
            raise PrometheusError("connection refused")
        if expr.startswith("count by"):
            return {"resultType": "vector", "result": [{"metric": {"Hostname": n}, "value": [0, "8"]}
                                                       for n in self.gpu_util]}
        return {"resultType": "vector", "result": [{"metric": {"Hostname": n}, "value": [0, str(x)]}
                                                   for n, x in self.xids.items()]}


def test_xid_and_dcgm_silence_from_prometheus(prod: FakeKube, prod_spec: FleetSpec) -> None:
    nodes = pool_nodes_of(prod_spec, prod.objects("nodes"))
    names = [n["metadata"]["name"] for n, _ in nodes]
    answers = Answers(gpu_util=names[1:], xids={names[1]: 79, names[2]: 43})
    found = {(d.kind.value, d.subject) for d in metric_drift(Prometheus(transport=answers), nodes)}
    assert found == {(DriftKind.DCGM_SILENT.value, names[0]), (DriftKind.XID.value, names[1])}  # 43: expected


def test_a_prometheus_that_cannot_be_read_is_said_never_a_pass(prod: FakeKube, prod_spec: FleetSpec) -> None:
    nodes = pool_nodes_of(prod_spec, prod.objects("nodes"))
    [found] = metric_drift(Prometheus(transport=Answers([], {}, fail=True)), nodes)
    assert found.kind == DriftKind.DCGM_SILENT and "could not be read" in found.message
