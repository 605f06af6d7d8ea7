"""A stack's own waves in the train (promotion_train/waves.py): the train brings a deployed prod stack up to release its
next wave only once the wave before is complete, not held, verified, and has dwelt rollout.waveDwellHours since that
verify; not while someone paused it by hand; and retires an old generation only after a passing verify of the new one.

On values, as tests/rollout/test_fleet_train.py: the shipped Fleet.yaml and example stacks, the prod stack's change
releasing wave 2 (gpua100) after wave 1 (gput4), its cluster's pool rows as `watch` reports them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from checks.fleet import ClusterView
from checks.lease import PoolVerified
from promotion_train import deploy_plan
from promotion_train.train import assess
from promotion_train.waves import pool_target_mark, released_waves, spec_through
from fleetspec.model import FleetSpec
from tests.rollout.test_fleet_train import ALL_VERIFIED, FLEET, NOW, SPECS, Probe, fleet_world, world

HOUR = 3600.0


def releasing(spec: FleetSpec, pool_name: str) -> FleetSpec:
    """The stack file's next change: ``pool_name`` released."""
    pools = [p.model_copy(update={"rollout": p.rollout.model_copy(update={"released": True})})
             if p.name == pool_name else p for p in spec.nodePools]
    return spec.model_copy(update={"nodePools": pools})


PROD = releasing(SPECS["prod"], "gpua100")  # wave 2 released; wave 1 (gput4) released before


def row(pool: str, done: int, total: int = 4, skipped: int = 0, paused: int = 0) -> dict[str, Any]:
    return {"pool": pool, "target": "580.173.02", "held": False, "done": done, "total": total, "skipped": skipped,
            "paused": paused, "states": {}}


def rows(gput4: dict[str, Any] | None = None, **others: dict[str, Any]) -> list[dict[str, Any]]:
    """The prod cluster as the change finds it: wave 1 done, wave 2 not started, wave 3 held."""
    return [gput4 or row("gput4", 4), others.get("gpua100", row("gpua100", 0, 2)),
            {**row("gpuh100", 0, 3), "held": True}]


class Recording(Probe):
    def __init__(self, failures: dict[str, list[str] | None] | None = None) -> None:
        super().__init__()
        self.asked: list[tuple[str, int | None]] = []
        self.answers = failures or {}

    def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
        self.asked.append((stack, through_wave))
        return self.answers.get(stack, [])


def prod_change(pools: list[dict[str, Any]], spec: FleetSpec = PROD, name: str = "prod") -> dict[str, Any]:
    view = ClusterView(name, spec.cluster.name, spec.driver.owner.value, False, [], 9, 4, 0, 0, pools)
    return fleet_world(**{name.replace("-", "_"): replace(world(name, deploy_plan.DIFFERS), spec=spec, update=3,
                                                          view=view)})


def verified_at(at: float, spec: FleetSpec = PROD, wave: int = 1) -> dict[str, dict[str, PoolVerified]]:
    return {"prod": {p.name: PoolVerified(pool_target_mark(spec, p), at) for p in released_waves(spec)[wave]}}


def test_the_next_wave_goes_once_the_one_before_verified_complete_and_dwelt_since() -> None:
    found = assess(FLEET, prod_change(rows()), Recording(), NOW, verified=ALL_VERIFIED,
                   pools_verified=verified_at(NOW - 25 * HOUR))
    assert "prod" in found.ups and not any(b.startswith("prod:") for b in found.blocked)


def test_the_dwell_counts_from_the_verify_that_saw_the_wave_complete() -> None:
    found = assess(FLEET, prod_change(rows()), Recording(), NOW, verified=ALL_VERIFIED,
                   pools_verified=verified_at(NOW - 10 * HOUR))
    assert "prod" not in found.ups
    [refusal] = [b for b in found.blocked if b.startswith("prod:")]
    assert refusal.startswith("prod: wave 2 waits for wave 1, verified complete ")
    assert "10.0 h of rollout.waveDwellHours 24 h so far" in refusal


def test_a_wave_still_rolling_keeps_the_next_one_back() -> None:
    probe = Recording()
    found = assess(FLEET, prod_change(rows(row("gput4", 2))), probe, NOW, verified=ALL_VERIFIED,
                   pools_verified=verified_at(NOW - 48 * HOUR))
    assert "prod" not in found.ups and ("prod", 1) not in probe.asked
    assert "prod: wave 2 waits for wave 1, which is not complete (gput4: 2 of 4 node(s) done on 580.173.02)" \
        in found.blocked


def test_a_wave_with_a_node_held_keeps_the_next_one_back() -> None:
    found = assess(FLEET, prod_change(rows(row("gput4", 3, skipped=1))), Recording(), NOW, verified=ALL_VERIFIED,
                   pools_verified=verified_at(NOW - 48 * HOUR))
    assert "prod" not in found.ups
    assert any(b.startswith("prod: wave 2 waits for wave 1, which has nodes held by the skip label: gput4 (1 node(s))")
               for b in found.blocked)


