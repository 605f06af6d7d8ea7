"""verify's reading of Prometheus, part by part, on the hour-old canary of tests/checks/verify_world.py against a
real Prometheus: DCGM series matched to nodes in both exporter deployments, every Xid whichever way the exporter
reports it, a missing counter named, queries split under a size limit giving the same facts, Prometheus behind a
service proxy the identity may not use, and a baseline that is like for like or none at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checks import kube as kube_module
from checks.catalogue import CATALOGUE
from checks.prometheus import Prometheus, PrometheusError, connect, split_query
from checks.results import CheckResult
from checks.serving import histogram_quantile
from checks.soak_metrics import before_guard
from checks.verify_facts import stamp
from checks.verify_read import gather
from fleetspec.load import load_stack_file
from fleetspec.model import Drain, PodDeletion, UpgradePolicy, WaitForCompletion
from fleetspec.observability import parse_prometheus
from tests.conftest import PROJECT_DIR
from tests.checks.verify_world import NEW, PROMETHEUS_SERVICE, ProxyKube, Soak, World, build, history
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, binary, start

needs_prometheus = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)


def _answer(pod: Any, port: int, path: str, body: Any = None) -> dict[str, Any]:
    return {"data": [{"id": "llm-chat"}], "choices": [{"text": " hello"}]}


@pytest.fixture
def fake() -> Iterator[ProxyKube]:
    with ProxyKube() as served:
        yield served


def _results(world: World, tmp_path: Path, prometheus: Prometheus | None) -> dict[str, list[CheckResult]]:
    kube = kube_module.connect(str(world.fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
    out: dict[str, list[CheckResult]] = {}
    for result in CATALOGUE.run("verify", gather(kube, world.spec, prometheus, now=world.now, ask=_answer)):
        out.setdefault(result.id, []).append(result)
    return out


def _by_subject(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.subject: r for r in results}


# ---------------------------------------------------------------- DCGM: which series is which node's


@needs_prometheus
@pytest.mark.parametrize(("layout", "matched_by"), [
    ("embedded", "Hostname"),  # the exporter embeds the host engine: Hostname is the node
    ("node-label", "kubernetes_node"),  # standalone nvidia-dcgm, a relabelling adds the node
    ("exporter-pod", "instance (the exporter pod's node)"),  # standalone, nothing but the scrape target
])
def test_dcgm_series_are_matched_to_nodes_in_both_exporter_deployments(fake: ProxyKube, tmp_path: Path, layout: str,
                                                                       matched_by: str) -> None:
    world = build(fake, tmp_path)
    node = world.canary_nodes[1]
    with start(history(world, soak=Soak(layout=layout, xids=[(node, world.finished[node] + 900, 79)])),
               tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    dcgm = _by_subject(results["dcgm-metrics"])
    assert {r.status.value for r in dcgm.values()} == {"pass"}, [r.message for r in dcgm.values()]
    assert {r.evidence["matchedBy"] for r in dcgm.values()} == {matched_by}
    assert all(r.evidence["seriesByDriver"] == {NEW: 1} for r in dcgm.values())
    xids = _by_subject(results["no-new-xid"])
    assert xids[node].status.value == "fail" and "Xid 79 on GPU 0 of " + node in xids[node].message, xids[node].message
    assert {r.status.value for s, r in xids.items() if s != node} == {"pass"}


@needs_prometheus
def test_series_that_name_the_host_engine_only_are_no_nodes(fake: ProxyKube, tmp_path: Path) -> None:
    """Standalone nvidia-dcgm, no node label, and exporter pods the series cannot be traced to: never a pass."""
    world = build(fake, tmp_path)
    world.fake.store["pods"] = {key: p for key, p in world.fake.store["pods"].items()
                                if p["metadata"]["labels"].get("app") != "nvidia-dcgm-exporter"}
    with start(history(world, soak=Soak(layout="exporter-pod")), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    assert {r.status.value for r in results["dcgm-metrics"]} == {"inconclusive"}
    assert {r.status.value for r in results["no-new-xid"]} == {"inconclusive"}
    assert "its series name no node (Hostname, kubernetes_node, node) nor a DCGM Exporter pod" in (
        results["no-new-xid"][0].message)


@needs_prometheus
def test_series_without_the_driver_label_are_inconclusive_naming_it(fake: ProxyKube, tmp_path: Path) -> None:
    """An exporter running dcgm-exporter's default-counters.csv, which does not collect DCGM_FI_DRIVER_VERSION."""
    world = build(fake, tmp_path)
    with start(history(world, soak=Soak(driver_label=False)), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    found = results["dcgm-metrics"]
    assert {r.status.value for r in found} == {"inconclusive"}
    assert "carry no DCGM_FI_DRIVER_VERSION label" in found[0].message and "default-counters.csv" in found[0].message


# ---------------------------------------------------------------- every Xid, however it is reported


@needs_prometheus
@pytest.mark.parametrize(("soak", "source"), [
    (Soak(err_code=False), "DCGM_FI_DEV_XID_ERRORS"),  # one series: its value overwritten
    (Soak(err_code=True), "DCGM_FI_DEV_XID_ERRORS"),  # a series per err_code: the 79 series comes and goes
    (Soak(xid_count=True), "DCGM_EXP_XID_ERRORS_COUNT"),  # the exporter's count per xid, where exported
])
def test_an_xid_overwritten_within_minutes_is_seen_whatever_the_exporter_exports(
        fake: ProxyKube, tmp_path: Path, soak: Soak, source: str) -> None:
    world = build(fake, tmp_path, soak_minutes=3 * 60)
    node = world.canary_nodes[0]
    at = world.finished[node] + 3600 + 17 * 60  # between two hourly looks, in the coarse part of the history
    soak.xids = [(node, at, 119), (node, at + 300, 43)]
    with start(history(world, soak=soak, dcgm_coarse=60), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    found = _by_subject(results["no-new-xid"])[node]
    assert found.status.value == "fail" and found.message.startswith("Xid 119 since the upgrade finished")
    assert found.evidence["source"] == source
    assert [e["xid"] for e in found.evidence["events"]] == [43, 119, 43]


# ---------------------------------------------------------------- queries by POST, split under a size limit


def test_a_split_query_matches_every_value_once_within_the_limit() -> None:
    names = [f"aks-gpuh100-12345678-vmss{i:06x}" for i in range(2000)]

    def render(regex: str) -> str:
        return f'max by (Hostname) (DCGM_FI_DEV_GPU_UTIL{{Hostname=~"{regex}"}} or up{{node=~"{regex}"}})'

    parts = split_query(names, render, 8000)
    assert len(parts) > 10 and all(len(p.encode()) <= 8000 for p in parts)
    assert sorted(n for p in parts for n in p.split('"')[1].replace("\\\\", "").split("|")) == sorted(names)
    with pytest.raises(PrometheusError, match="alone is longer than 100 bytes"):
        split_query(["x" * 200], render, 100)


@needs_prometheus
def test_split_queries_read_the_same_facts(fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path)
    node = world.canary_nodes[2]
    with start(history(world, xid_on=node), tmp_path / "prometheus") as url:
        whole = Prometheus(url)
        split = Prometheus(url, max_query_bytes=700)  # a node or pod regex of a few names at most
        results = _results(world, tmp_path, whole), _results(world, tmp_path, split)
    assert split.requests > whole.requests
    assert [(r.id, r.subject, r.status, r.message) for rs in results[0].values() for r in rs] == [
        (r.id, r.subject, r.status, r.message) for rs in results[1].values() for r in rs]
    assert _by_subject(results[1]["no-new-xid"])[node].status.value == "fail"


def test_the_histogram_quantile_is_prometheus_own() -> None:
    """p95 of vLLM buckets as histogram_quantile interpolates it (tests/checks/verify_world.py: 1.75 s)."""
    cumulative = {0.5: 20.0, 1.0: 70.0, 1.5: 90.0, 2.0: 100.0, 2.5: 100.0, float("inf"): 100.0}
    assert histogram_quantile(0.95, cumulative) == pytest.approx(1.75)
    assert histogram_quantile(0.95, {1.0: 0.0, float("inf"): 10.0}) == 1.0  # in the +Inf bucket: the top bound
    assert histogram_quantile(0.95, {1.0: 5.0}) is None  # no +Inf bucket


# ---------------------------------------------------------------- through the service proxy


@needs_prometheus
def test_a_service_proxy_the_identity_may_not_use_is_inconclusive_naming_the_permission(
        fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path, validation={"prometheus": f"{PROMETHEUS_SERVICE[0]}/{PROMETHEUS_SERVICE[1]}"})
    kube = kube_module.connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
    assert world.spec.validation is not None and world.spec.validation.prometheus is not None
    prometheus = connect(parse_prometheus(world.spec.validation.prometheus), kube)
    fake.deny_service_proxy = True
    results = _results(world, tmp_path, prometheus)
    for check_id in ("latency-throughput", "no-new-xid", "dcgm-metrics"):
        assert {r.status.value for r in results[check_id]} == {"inconclusive"}, check_id
    message = results["dcgm-metrics"][0].message
    assert message.startswith("service monitoring/prometheus-k8s:9090 (through the API server's service proxy)")
    assert "needs RBAC permission to 'create' 'services/proxy' in namespace monitoring" in message


# ---------------------------------------------------------------- like for like, or not at all


@needs_prometheus
def test_old_driver_pods_of_another_product_are_never_the_baseline(fake: ProxyKube, tmp_path: Path) -> None:
    """The old-driver pods are prod's 8-GPU H100 SXM pods; the canary model's pods take one H100 NVL each, and its
    pools' nodes ran other products before (its pods were on a pool of another GPU product): inconclusive."""
    world = build(fake, tmp_path, like_for_like=False)
    # Without kube-state-metrics nothing shows where the model's pods ran before the upgrade.
    with start(history(world, soak=Soak(kube_state_metrics=False)), tmp_path / "prometheus") as url:
        spec = world.spec.model_copy(update={"models": [world.spec.models[0].model_copy(update={
            "nodePools": ["gpucanary", "canarya100"]})]})
        world.spec = spec
        results = _results(world, tmp_path, Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "inconclusive"
    assert found.message.startswith("no like-for-like baseline: no Ready pod matching app=llm-chat in namespace "
                                    "inference runs on an old-driver node of NVIDIA-H100-NVL with 1 GPU(s) per pod")
    assert "never compared across products" in found.message
    assert found.evidence["notLikeForLike"] == [
        f"{pod} (NVIDIA-H100-80GB-HBM3, 8 GPU(s) per pod)" for pod in world.old_pods]


@needs_prometheus
def test_without_like_old_driver_pods_the_model_is_compared_with_itself_before_the_upgrade(
        fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path, like_for_like=False)
    with start(history(world, slower=True), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "fail", found.message
    assert "p95 latency 2.25s vs 1.75s before the upgrade (more than 20% higher)" in found.message
    baseline = found.evidence["baseline"]
    assert baseline["kind"] == "before the upgrade" and baseline["pods"] == ["llm-chat-canary-[a-z0-9]+-[a-z0-9]+"]
    assert found.evidence["oldPods"] == [] and len(found.evidence["notLikeForLike"]) == 2
    # The day compared with ends before the first node's pods could have been drained: podDeletion's 600 s
    # (waitForCompletion selects no pod, drain is off) and an hour's margin before it finished.
    first = min(t for t in world.finished.values())
    assert baseline["window"]["end"] == stamp(first - 600 - 3600)
    assert baseline["window"]["ends"] == ("ends 1 h 10 min before the first node finished its upgrade: "
                                          "podDeletion.timeoutSeconds 600 + a 1 h margin, so no pod drained for the "
                                          "upgrade is in it")


def test_the_baseline_ends_before_every_bounded_step_of_the_upgrade_policy() -> None:
    """waitForCompletion (when it selects pods), podDeletion and drain (when enabled) each bound how long before
    its finish a node's pods were drained; one without a bound (0) is taken as a day, and the evidence says so."""
    spec = load_stack_file(PROJECT_DIR / "Pulumi.canary.yaml")
    policy = spec.gpuOperator.upgradePolicy.model_copy(update={
        "waitForCompletion": WaitForCompletion(podSelector="workload-class=batch", timeoutSeconds=3600),
        "podDeletion": PodDeletion(timeoutSeconds=900), "drain": Drain(enable=True, timeoutSeconds=0)})
    operator = spec.gpuOperator.model_copy(update={"upgradePolicy": policy})
    seconds, why = before_guard(spec.model_copy(update={"gpuOperator": operator}))
    assert seconds == 3600 + 900 + 86400 + 3600
    assert why.startswith("ends 26 h 15 min before the first node finished its upgrade: waitForCompletion.timeoutSeconds "
                          "3600 + podDeletion.timeoutSeconds 900 + drain.timeoutSeconds 0 (no bound: taken as a day)")


def test_the_baseline_ends_before_the_longest_pod_deletion_a_pool_s_own_policy_allows() -> None:
    """A pool's own upgradePolicy (nodePools[].upgradePolicy, as `simulate` may recommend a longer
    podDeletion.timeoutSeconds) bounds its nodes' drains; the window ends before the longest of them."""
    spec = load_stack_file(PROJECT_DIR / "Pulumi.canary.yaml")
    assert spec.per_pool_upgrade_policies and spec.gpuOperator.upgradePolicy.podDeletion.timeoutSeconds == 600
    pools = [spec.nodePools[0].model_copy(update={"upgradePolicy": UpgradePolicy.model_validate(
        {"podDeletion": {"timeoutSeconds": 900}})}), *spec.nodePools[1:]]
    seconds, why = before_guard(spec.model_copy(update={"nodePools": pools}))
    assert seconds == 900 + 3600
    assert why == (f"ends 1 h 15 min before the first node finished its upgrade: podDeletion.timeoutSeconds 900 (pool "
                   f"{pools[0].name}'s own upgradePolicy) + a 1 h margin, so no pod drained for the upgrade is in it")


@needs_prometheus
def test_a_bucket_with_too_few_requests_is_reported_not_judged(fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path, validation={"minBucketRequests": 100_000})
    with start(history(world, slower=True), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "fail"  # slower, but nothing was judged: too little of the soak to attest
    assert found.message.startswith("not enough of the soak judged: 0 of 1 bucket(s) judged (0%), less than "
                                    "validation.minServingJudgedFraction (90%); with fewer than 100000 requests on a "
                                    "side: hour 1 (")
    assert "p95 latency" not in found.message
    assert found.evidence["buckets"]["judged"] == 0 and found.evidence["buckets"]["judgedFraction"] == 0


@needs_prometheus
def test_a_soak_with_fewer_requests_than_the_floor_fails(fake: ProxyKube, tmp_path: Path) -> None:
    """Every bucket judged, but the soak served fewer requests than validation.minRequests: served traffic means
    that floor, never one request."""
    world = build(fake, tmp_path, validation={"minBucketRequests": 1, "minRequests": 1_000_000})
    with start(history(world), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "fail"
    assert "request(s) on new-driver pods over the soak, fewer than validation.minRequests (1000000)" in found.message
    assert found.evidence["requests"]["minRequests"] == 1_000_000
    assert 0 < found.evidence["requests"]["newDriver"] < 1_000_000


@needs_prometheus
def test_an_error_rate_above_the_baseline_fails_its_bucket(fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path)
    with start(history(world, soak=Soak(errors=lambda at: 0.05)), tmp_path / "prometheus") as url:
        results = _results(world, tmp_path, Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "fail"
    assert "error rate 5.00% vs 0.00% on old-driver pods (more than 1 points higher)" in found.message
