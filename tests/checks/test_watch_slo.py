"""`gpu-rollout watch` reads each model's SLO (``models[].slo``) on the pools being upgraded from a real Prometheus
(tests/prometheus, backfilled with the canary's vLLM history from tests/checks/verify_world.py): a breach that
lasts as long as the stack declares pauses the rollout naming the model, the pool and the figure; a shorter one,
or a model within its objectives, does not."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from checks import kube as kube_module
from checks.prometheus import Prometheus
from checks.watch import WatchOutcome, watch
from rollout.cli import app
from tests.checks.verify_world import ProxyKube, Soak, World, build, history, ticks
from tests.conftest import PROJECT_DIR
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, History, binary, start
from tests.rollout.json_contract import document_of

pytestmark = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)

MINUTE = 60.0


@pytest.fixture
def fake() -> Iterator[ProxyKube]:
    with ProxyKube() as served:
        yield served


def _world(fake: ProxyKube, tmp_path: Path, **slo: object) -> World:
    return build(fake, tmp_path, model={"slo": slo})


def _watch_once(world: World, tmp_path: Path, url: str) -> WatchOutcome:
    kube = kube_module.connect(str(world.fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
    return watch(kube, world.spec, "canary", once=True, clock=lambda: world.now, prometheus=Prometheus(url))


def test_an_error_rate_breached_for_as_long_as_declared_pauses_naming_model_pool_and_figure(
        fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%", **{"for": "10m"})
    soak = Soak(errors=lambda at: 0.05 if at > world.now - 20 * MINUTE else 0.0)
    kubeconfig = world.fake.write_kubeconfig(tmp_path / "kubeconfig")
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        result = CliRunner().invoke(app, ["watch", "--stack-file", str(world.stack_file), "--kubeconfig",
                                          str(kubeconfig), "--once", "--json", "--prometheus", url])
    assert result.exit_code == 1, result.output
    doc = document_of("watch", result.stdout)
    (trigger,) = doc["triggers"]
    assert trigger["kind"] == "slo-breach" and trigger["subject"] == "inference/llm-chat-canary@gpucanary"
    assert trigger["message"].startswith("model inference/llm-chat-canary on pool gpucanary: error rate 5.00%")
    assert trigger["message"].endswith("above its objective 1.00% for 10m (models[].slo)")
    assert doc["paused"] is not None and doc["pauseError"] is None  # paused as on upgrade-failed
    (reading,) = doc["slo"]
    assert reading["breached"] and reading["figures"] >= reading["expected"] == 6  # every minute of the last 5
    assert "rollout stopped: model inference/llm-chat-canary on pool gpucanary" in result.stderr


def test_a_breach_shorter_than_declared_does_not_pause(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%", **{"for": "10m"})
    soak = Soak(errors=lambda at: 0.05 if at > world.now - 4 * MINUTE else 0.0)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    assert not outcome.triggered and outcome.paused is None
    (reading,) = outcome.snapshot.slo
    assert not reading.breached and reading.latest is not None and reading.latest > 0.01  # high now, not for 10m


def test_a_p95_latency_objective_is_read_from_the_latency_histogram(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, p95LatencySeconds=2.0, **{"for": "15m"})
    soak = Soak(slower=lambda at: at > world.now - 30 * MINUTE)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.message.startswith("model inference/llm-chat-canary on pool gpucanary: p95 latency 2.25s")
    assert outcome.paused is not None


def test_a_model_within_its_objectives_does_not_pause(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%", p95LatencySeconds=2.0)
    with start(history(world), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    assert not outcome.triggered
    assert [(r.metric, r.breached, r.latest) for r in outcome.snapshot.slo] == [
        ("errorRate", False, 0.0), ("p95LatencySeconds", False, pytest.approx(1.75, rel=0.02))]


def test_an_image_owned_stack_reports_a_breach_and_pauses_nothing(fake: ProxyKube, tmp_path: Path) -> None:
    """The EKS canary (the driver in the AMI): its SLO is read on the newest generation's pool the same way; the
    breach stops the watch, and there is no operator upgrade to pause."""
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.eks-canary.yaml").read_text(encoding="utf-8"))
    doc["config"]["gpu-driver-upgrade:models"][0]["slo"] = {"errorRate": "2%", "for": "5m"}
    stack_file = tmp_path / "Pulumi.eks-canary.yaml"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    world = build(fake, tmp_path, stack_file=stack_file)
    soak = Soak(errors=lambda at: 0.10 if at > world.now - 15 * MINUTE else 0.0)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.kind == "slo-breach" and trigger.message.startswith(
        "model inference/llm-chat-canary on pool gpu-canary: error rate 10.00%")
    assert outcome.paused is None


# ---------------------------------------------------------------- a model with no slo: its own baseline


def test_a_model_with_no_slo_is_watched_against_its_own_figures_a_day_before(fake: ProxyKube, tmp_path: Path) -> None:
    """The canary model's pods a day before (its ReplicaSet's earlier pods, found by name) served clean at a p95 of
    about 1.75 s: the default objectives are 1 % errors and 1.5 times that p95."""
    world = build(fake, tmp_path)
    assert world.spec.models[0].slo is None
    with start(history(world), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    assert not outcome.triggered
    readings = {r.metric: r for r in outcome.snapshot.slo}
    assert all(r.default and r.error is None for r in readings.values())
    assert readings["errorRate"].baseline == 0.0 and readings["errorRate"].objective == pytest.approx(0.01)
    assert readings["p95LatencySeconds"].baseline == pytest.approx(1.75, rel=0.02)
    assert readings["p95LatencySeconds"].objective == pytest.approx(1.5 * readings["p95LatencySeconds"].baseline)


def test_errors_a_point_above_its_own_baseline_for_ten_minutes_pause_a_model_with_no_slo(
        fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path)
    soak = Soak(errors=lambda at: 0.05 if at > world.now - 20 * MINUTE else 0.0)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.kind == "slo-breach" and trigger.subject == "inference/llm-chat-canary@gpucanary"
    assert trigger.message.endswith("above its objective 1.00% for 10m (no models[].slo: its own 0.00% a day "
                                    "before plus 1% point)")
    assert outcome.paused is not None


# ---------------------------------------------------------------- no data is no sign of health


def _cut(found: History, pods: list[str], after: float) -> History:
    """``found`` with no sample of ``pods`` after ``after`` (their metrics stopped arriving then)."""
    for (_, labels), points in found.series.items():
        if dict(labels).get("pod") in pods:
            points[:] = [(at, value) for at, value in points if at <= after]
    return found


def test_no_figure_for_as_long_as_the_slo_s_window_pauses(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%", **{"for": "10m"})
    found = _cut(history(world), world.canary_pods, world.now - 15 * MINUTE)
    with start(found, tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.kind == "slo-no-data" and trigger.subject == "inference/llm-chat-canary@gpucanary"
    assert trigger.message == ("model inference/llm-chat-canary on pool gpucanary: no error rate figure for 10m "
                               "(Prometheus holds no series of its pods there): no data is no sign of health")
    assert outcome.paused is not None


def test_a_gap_shorter_than_the_window_is_no_pause(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%", **{"for": "10m"})
    found = _cut(history(world), world.canary_pods, world.now - 4 * MINUTE)
    with start(found, tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    assert not outcome.triggered and outcome.paused is None


def test_a_prometheus_that_does_not_answer_is_named_on_every_reading(fake: ProxyKube, tmp_path: Path) -> None:
    world = _world(fake, tmp_path, errorRate="1%")
    with start(History(), tmp_path / "prometheus") as url:
        pass  # started and stopped: nothing listens on its port now
    outcome = _watch_once(world, tmp_path, url)
    assert outcome.snapshot.slo and all(r.error and url in r.error and not r.breached
                                        for r in outcome.snapshot.slo)


# ---------------------------------------------------------------- SGLang


def _sglang(out: History, pod: str, times: list[float], errors: Callable[[float], float], rate: float = 2.0) -> None:
    """An SGLang pod (--enable-metrics) serving ``rate`` requests a second, as scraped: finished and aborted requests
    counted apart, the end-to-end latency histogram."""
    labels = {"namespace": "inference", "pod": pod, "model_name": "llm-chat"}
    bounds, shares = ("0.5", "1.0", "2.0", "+Inf"), (0.3, 0.6, 0.1, 0.0)
    cumulative = [0.0] * len(bounds)
    finished = aborted = seconds = 0.0
    previous = None
    for at in times:
        if previous is not None:
            requests = rate * (at - previous)
            running = 0.0
            for index, share in enumerate(shares):
                running += share
                cumulative[index] += requests * (1 - errors(at)) * min(running, 1.0)
            finished += requests * (1 - errors(at))
            aborted += requests * errors(at)
            seconds += requests * (1 - errors(at)) * 0.8
        previous = at
        for bound, value in zip(bounds, cumulative, strict=True):
            out.add("sglang:e2e_request_latency_seconds_bucket", {**labels, "le": bound}, at, value)
        out.add("sglang:e2e_request_latency_seconds_sum", labels, at, seconds)
        out.add("sglang:e2e_request_latency_seconds_count", labels, at, finished)
        out.add("sglang:num_requests_total", labels, at, finished)
        out.add("sglang:num_aborted_requests_total", labels, at, aborted)


def test_an_sglang_model_s_figures_are_read_from_its_own_metrics(fake: ProxyKube, tmp_path: Path) -> None:
    world = build(fake, tmp_path, model={"slo": {"errorRate": "1%", "p95LatencySeconds": 5.0, "for": "10m"}},
                  engine="sglang")
    found = History()
    times = [at for at in ticks(world.now - 2 * 3600, world.now, 300.0) if at >= world.soak_start]
    for pod in world.canary_pods:
        _sglang(found, pod, times, lambda at: 0.04 if at > world.now - 20 * MINUTE else 0.0)
    with start(found, tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    readings = {r.metric: r for r in outcome.snapshot.slo}
    # 90 % of requests within 1 s, all within 2 s: the p95 is half way into the (1, 2] bucket
    assert readings["p95LatencySeconds"].latest == pytest.approx(1.5, rel=0.01)
    (trigger,) = outcome.snapshot.triggers
    assert trigger.kind == "slo-breach"
    assert trigger.message.startswith("model inference/llm-chat-canary on pool gpucanary: error rate 4.00%")


def test_a_model_that_served_nothing_is_no_gap(fake: ProxyKube, tmp_path: Path) -> None:
    """Its series are there, with no request: nothing to judge, and nothing missing."""
    world = build(fake, tmp_path, model={"slo": {"errorRate": "1%", "for": "10m"}}, engine="sglang")
    found = History()
    times = [at for at in ticks(world.now - 2 * 3600, world.now, 300.0) if at >= world.soak_start]
    for pod in world.canary_pods:
        _sglang(found, pod, times, lambda at: 0.0, rate=0.0)
    with start(found, tmp_path / "prometheus") as url:
        outcome = _watch_once(world, tmp_path, url)
    (reading,) = outcome.snapshot.slo
    assert reading.figures == [] and not reading.no_data and not outcome.triggered


def test_the_guard_pauses_on_the_same_breach(fake: ProxyKube, tmp_path: Path) -> None:
    """The guard (checks/guard.py) judges the SLO by the same function, on what its informers listed."""
    from checks.guard import Guard

    world = _world(fake, tmp_path, errorRate="1%", **{"for": "10m"})
    soak = Soak(errors=lambda at: 0.05 if at > world.now - 20 * MINUTE else 0.0)
    kube = kube_module.connect(str(world.fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
    with start(history(world, soak=soak), tmp_path / "prometheus") as url:
        guard = Guard(kube, world.spec, "canary", "guard-0", lease_namespace="gpu-rollout-guard",
                      clock=lambda: world.now, prometheus=Prometheus(url))
        try:
            guard.sync()
            assert guard.elect().leader
            found = guard.look()
        finally:
            guard.stop()
    (trigger,) = found.triggers
    assert trigger.kind == "slo-breach" and trigger.subject == "inference/llm-chat-canary@gpucanary"
    assert guard.counters.pauses == 1 and guard.counters.triggers["slo-breach"] == 1


def test_a_prometheus_unanswered_for_as_long_as_the_window_is_a_gap_poll_after_poll() -> None:
    """One poll cannot tell how long Prometheus has not answered; the watch's tracker can: unanswered from the
    first poll on for the SLO's whole `for`, the reading is no data (slo-no-data); an answer in between resets it."""
    from checks.progress import StateTracker
    from checks.slo import SloReading, unanswered_since

    def reading(unanswered: bool) -> SloReading:
        return SloReading("inference/llm-chat", "gpua100", "errorRate", 0.01, 600, ["llm-chat-0"],
                          error="Prometheus at http://127.0.0.1:9/ did not answer" if unanswered else None,
                          unanswered=unanswered)

    tracker, start_at = StateTracker(), 1_000_000.0
    for offset, unanswered, gap in ((0, True, False), (300, True, False), (600, True, True)):
        found = reading(unanswered)
        unanswered_since([found], tracker, start_at + offset)
        assert found.no_data is gap and found.triggered is gap
    assert found.trigger().kind == "slo-no-data"
    assert "no error rate figure for 10 min, the SLO's 10m and more: Prometheus has not answered" in \
        found.trigger().message
    answered = reading(False)
    unanswered_since([answered], tracker, start_at + 660)
    again = reading(True)
    unanswered_since([again], tracker, start_at + 900)
    assert not again.no_data  # unanswered for 4 min since the answer: not yet a gap
