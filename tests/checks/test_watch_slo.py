"""`gpu-rollout watch` reads each model's SLO (``models[].slo``) on the pools being upgraded from a real Prometheus
(tests/prometheus, backfilled with the canary's vLLM history from tests/checks/verify_world.py): a breach that
lasts as long as the stack declares pauses the rollout naming the model, the pool and the figure; a shorter one,
or a model within its objectives, does not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from checks import kube as kube_module
from checks.prometheus import Prometheus
from checks.watch import WatchOutcome, watch
from rollout.cli import app
from tests.checks.verify_world import ProxyKube, Soak, World, build, history
from tests.conftest import PROJECT_DIR
from tests.fakekube.plugin import FAST
from tests.prometheus.server import MISSING, binary, start
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