def test_a_stack_paused_by_hand_is_not_brought_up() -> None:
    probe = Recording()
    found = assess(FLEET, prod_change(rows(gpua100={**row("gpua100", 0, 2), "skipped": 2, "paused": 2})), probe, NOW,
                   verified=ALL_VERIFIED, pools_verified=verified_at(NOW - 48 * HOUR))
    assert "prod" not in found.ups and ("prod", 1) not in probe.asked
    assert ("prod is paused by hand (`gpu-rollout pause`) on pool(s) gpua100: `gpu-rollout resume --stack prod` "
            "first; the train brings up no paused stack") in found.blocked


def test_a_complete_wave_with_no_verify_on_record_is_verified_and_its_dwell_starts_then() -> None:
    probe = Recording()
    found = assess(FLEET, prod_change(rows()), probe, NOW, verified=ALL_VERIFIED, pools_verified={})
    assert ("prod", 1) in probe.asked  # as of wave 1: wave 2's nodes are not upgraded yet
    assert "prod" not in found.ups
    assert found.pools_verified_now["prod"] == {"gput4": PoolVerified("580.173.02", NOW)}
    assert any("0.0 h of rollout.waveDwellHours 24 h so far" in b for b in found.blocked)


def test_no_passing_verify_keeps_the_next_wave_back() -> None:
    unreadable = assess(FLEET, prod_change(rows()), Recording({"prod": None}), NOW, verified=ALL_VERIFIED)
    assert "prod" not in unreadable.ups and "prod" not in unreadable.pools_verified_now
    assert "prod: wave 2 waits for wave 1, complete but with no passing verify of it on record (verify --smoke " \
        "records one)" in unreadable.blocked
    failed = assess(FLEET, prod_change(rows()), Recording({"prod": ["driver-loaded gput4-0: no driver"]}), NOW,
                    verified=ALL_VERIFIED)
    assert failed.halt is not None and failed.halt.kind == "verify-failed" and failed.ups == []


def test_a_record_of_another_target_is_no_verify_of_this_one() -> None:
    older = {"prod": {"gput4": PoolVerified("570.195.03", NOW - 100 * HOUR)}}
    probe = Recording({"prod": None})
    found = assess(FLEET, prod_change(rows()), probe, NOW, verified=ALL_VERIFIED, pools_verified=older)
    assert "prod" not in found.ups and ("prod", 1) in probe.asked


def test_a_change_that_releases_no_new_wave_is_not_held_by_the_dwell() -> None:
    done = rows(gpua100=row("gpua100", 2, 2))
    found = assess(FLEET, prod_change(done), Recording(), NOW, verified=ALL_VERIFIED, pools_verified={})
    assert "prod" in found.ups


def test_the_stack_as_of_a_wave_holds_the_later_ones() -> None:
    through = spec_through(PROD, 1)
    assert [p.name for p in through.nodePools if not through.pool_held(p)] == ["gput4"]
    assert [p.name for p in PROD.nodePools if not PROD.pool_held(p)] == ["gput4", "gpua100"]


EKS = SPECS["eks-prod"]  # gpu-a10g: g3 retired, g4 live; gpu-l40s (wave 2): g1 and g2 live


def eks_rows(a10g_done: bool = True) -> list[dict[str, Any]]:
    a10g = {"pool": "gpu-a10g", "target": "580.173.02", "held": False, "nodeCount": 2, "done": a10g_done,
            "waiting": [] if a10g_done else ["1/2 node(s) Ready on 580.173.02"],
            "generations": [{"generation": "3", "spec": "retired", "nodes": 2},
                            {"generation": "4", "spec": "live", "nodes": 2}]}
    l40s = {"pool": "gpu-l40s", "target": "580.173.02", "held": False, "nodeCount": 4, "done": True, "waiting": [],
            "generations": [{"generation": "2", "spec": "live", "nodes": 4}]}
    h100 = {"pool": "gpu-h100", "target": "570.195.03", "held": True, "nodeCount": 3, "done": False,
            "waiting": [], "generations": [{"generation": "1", "spec": "live", "nodes": 3}]}
    return [a10g, l40s, h100]


@pytest.mark.parametrize("answer", [None, []])
def test_an_old_generation_is_retired_only_after_a_passing_verify_of_the_new_one(answer: list[str] | None) -> None:
    probe = Recording({"eks-prod": answer})
    found = assess(FLEET, prod_change(eks_rows(), EKS, "eks-prod"), probe, NOW, verified=ALL_VERIFIED)
    assert ("eks-prod", 1) in probe.asked
    if answer is None:  # the cluster could not be asked: no verify, the old generation stays
        assert "eks-prod" not in found.ups
        assert any(b.startswith("eks-prod: pool gpu-a10g retires g3 before a passing verify of its newest "
                                "generation (580.173.02 g4)") for b in found.blocked)
    else:
        assert found.pools_verified_now["eks-prod"]["gpu-a10g"] == PoolVerified("580.173.02 g4", NOW)
        assert "eks-prod" in found.ups


def test_an_old_generation_stays_while_the_new_one_is_not_done() -> None:
    probe = Recording()
    found = assess(FLEET, prod_change(eks_rows(a10g_done=False), EKS, "eks-prod"), probe, NOW, verified=ALL_VERIFIED)
    assert "eks-prod" not in found.ups and ("eks-prod", 1) not in probe.asked
    assert any(b.startswith("eks-prod: pool gpu-a10g retires g3 before a passing verify") and
               "1/2 node(s) Ready on 580.173.02" in b for b in found.blocked)
