"""Image-owned stacks (driver.owner: image): pause/resume refuse, watch follows pools by generation.

The fake is seeded from Pulumi.eks-prod.yaml as `pulumi up` leaves it: gpu-a10g on g4 alone (g3 retired,
580), gpu-l40s on g1 (570) and g2 (580) side by side, gpu-h100 held on g1 (570).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks import kube as k
from checks.pause import ImageOwnedDriver, pause, resume
from checks.watch import watch
from rollout.cli import app
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from tests.conftest import aks_image_owned, edited
from tests.fakekube.fixtures import (
    add_generation_nodes,
    generation_nodes,
    pods_of,
    remove_generation_nodes,
    seed,
    set_node_ready,
    set_pod_ready,
)
from tests.fakekube.server import FakeKube

HOUR = 3600.0
runner = CliRunner()



def retire(pool: str, generation: int) -> FleetSpec:
    """eks-prod with ``generation`` of ``pool`` marked retired: true."""
    def edit(pools: list[dict]) -> None:
        for gen in next(p for p in pools if p["name"] == pool)["generations"]:
            if gen["id"] == generation:
                gen["retired"] = True
    return spec_from_config(edited("eks-prod", "nodePools", edit))


def pools(outcome, spec: FleetSpec) -> dict[str, dict]:
    return {p["pool"]: p for p in outcome.snapshot.pools(spec)}


def invoke(*args: str):
    return runner.invoke(app, list(args))


# ---------------------------------------------------------------- pause / resume refuse


@pytest.mark.parametrize("verb", [pause, resume])
def test_pause_and_resume_refuse_before_any_call(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec, verb) -> None:
    with pytest.raises(ImageOwnedDriver, match="the node image owns the driver on this stack") as raised:
        verb(kube, eks_spec, "eks-prod")
    assert "hold the rollout by not adding a new generation" in str(raised.value)
    assert "keeping the old generation live (retired: false)" in str(raised.value)
    assert sum(eks.counts.values()) == 0  # not even a LIST


# ---------------------------------------------------------------- watch by generation


def test_both_generations_live_is_in_progress(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    outcome = watch(kube, eks_spec, "eks-prod", once=True)
    assert not outcome.triggered and outcome.paused is None and not outcome.snapshot.complete(eks_spec)
    rows = pools(outcome, eks_spec)
    l40s = rows["gpu-l40s"]
    assert [(g["generation"], g["spec"], g["nodes"], g["ready"], g["schedulable"], g["drivers"])
            for g in l40s["generations"]] == [
        ("1", "live", 4, 4, 4, {"570.195.03": 4}),
        ("2", "live", 4, 4, 4, {"580.173.02": 4}),
    ]
    assert not l40s["done"] and len(l40s["waiting"]) == 1
    assert l40s["waiting"][0].startswith("g1 (570.195.03) is still live in the spec with 4 node(s)")
    assert rows["gpu-a10g"]["done"] and [g["generation"] for g in rows["gpu-a10g"]["generations"]] == ["4"]
    assert rows["gpu-h100"]["held"] and rows["gpu-h100"]["target"] == "570.195.03"
    # One LIST of every node (two pages of 7; it serves the identity check too), the identity records, the
    # Deployments and each declared model's pods: nothing per node.
    assert eks.writes == 0
    assert {key: n for key, n in eks.counts_by_resource.items()} == {
        ("list", "nodes"): 2, ("list", "configmaps"): 1, ("list", "deployments"): 1,
        ("list", "pods"): len(eks_spec.models)}


@pytest.mark.parametrize("how", ["old nodes gone", "old generation retired in the spec"])
def test_done_when_old_generations_are_gone_or_retired(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec,
                                                       how: str) -> None:
    spec = eks_spec
    if how == "old nodes gone":
        remove_generation_nodes(eks, "gpu-l40s", 1)
    else:
        spec = retire("gpu-l40s", 1)  # `pulumi up` has not removed the node group yet: its nodes still show
    outcome = watch(kube, spec, "eks-prod", once=True)
    assert not outcome.triggered and outcome.snapshot.complete(spec)
    l40s = pools(outcome, spec)["gpu-l40s"]
    assert l40s["done"] and l40s["waiting"] == []
    if how != "old nodes gone":
        assert [(g["generation"], g["spec"], g["nodes"]) for g in l40s["generations"]] == [
            ("1", "retired", 4), ("2", "live", 4)]
    assert eks.writes == 0


def test_new_generation_coming_up(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    # g2 was just added: its node group has two of its four nodes, one of them not Ready yet.
    remove_generation_nodes(eks, "gpu-l40s", 2)
    joined = add_generation_nodes(eks, eks_spec, eks_spec.pool("gpu-l40s"), eks_spec.pool("gpu-l40s").generations[1],
                                  count=2)
    set_node_ready(eks, joined[1], False)
    spec = retire("gpu-l40s", 1)  # even with g1 retired already, too few new nodes are not done
    outcome = watch(kube, spec, "eks-prod", once=True, stuck_after=HOUR)
    l40s = pools(outcome, spec)["gpu-l40s"]
    assert not outcome.triggered and not l40s["done"]
    assert "g2: 1 node(s) on 580.173.02 not Ready" in l40s["waiting"]
    assert "1/4 node(s) Ready on 580.173.02" in l40s["waiting"]
    [gen2] = [g for g in l40s["generations"] if g["generation"] == "2"]
    assert (gen2["nodes"], gen2["ready"]) == (2, 1)


def test_a_new_node_on_the_wrong_driver_is_not_done(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    remove_generation_nodes(eks, "gpu-l40s", 1)
    node = generation_nodes(eks, "gpu-l40s", 2)[0]
    eks.update("nodes", node, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "575.57.08"}}})
    outcome = watch(kube, eks_spec, "eks-prod", once=True)
    assert "g2: 1 node(s) report driver 575.57.08, not 580.173.02" in pools(outcome, eks_spec)["gpu-l40s"]["waiting"]
    assert not outcome.snapshot.complete(eks_spec)


def test_model_below_min_available_reports_and_never_pauses(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec,
                                                            kubeconfig: Path) -> None:
    pods = pods_of(eks, "inference", {"app": "summarize-vllm"})
    for name in pods[:2]:
        set_pod_ready(eks, "inference", name, False)  # 2 of 4 available, minAvailable 3
    outcome = watch(kube, eks_spec, "eks-prod", once=True)  # auto_pause defaults to True
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("below-min-available",
                                                                         "inference/summarize-vllm")]
    assert outcome.paused is None and outcome.pause_error is None
    result = invoke("watch", "--stack", "eks-prod", "--kubeconfig", str(kubeconfig), "--once")
    assert result.exit_code == 1
    assert "below its minAvailable 3" in result.output and "nothing paused: the node image owns the driver" in result.output
    assert eks.writes == 0


def test_a_node_not_ready_too_long_stops_the_loop(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    node = generation_nodes(eks, "gpu-l40s", 2)[0]
    now = time.time()
    set_node_ready(eks, node, False, at=now - 2 * HOUR)
    outcome = watch(kube, eks_spec, "eks-prod", once=True, stuck_after=HOUR, clock=lambda: now)
    [trigger] = outcome.snapshot.triggers
    assert (trigger.kind, trigger.subject) == ("not-ready", node) and "for 120 min" in trigger.message
    assert "gpu-l40s, g2" in trigger.message
    assert outcome.paused is None and eks.writes == 0


def test_not_ready_without_a_transition_time_is_timed_by_the_watch(eks: FakeKube, kube: k.Kube,
                                                                  eks_spec: FleetSpec) -> None:
    node = generation_nodes(eks, "gpu-l40s", 2)[1]
    eks.update("nodes", node, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    clock = {"now": time.time(), "sleeps": 0}

    def sleep(seconds: float) -> None:
        clock["sleeps"] += 1
        clock["now"] += seconds

    outcome = watch(kube, eks_spec, "eks-prod", interval=600, stuck_after=HOUR, clock=lambda: clock["now"],
                    sleep=sleep)
    assert [t.kind for t in outcome.snapshot.triggers] == ["not-ready"] and clock["sleeps"] == 7  # > 3600 s: the eighth look
    assert eks.writes == 0


def test_loop_ends_when_the_old_generation_is_gone(eks: FakeKube, kube: k.Kube, eks_spec: FleetSpec) -> None:
    old = generation_nodes(eks, "gpu-l40s", 1)
    clock = {"now": time.time(), "sleeps": 0}

    def sleep(seconds: float) -> None:  # the cloud drains and deletes one old node per poll
        clock["sleeps"] += 1
        clock["now"] += seconds
        eks.remove("nodes", old[clock["sleeps"] - 1])

    outcome = watch(kube, eks_spec, "eks-prod", interval=30, clock=lambda: clock["now"], sleep=sleep)
    assert not outcome.triggered and outcome.snapshot.complete(eks_spec) and clock["sleeps"] == 4
    assert eks.writes == 0


def test_aks_generations_are_followed_too(fake: FakeKube, kube: k.Kube) -> None:
    spec = spec_from_config(aks_image_owned())
    seed(fake, spec)
    outcome = watch(kube, spec, "prod", once=True)
    for pool in outcome.snapshot.pools(spec):
        gens = [g["generation"] for g in pool["generations"]]
        assert gens == [str(g.id) for g in spec.pool(pool["pool"]).live_generations] and "" not in gens
    assert fake.writes == 0


def test_watch_judges_an_image_owned_pool_by_its_newest_generation(eks: FakeKube, kube: k.Kube) -> None:
    """What a pool moves to has one answer (FleetSpec.pool_target). Without driver.previousVersion a held
    image-owned pool's pin is driver.version, a driver none of its generations ships; its nodes run its newest
    generation's driver (g1, 570), which watch must judge them by, as the gate and the validation job do."""
    def forget_previous(driver: dict) -> None:
        driver.pop("previousVersion", None)
    spec = spec_from_config(edited("eks-prod", "driver", forget_previous))
    h100 = spec.pool("gpu-h100")
    assert spec.pool_held(h100) and spec.pool_target(h100).driver == "570.195.03" != spec.driver.version
    row = pools(watch(kube, spec, "eks-prod", once=True), spec)["gpu-h100"]
    assert row["target"] == "570.195.03"
    assert row["done"] is True
