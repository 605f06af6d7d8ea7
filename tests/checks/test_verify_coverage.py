"""Missing telemetry is never a pass: verify knows, per GPU of every upgraded node and per bucket of the soak,
whether DCGM samples arrived (``count_over_time``), and fails `dcgm-metrics` and `no-new-xid` below
``validation.minJudgedFraction``, naming the buckets. Series of DCGM Exporter pods replaced during the soak are
traced to their nodes through kube-state-metrics' ``kube_pod_info``, else the gap is named. An Xid 43/45 outside
the node's own upgrade window leaves its GPU's bucket unjudged where the gauge could hide another Xid behind it,
and never fails the check by itself.

The canary of tests/checks/verify_world.py (the AKS example: three H100 NVL nodes of one GPU each), soaked ten
hours, against a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checks import kube as kube_module
from checks.catalogue import CATALOGUE
from checks.prometheus import Prometheus
from checks.results import CheckResult
from checks.verify_read import gather
from tests.checks.verify_world import HOUR, ProxyKube, Soak, World, build, history
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, binary, start

pytestmark = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)

SOAK_HOURS = 10


@pytest.fixture
def fake() -> Iterator[ProxyKube]:
    with ProxyKube() as served:
        yield served


def _answer(pod: Any, port: int, path: str, body: Any = None) -> dict[str, Any]:
    return {"data": [{"id": "llm-chat"}], "choices": [{"text": " hello"}]}


def _results(world: World, tmp_path: Path, url: str) -> dict[str, list[CheckResult]]:
    kube = kube_module.connect(str(world.fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
    out: dict[str, list[CheckResult]] = {}
    for result in CATALOGUE.run("verify", gather(kube, world.spec, Prometheus(url), now=world.now, ask=_answer)):
        out.setdefault(result.id, []).append(result)
    return out


def _soaked(fake: ProxyKube, tmp_path: Path, **validation: Any) -> World:
    return build(fake, tmp_path, soak_minutes=SOAK_HOURS * 60, validation=validation)


def test_dcgm_samples_missing_for_most_of_the_soak_fail_both_checks_naming_the_hours(
        fake: ProxyKube, tmp_path: Path) -> None:
    """The new driver broke dcgm-exporter from hour 2 until half an hour before verify (hour 10 has samples): the
    exporter reports the target driver now, and no Xid was seen, but neither check passes on a soak it did not see."""
    world = _soaked(fake, tmp_path)
    gap = (world.soak_start + HOUR, world.now - 1800)
    with start(history(world, soak=Soak(dcgm_gap=gap)), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, url)
    # For Xids hour 10 is not judged either: the gauge's series came back with the 43 it held, which could be new.
    for check, share, last in (("dcgm-metrics", 20, 9), ("no-new-xid", 10, 10)):
        for found in results[check]:
            assert found.status.value == "fail", (check, found.message)
            assert (f"of the soak ({share}%), less than validation.minJudgedFraction (95%); not judged: hour 2 to hour "
                    f"{last} (") in found.message, found.message
            assert "): GPU 0" in found.message
            assert found.evidence["coverage"]["judgedFraction"] == pytest.approx(share / 100)
    assert results["dcgm-metrics"][0].message.startswith("DCGM reports 580.173.02 now, but DCGM_FI_DEV_GPU_UTIL "
                                                         "samples judged in 2 of 10 GPU-bucket(s)")


def test_a_gap_under_the_floor_is_named_but_passes(fake: ProxyKube, tmp_path: Path) -> None:
    """One hour of ten without samples is 90 % judged: enough where the stack asks for 85 %, and said."""
    world = _soaked(fake, tmp_path, minJudgedFraction=0.85)
    gap = (world.soak_start + 3 * HOUR, world.soak_start + 4 * HOUR)
    with start(history(world, soak=Soak(dcgm_gap=gap)), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, url)
    for found in results["dcgm-metrics"]:
        assert found.status.value == "pass", found.message
        assert found.message.endswith("; samples in 90% of the soak's GPU-buckets")
        assert found.evidence["coverage"]["notJudged"][0].startswith("hour 4 (")


def _late_xids(world: World) -> tuple[str, list[tuple[str, float, int]]]:
    """A 43 on the first node's GPU long after its upgrade window (the gauge cleared before it, and after)."""
    node, at = world.canary_nodes[0], world.soak_start + 5 * HOUR + 600
    return node, [(node, at - 600, 0), (node, at, 43), (node, at + 600, 0)]


