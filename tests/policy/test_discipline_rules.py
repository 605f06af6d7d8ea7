"""policy.discipline_rules on rendered stacks, judged at fixed moments: waves in order against the last
deployment's outputs and its recorded release times, old generations kept, the validation job in prod, the
soak floor and the maintenance window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policy import discipline_rules
from policy.facts import StackFacts
from policy.findings import Finding
from preview.run import run_program
from renderers import manifests
from engine_contracts import resource_facts as rf
from fleetspec.load import SpecError, spec_from_config
from tests.conftest import change, stack_config
from tests.policy.rules import resources

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Amsterdam: inside the prod window


def _released(*pools: str) -> Callable[[list[dict]], None]:
    def edit(config_pools: list[dict]) -> None:
        for pool in config_pools:
            pool["rollout"]["released"] = pool["name"] in pools
    return edit


def _prod(*released: str, **rollout: Any) -> dict[str, str]:
    config = change(stack_config("prod"), "nodePools", _released(*released))
    return change(config, "rollout", lambda r: r.update(rollout))


def _deployed(config: dict[str, str], at: datetime | None) -> dict[str, Any]:
    """The outputs a deployment of ``config`` made at ``at`` (None: one that recorded no time)."""
    spec = spec_from_config(config)
    return manifests.stack_outputs(spec, manifests.timeline(spec, rf.StackOutputs(), at)).as_outputs()


def _findings(rule: Callable[[StackFacts], Any], config: dict[str, str], stack: str = "prod",
              previous: dict[str, Any] | None = None, now: datetime = T0) -> list[Finding]:
    run = run_program(config, stack, previous_outputs=previous)
    return list(rule(StackFacts(resources(run), now)))


def _only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


# ---------------------------------------------------------------- waves-in-order


def test_two_waves_released_at_once_are_refused_against_the_last_deployment() -> None:
    last = _deployed(_prod(), T0 - timedelta(days=2))  # every pool held
    found = _only(_findings(discipline_rules.waves_in_order, _prod("gput4", "gpua100"), previous=last))
    assert not found.advisory
    assert found.message == ("this deployment releases 2 waves at once (1, 2); release one wave per deployment: the "
                             "last deployment released wave(s) none")


def test_with_no_last_deployment_two_new_waves_are_advice() -> None:
    found = _only(_findings(discipline_rules.waves_in_order, _prod("gput4", "gpua100")))
    assert found.advisory and "no last deployment to compare with" in found.message


def test_an_early_release_reason_turns_two_waves_into_advice() -> None:
    last = _deployed(_prod(), T0 - timedelta(days=2))
    config = _prod("gput4", "gpua100", earlyReleaseReason="CVE-2026-1234: every pool this week")
    found = _only(_findings(discipline_rules.waves_in_order, config, previous=last))
    assert found.advisory and found.message.endswith("(accepted: CVE-2026-1234: every pool this week)")


def test_the_next_wave_waits_the_dwell_after_the_one_before() -> None:
    last = _deployed(_prod("gput4"), T0)  # wave 1 released at T0, recorded by that deployment
    early = _only(_findings(discipline_rules.waves_in_order, _prod("gput4", "gpua100"), previous=last,
                            now=T0 + timedelta(hours=5)))
    assert not early.advisory
    assert early.message == ("wave 2 is released 5.0 h after wave 1 (released 2026-12-08T09:00:00Z); "
                             "rollout.waveDwellHours asks 24 h: release it from 2026-12-09T09:00:00Z")
    assert _findings(discipline_rules.waves_in_order, _prod("gput4", "gpua100"), previous=last,
                     now=T0 + timedelta(hours=24)) == []
    shorter = _prod("gput4", "gpua100", waveDwellHours=4, earlyReleaseReason="the lab runs one shift")
    assert _findings(discipline_rules.waves_in_order, shorter, previous=last, now=T0 + timedelta(hours=5)) == []


def test_a_wave_released_before_the_record_was_kept_is_advice() -> None:
    last = _deployed(_prod("gput4"), None)  # the last deployment ran wave 1 but recorded no time for it
    found = _only(_findings(discipline_rules.waves_in_order, _prod("gput4", "gpua100"), previous=last))
    assert found.advisory and "records no time for wave 1" in found.message


def test_a_serving_pool_goes_after_every_batch_pool_unless_the_stack_says_why() -> None:
    def swap(pools: list[dict]) -> None:
        pools[0]["rollout"]["wave"], pools[1]["rollout"]["wave"] = 2, 1  # A100 serving before the T4 batch pool
        pools[0]["rollout"]["released"], pools[1]["rollout"]["released"] = False, False

    config = change(stack_config("prod"), "nodePools", swap)
    found = _only(_findings(discipline_rules.waves_in_order, config))
    assert not found.advisory and found.message.startswith(
        "serving pool gpua100 is in wave 1, not after batch pool(s) gput4 (wave 2)")
    told = change(config, "rollout", lambda r: r.update(servingBeforeBatchReason="the T4 pool runs the nightly ETL"))
    assert _only(_findings(discipline_rules.waves_in_order, told)).advisory


def test_the_shipped_prod_stack_and_its_redeployment_pass() -> None:
    assert _findings(discipline_rules.waves_in_order, stack_config("prod")) == []
    last = _deployed(stack_config("prod"), T0)
    assert _findings(discipline_rules.waves_in_order, stack_config("prod"), previous=last) == []


# ---------------------------------------------------------------- old-generation-kept


def _l40s(*generations: tuple[int, bool]) -> dict[str, str]:
    def edit(pools: list[dict]) -> None:
        pool = next(p for p in pools if p["name"] == "gpu-l40s")
        by_id = {g["id"]: g for g in pool["generations"]}
        pool["generations"] = [{**by_id[i], "retired": retired} for i, retired in generations]
    return change(stack_config("eks-prod"), "nodePools", edit)


def test_the_old_generation_stays_until_the_newest_ran_a_business_day() -> None:
    last = _deployed(_l40s((1, False), (2, False)), T0)  # gen 2 first deployed at T0
    retired = _l40s((1, True), (2, False))
    early = _only(_findings(discipline_rules.old_generation_kept, retired, "eks-prod", last, T0 + timedelta(hours=3)))
    assert not early.advisory and early.message.startswith("pool gpu-l40s: g1 retired after g2 ran 3.0 h")
    assert _findings(discipline_rules.old_generation_kept, retired, "eks-prod", last, T0 + timedelta(hours=24)) == []
    told = change(retired, "rollout", lambda r: r.update(earlyRetireReason="the old AMI has a kernel CVE"))
    assert _only(_findings(discipline_rules.old_generation_kept, told, "eks-prod", last, T0)).advisory


def test_retiring_in_the_change_that_brings_the_new_generation_is_refused() -> None:
    last = _deployed(_l40s((1, False)), T0)
    found = _only(_findings(discipline_rules.old_generation_kept, _l40s((1, True), (2, False)), "eks-prod", last))
    assert not found.advisory and "g1 retired in the deployment that first deploys g2" in found.message


def test_no_record_of_the_newest_generation_is_advice_and_no_last_deployment_retires_nothing() -> None:
    last = _deployed(_l40s((1, False), (2, False)), None)
    found = _only(_findings(discipline_rules.old_generation_kept, _l40s((1, True), (2, False)), "eks-prod", last))
    assert found.advisory and "records no time for g2" in found.message
    assert _findings(discipline_rules.old_generation_kept, _l40s((1, True), (2, False)), "eks-prod") == []


# ---------------------------------------------------------------- validation-job-required, soak-floor, window


def test_the_validation_job_is_required_where_the_operator_rolls_the_driver() -> None:
    for stack, advisory in (("prod", False), ("existing-prod", False), ("eks-prod", True)):
        config = stack_config(stack)
        assert _findings(discipline_rules.validation_job_required, config, stack) == []
        del config["gpu-driver-upgrade:validation"]
        found = _only(_findings(discipline_rules.validation_job_required, config, stack))
        assert found.advisory is advisory and "prod declares no validation job" in found.message, stack


def test_the_soak_floor_asks_a_week_a_reason_for_less_and_never_less_than_a_day() -> None:
    def soak(hours: float, reason: str | None = None) -> list[Finding]:
        config = change(stack_config("prod"), "promotion", lambda p: p.update(
            minSoakHours=hours, **({"minSoakReason": reason} if reason else {})))
        return _findings(discipline_rules.soak_floor, config)

    assert soak(168) == []
    # Less than the runbook's week without a reason: refused, naming the key that says why.
    week = _only(soak(48))
    assert not week.advisory and "a week ahead of production" in week.message
    assert "needs promotion.minSoakReason" in week.message
    # With a reason: advice quoting it, which plan and the PR diff show.
    reasoned = _only(soak(48, "CVE-2026-1234: the fixed driver within three days"))
    assert reasoned.advisory and reasoned.message.endswith("because: CVE-2026-1234: the fixed driver within three days")
    # Under a day: refused whatever the reason.
    assert not _only(soak(0)).advisory and "at least 24 h" in _only(soak(23.5, "in a hurry")).message


def test_the_soak_floor_defaults_to_the_runbook_s_week() -> None:
    config = change(stack_config("prod"), "promotion", lambda p: p.pop("minSoakHours"))
    assert spec_from_config(config).promotion.minSoakHours == 168
    assert _findings(discipline_rules.soak_floor, config) == []


def test_an_empty_soak_reason_is_refused_naming_its_key() -> None:
    config = change(stack_config("prod"), "promotion", lambda p: p.update(minSoakHours=48, minSoakReason=""))
    with pytest.raises(SpecError, match=r"promotion\.minSoakReason"):
        spec_from_config(config)


def test_a_change_outside_the_window_is_advice_naming_when_it_opens() -> None:
    config = stack_config("prod")
    assert _findings(discipline_rules.maintenance_window, config) == []  # T0 is inside
    friday = datetime(2026, 12, 11, 18, 0, tzinfo=UTC)
    found = _only(_findings(discipline_rules.maintenance_window, config, now=friday))
    assert found.advisory and "the next one opens Tue 2026-12-15 09:00 CET" in found.message
    canary = _findings(discipline_rules.maintenance_window, stack_config("canary"), "canary", now=friday)
    assert canary == []  # a canary stack without a window: nothing to honour, nothing required


def test_plan_judges_at_the_moment_it_is_given() -> None:
    import json

    from typer.testing import CliRunner

    from rollout.cli import app

    def window_findings(at: str) -> list[dict]:
        result = CliRunner().invoke(app, ["plan", "--stack", "prod", "--json", "--at", at])
        assert result.exit_code == 0, result.output
        return [v for v in json.loads(result.stdout)["violations"] if v["policy"] == "maintenance-window"]

    assert window_findings("2026-12-09T10:00:00+01:00") == []  # Wednesday 10:00 in Amsterdam
    (friday,) = window_findings("2026-12-11T19:00:00+01:00")
    assert friday["enforcement"] == "advisory" and "the next one opens Tue 2026-12-15 09:00 CET" in friday["message"]
