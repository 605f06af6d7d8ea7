"""The rollout block (fleetspec/discipline.py): each bad value refused at its key, the weekly window judged on fixed
moments (overnight, daylight saving, the next opening), and what a deployment records (renderers.manifests.timeline)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from renderers import manifests
from engine_contracts import resource_facts as rf
from fleetspec.discipline import MaintenanceWindow
from fleetspec.load import SpecError, spec_from_config
from tests.conftest import change, edited, stack_config

KEY = "gpu-driver-upgrade:rollout"


def _problems(edit: Callable[[dict], object]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        spec_from_config(edited("prod", "rollout", edit))
    return {p.path: p.message for p in caught.value.problems}


def _window(**changes: object) -> Callable[[dict], object]:
    return lambda r: r["maintenanceWindow"]["weekly"][0].update(changes)


@pytest.mark.parametrize(("edit", "key", "reason"), [
    (lambda r: r["maintenanceWindow"].update(timeZone="Europe/Atlantis"), "maintenanceWindow.timeZone",
     "not an IANA time zone"),
    (lambda r: r["maintenanceWindow"].update(timeZone="x" * 300), "maintenanceWindow.timeZone",  # past a file name
     "not an IANA time zone"),
    (_window(start=900), "maintenanceWindow.weekly[0].start", "quoted string such as \"09:00\""),
    (_window(start="9:00"), "maintenanceWindow.weekly[0].start", "not a time of day HH:MM"),
    (_window(start="24:00"), "maintenanceWindow.weekly[0].start", "00:00 to 23:59)"),
    (_window(end="09:00"), "maintenanceWindow.weekly[0].end", "equals start (09:00): an empty window"),
    (_window(days=["tue", "tue"]), "maintenanceWindow.weekly[0].days", "names a day twice"),
    (_window(days=["tuesday"]), "maintenanceWindow.weekly[0].days[0]", "Input should be 'mon'"),
    (_window(days=[]), "maintenanceWindow.weekly[0].days", "at least 1 item"),
    (lambda r: r["maintenanceWindow"].update(weekly=[]), "maintenanceWindow.weekly", "at least 1 item"),
    (lambda r: r.update(waveDwellHours=-1), "waveDwellHours", "greater than or equal to 0"),
    (lambda r: r.update(earlyReleaseReason=""), "earlyReleaseReason", "at least 1 character"),
    (lambda r: r.update(waveDwelHours=24), "waveDwelHours", "unknown key"),
    # The runbook's floors (issue 36): lowered only with the reason the stack states.
    (lambda r: r.update(waveDwellHours=0), "waveDwellHours", "under the runbook's business day (24 h) between waves: "
     "state why in rollout.earlyReleaseReason"),
    (lambda r: r.update(keepGenerationHours=0), "keepGenerationHours", "state why in rollout.earlyRetireReason"),
])
def test_a_bad_value_is_refused_at_its_key(edit: Callable[[dict], object], key: str, reason: str) -> None:
    problems = _problems(edit)
    assert f"{KEY}.{key}" in problems, problems
    assert reason in problems[f"{KEY}.{key}"], problems


def test_a_floor_is_lowered_with_its_reason() -> None:
    config = change(stack_config("prod"), "rollout", lambda r: r.update(
        waveDwellHours=4, earlyReleaseReason="CVE-2026-1234", keepGenerationHours=2, earlyRetireReason="kernel CVE"))
    spec = spec_from_config(config)
    assert (spec.rollout.waveDwellHours, spec.rollout.keepGenerationHours) == (4, 2)


def test_the_block_is_optional_with_a_business_day_of_dwell_and_keep() -> None:
    config = stack_config("prod")
    del config[KEY]
    spec = spec_from_config(config)
    assert (spec.rollout.waveDwellHours, spec.rollout.keepGenerationHours) == (24, 24)
    assert spec.rollout.maintenanceWindow is None and spec.rollout.earlyReleaseReason is None


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


AMSTERDAM = MaintenanceWindow.model_validate(
    {"timeZone": "Europe/Amsterdam", "weekly": [{"days": ["tue", "wed", "thu"], "start": "09:00", "end": "14:00"}]})
OVERNIGHT = MaintenanceWindow.model_validate(
    {"timeZone": "America/New_York", "weekly": [{"days": ["fri"], "start": "22:00", "end": "05:00"}]})


@pytest.mark.parametrize(("window", "moment", "open_"), [
    (AMSTERDAM, "2026-12-08T08:00:00+00:00", True),   # Tuesday 09:00 CET: opens
    (AMSTERDAM, "2026-12-08T12:59:59+00:00", True),
    (AMSTERDAM, "2026-12-08T13:00:00+00:00", False),  # 14:00 CET: closed
    (AMSTERDAM, "2026-12-07T10:00:00+00:00", False),  # a Monday
    (AMSTERDAM, "2026-07-07T07:00:00+00:00", True),   # 09:00 CEST: the local hours hold in summer
    (AMSTERDAM, "2026-07-07T12:30:00+00:00", False),  # 14:30 CEST
    (OVERNIGHT, "2026-12-12T03:00:00+00:00", True),   # Friday 22:00 EST
    (OVERNIGHT, "2026-12-12T09:59:00+00:00", True),   # Saturday 04:59 EST, still Friday's window
    (OVERNIGHT, "2026-12-12T10:00:00+00:00", False),
    (OVERNIGHT, "2026-12-11T03:00:00+00:00", False),  # Thursday 22:00
])
def test_a_window_is_judged_in_its_own_time_zone(window: MaintenanceWindow, moment: str, open_: bool) -> None:
    assert window.is_open(_at(moment)) is open_


def test_the_next_opening_is_named_in_local_time() -> None:
    friday = _at("2026-12-11T18:00:00+00:00")
    assert AMSTERDAM.next_opening(friday) == _at("2026-12-15T08:00:00+00:00")
    assert AMSTERDAM.verdict(friday) == ("outside its maintenance window (tue,wed,thu 09:00-14:00 (Europe/Amsterdam)); "
                                         "the next one opens Tue 2026-12-15 09:00 CET")
    inside = _at("2026-12-09T10:00:00+00:00")
    assert AMSTERDAM.next_opening(inside) == inside and AMSTERDAM.verdict(inside).startswith("inside")
    # Across the spring change: Tuesday 2026-03-31 09:00 is CEST (UTC+2).
    assert AMSTERDAM.next_opening(_at("2026-03-28T12:00:00+00:00")) == _at("2026-03-31T07:00:00+00:00")


# ---------------------------------------------------------------- what a deployment records


T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_a_first_update_records_its_moment_and_a_preview_records_nothing() -> None:
    spec = spec_from_config(stack_config("eks-prod"))
    first = manifests.timeline(spec, rf.StackOutputs(), T0)
    assert first.waves_released == {1: T0, 2: T0}  # the released prod waves; wave 3 is held
    assert first.generations_deployed == {"gpu-a10g": {4: T0}, "gpu-l40s": {1: T0, 2: T0}, "gpu-h100": {1: T0}}
    preview = manifests.timeline(spec, rf.StackOutputs(), None)
    assert (preview.waves_released, preview.generations_deployed) == ({}, {})  # no time: a preview deploys nothing
    assert preview.drivers_run == first.drivers_run  # not a time: what the pools take is stated either way


def test_later_deployments_carry_the_record_forward_unchanged() -> None:
    spec = spec_from_config(stack_config("eks-prod"))
    last = manifests.stack_outputs(spec, manifests.timeline(spec, rf.StackOutputs(), T0))
    later = T0 + timedelta(days=3)
    assert manifests.timeline(spec, last, later) == last.timeline  # a second update with no change: the same
    # Through the outputs' own encoding, as the next deployment reads them.
    assert rf.read_stack_outputs(last.as_outputs()).timeline == last.timeline
    # Wave 3 released and a new L40S generation: those get the new moment, the rest keep theirs.
    released = change(stack_config("eks-prod"), "nodePools", lambda pools: pools[2]["rollout"].update(released=True))
    released = change(released, "nodePools", lambda pools: pools[1]["generations"].append(
        {"id": 3, "driverVersion": "580.173.02", "releaseVersion": "1.33.5-20251120"}))
    moved = manifests.timeline(spec_from_config(released), last, later)
    assert moved.waves_released == {1: T0, 2: T0, 3: later}
    assert moved.generations_deployed["gpu-l40s"] == {1: T0, 2: T0, 3: later}


def test_what_the_last_deployment_ran_without_a_record_gets_none() -> None:
    spec = spec_from_config(stack_config("eks-prod"))
    unrecorded = manifests.stack_outputs(spec)  # an older release of the program, or a preview's outputs
    again = manifests.timeline(spec, unrecorded, T0)
    # Its waves and generations were running before T0: their time is not T0.
    assert (again.waves_released, again.generations_deployed) == ({}, {})


def test_a_recorded_time_that_is_no_time_reads_as_none() -> None:
    odd = rf.read_timeline({"wavesReleased": {"1": "yesterday", "x": "2026-12-01T08:00:00Z", "2": 3},
                            "generationsDeployed": {"p": {"1": "2026-12-01T08:00:00Z"}, "q": "junk"}})
    assert odd == rf.Timeline({}, {"p": {1: T0}})
    assert rf.read_timeline(None) == rf.Timeline()


def test_each_pool_remembers_the_drivers_deployments_applied_to_it() -> None:
    """What ran is recorded per pool and carried forward (the prod gate: a pool going back to a driver it ran is
    a rollback, a driver only other pools ran is still a promotion of this one)."""
    spec = spec_from_config(stack_config("eks-prod"))
    first = manifests.stack_outputs(spec, manifests.timeline(spec, rf.StackOutputs(), T0))
    # Only what the deployment released each pool to: gpu-l40s's older live generation and the held gpu-h100's
    # pin are config, not a run.
    assert first.timeline.drivers_run == {"gpu-a10g": ("580.173.02",), "gpu-l40s": ("580.173.02",),
                                          "gpu-h100": ()}
    assert manifests.timeline(spec, first, T0).drivers_run == first.timeline.drivers_run  # a redeployment: the same
    # Every driver at its latest place, the oldest forgotten past DRIVERS_REMEMBERED.
    last = rf.StackOutputs(pools={"gpu-a10g": rf.PoolSummary(driver_version="580.173.02", held=False)},
                           timeline=rf.Timeline(drivers_run={"gpu-a10g": (*(f"5{n:02d}.1.1" for n in range(10)),
                                                                          "580.173.02")}))
    remembered = manifests.timeline(spec, last, T0).drivers_run["gpu-a10g"]
    assert len(remembered) == rf.DRIVERS_REMEMBERED and remembered[-2:] == ("509.1.1", "580.173.02")
    # A held pool keeps what it ran and adds nothing: its pin is config.
    held = rf.StackOutputs(pools={"gpu-h100": rf.PoolSummary(driver_version="570.195.03", held=True)},
                           timeline=rf.Timeline(drivers_run={"gpu-h100": ("560.35.03",)}))
    assert manifests.timeline(spec, held, T0).drivers_run["gpu-h100"] == ("560.35.03",)
    assert rf.read_timeline(rf.Timeline(drivers_run={"p": ("a",)}).as_output()).drivers_run == {"p": ("a",)}


def test_a_pool_rolled_back_forgets_the_driver_it_left() -> None:
    """A -> B -> back to A: A still counts as run, B does not (taking it again is judged by its attestation)."""
    def deployed(version: str, last: rf.StackOutputs) -> rf.StackOutputs:
        spec = spec_from_config(change(stack_config("existing-prod"), "driver", lambda d: d.update(version=version)))
        return manifests.stack_outputs(spec, manifests.timeline(spec, last, T0))

    on_a = deployed("580.173.02", rf.StackOutputs())
    on_b = deployed("595.91.07", on_a)
    assert on_b.timeline.drivers_run["l40s-serving"] == ("580.173.02", "595.91.07")
    back = deployed("580.173.02", on_b)
    assert back.timeline.drivers_run["l40s-serving"] == ("580.173.02",)
    assert rf.read_previous_deployment(back.as_outputs()).pool_drivers["l40s-serving"] == {"580.173.02"}
    assert rf.read_previous_deployment(on_b.as_outputs()).pool_drivers["l40s-serving"] == {"580.173.02", "595.91.07"}