def test_a_43_outside_the_upgrade_window_leaves_its_hour_unjudged_and_never_fails_by_itself(
        fake: ProxyKube, tmp_path: Path) -> None:
    world = _soaked(fake, tmp_path, minJudgedFraction=0.85)
    node, xids = _late_xids(world)
    with start(history(world, soak=Soak(xids=xids)), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, url)
    found = {r.subject: r for r in results["no-new-xid"]}[node]
    assert found.status.value == "pass", found.message
    assert "outside its upgrade window, its GPU's bucket not judged, a later Xid could hide behind it in the gauge: " \
           "Xid 43 on GPU 0 at " in found.message
    assert "90% of the soak's GPU-buckets judged" in found.message
    assert found.evidence["coverage"]["notJudged"][0].startswith("hour 6 (")
    # Under the default floor (95 %), the hour it hides is too much of a ten-hour soak: it fails for that.
    with ProxyKube() as other:
        (tmp_path / "strict").mkdir()
        strict = _soaked(other, tmp_path / "strict")
        node, xids = _late_xids(strict)
        with start(history(strict, soak=Soak(xids=xids)),
                   tmp_path / "strict" / "prometheus") as url:
            found = {r.subject: r for r in _results(strict, tmp_path / "strict", url)["no-new-xid"]}[node]
    assert found.status.value == "fail" and "Xid 43" not in found.message.split("seen:")[0]
    assert "too little of the soak was seen: DCGM samples with no Xid 43/45 that could hide another judged in 9 of " \
           "10" in found.message


def test_where_the_exporter_counts_xids_a_late_43_hides_nothing(fake: ProxyKube, tmp_path: Path) -> None:
    world = _soaked(fake, tmp_path)
    node, xids = _late_xids(world)
    soak = Soak(xids=xids, xid_count=True)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        found = {r.subject: r for r in _results(world, tmp_path, url)["no-new-xid"]}[node]
    assert found.status.value == "pass", found.message
    assert "DCGM_EXP_XID_ERRORS_COUNT shows every other Xid: Xid 43 on GPU 0" in found.message
    assert found.evidence["coverage"]["judgedFraction"] == 1.0


def test_series_of_an_exporter_pod_replaced_during_the_soak_are_traced_through_kube_pod_info(
        fake: ProxyKube, tmp_path: Path) -> None:
    """The standalone host engine: only the scrape target names the node. The first node's exporter pod was
    replaced at hour 6; its series before came from another pod IP, which kube_pod_info tells; without
    kube_pod_info for the exporter the gap is named and the soak is not judged."""
    world = _soaked(fake, tmp_path)
    node = world.canary_nodes[0]
    soak = Soak(layout="exporter-pod", replaced_exporter=(node, world.soak_start + 6 * HOUR))
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        found = {r.subject: r for r in _results(world, tmp_path, url)["dcgm-metrics"]}[node]
    assert found.status.value == "pass", found.message
    assert found.evidence["coverage"]["judgedFraction"] == 1.0
    assert found.evidence["coverage"]["exporterHistory"].startswith("1 DCGM Exporter pod(s) of the past traced")
    with ProxyKube() as other:
        (tmp_path / "blind").mkdir()
        blind = _soaked(other, tmp_path / "blind")
        node = blind.canary_nodes[0]
        soak = Soak(layout="exporter-pod", replaced_exporter=(node, blind.soak_start + 6 * HOUR), exporter_info=False)
        with start(history(blind, soak=soak), tmp_path / "blind" / "prometheus") as url:
            found = {r.subject: r for r in _results(blind, tmp_path / "blind", url)["dcgm-metrics"]}[node]
    assert found.status.value == "fail"
    assert "not judged: hour 1 to hour 6 (" in found.message
    assert ("kube_pod_info (kube-state-metrics) shows no pod of the exporter's DaemonSet (nvidia-dcgm-exporter) in "
            "namespace gpu-operator") in found.message
