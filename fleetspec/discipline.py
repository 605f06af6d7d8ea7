"""The rollout's discipline as the stack declares it (the top-level ``rollout`` block): how long a wave dwells
before the next one is released, how long an image-owned pool's newest generation runs before the previous one
may be retired, and when a rollout may run at all (weekly maintenance windows in an IANA time zone).

The runbook: "Remove the skip label pool by pool, starting with the least critical" (waves, checked by policy
``waves-in-order``); "keep the old node pool or node group until the new one has run cleanly for a full business
day" (``old-generation-kept``); "Upgrade window avoids peak traffic and any planned batch jobs" (the maintenance
window: policy ``maintenance-window`` advises, `gpu-rollout deploy-plan` leaves a stack outside its window alone,
`gpu-rollout watch` pauses it). Each reason key turns its rule's violation into advice and says why.

The window arithmetic is here, once: whether a moment is inside a window and when the next one opens. Times
of day are wall-clock times in the window's time zone, so a window keeps its local hours across daylight saving.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from fleetspec.base import SpecModel, at

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # datetime.weekday() order
_TIME_OF_DAY = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
END_OF_DAY = "24:00"
Hours = Annotated[float, Field(ge=0)]
DEFAULT_WAVE_DWELL_HOURS = 24.0  # a business day between one wave's release and the next
DEFAULT_KEEP_GENERATION_HOURS = 24.0  # the runbook: "a full business day"


def _minutes(value: str) -> int:
    if value == END_OF_DAY:
        return 24 * 60
    match = _TIME_OF_DAY.fullmatch(value)
    assert match is not None  # validated on load
    return int(match.group(1)) * 60 + int(match.group(2))


class WeeklyWindow(SpecModel):
    """One weekly window: on each of ``days``, from ``start`` to ``end`` local time. An ``end`` at or before
    ``start`` ends the next day (an overnight window, ``22:00`` to ``05:00``); ``end`` may be ``24:00``."""

    days: list[Weekday] = Field(min_length=1, description="Days the window opens, each once.",
                                examples=[["tue", "wed", "thu"]])
    start: str = Field(description="Local time of day it opens, `HH:MM` (24-hour), quoted: YAML reads an unquoted "
                       "`15:00` as the number 900.", examples=["09:00"])
    end: str = Field(description="Local time of day it closes, `HH:MM` or `24:00`, quoted; at or before `start`: the "
                     "next day. Equal to `start` is refused (an empty window).", examples=["14:00"])

    @field_validator("days", mode="before")
    @classmethod
    def _days(cls, value: object) -> object:
        if isinstance(value, list):
            return [v.lower() if isinstance(v, str) else v for v in value]
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _time_of_day(cls, value: object, info: object) -> str:
        name = getattr(info, "field_name", "time")
        if not isinstance(value, str):
            raise ValueError(
                f"must be a time of day as a quoted string such as \"09:00\", got {value!r} (YAML reads an "
                "unquoted 15:00 as the number 900)"
            )
        if not (_TIME_OF_DAY.fullmatch(value) or (name == "end" and value == END_OF_DAY)):
            allowed = "00:00 to 23:59" + (", or 24:00" if name == "end" else "")
            raise ValueError(f"'{value}' is not a time of day HH:MM ({allowed})")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if len(set(self.days)) != len(self.days):
            raise at(("days",), f"names a day twice: {', '.join(self.days)}")
        if _minutes(self.start) == _minutes(self.end) % (24 * 60) and self.end != END_OF_DAY:
            raise at(("end",), f"equals start ({self.start}): an empty window; for a whole day write start "
                     "\"00:00\" and end \"24:00\"")
        return self

    @property
    def length(self) -> timedelta:
        start, end = _minutes(self.start), _minutes(self.end)
        return timedelta(minutes=end - start if end > start else end + 24 * 60 - start)

    def describe(self) -> str:
        return f"{','.join(self.days)} {self.start}-{self.end}"


class MaintenanceWindow(SpecModel):
    """When a rollout may run: weekly windows in one IANA time zone."""

    timeZone: str = Field(description="IANA time zone of the windows' times: local wall-clock times, so a window "
                          "keeps its hours across daylight saving.", examples=["Europe/Amsterdam"])
    weekly: list[WeeklyWindow] = Field(
        min_length=1, description="When a rollout may run: on each of `days`, from `start` to `end`.",
        examples=[[{"days": ["tue", "wed", "thu"], "start": "09:00", "end": "14:00"}]])

    @field_validator("timeZone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name longer than a file name may be
            raise ValueError(f"'{value}' is not an IANA time zone (such as Europe/Amsterdam or UTC)") from None
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timeZone)

    def _openings(self, around: datetime) -> list[tuple[datetime, datetime]]:
        """Every window opening from the day before ``around`` to a week after, as (opens, closes) in UTC."""
        local = around.astimezone(self.zone)
        found = []
        for offset in range(-1, 8):
            day = (local + timedelta(days=offset)).date()
            for window in self.weekly:
                if WEEKDAYS[day.weekday()] not in window.days:
                    continue
                minutes = _minutes(window.start)
                # Wall-clock arithmetic: the window keeps its local hours across a daylight-saving change.
                starts = datetime.combine(day, time(minutes // 60, minutes % 60))
                opens = starts.replace(tzinfo=self.zone).astimezone(UTC)
                closes = (starts + window.length).replace(tzinfo=self.zone).astimezone(UTC)
                found.append((opens, closes))
        return sorted(found)

    def is_open(self, moment: datetime) -> bool:
        """``moment`` (aware) is inside one of the windows."""
        now = moment.astimezone(UTC)
        return any(opens <= now < closes for opens, closes in self._openings(now))

    def next_opening(self, moment: datetime) -> datetime:
        """When the next window opens after ``moment`` (UTC); ``moment`` itself when it is open."""
        now = moment.astimezone(UTC)
        if self.is_open(now):
            return now
        return min(opens for opens, _ in self._openings(now) if opens > now)

    def describe(self) -> str:
        return f"{'; '.join(w.describe() for w in self.weekly)} ({self.timeZone})"

    def verdict(self, moment: datetime) -> str:
        """In words, for findings and the deploy plan: open, or closed until when."""
        if self.is_open(moment):
            return f"inside its maintenance window ({self.describe()})"
        opens = self.next_opening(moment).astimezone(self.zone)
        return (f"outside its maintenance window ({self.describe()}); the next one opens "
                f"{opens.strftime('%a %Y-%m-%d %H:%M %Z')}")


class RolloutSettings(SpecModel):
    """How a prod rollout proceeds (fleetspec/discipline.py). The program states these on the cluster-identity record,
    where the pack reads them; what the last deployment released and when comes from its stack outputs
    (``timeline``, below)."""

    waveDwellHours: Hours = Field(
        DEFAULT_WAVE_DWELL_HOURS,
        description="Hours a released wave runs before the next wave may be released; under the business day only with "
        "`earlyReleaseReason`. Policy `waves-in-order` also "
        "refuses a wave released while an earlier one is held, more than one new wave in one deployment, and a "
        "serving pool in a wave not after every batch pool's.", examples=[48],
    )
    earlyReleaseReason: str | None = Field(
        None, min_length=1,
        description="Why this change may release more than one new wave, or a wave sooner than `waveDwellHours` "
        "after the one before: those findings of `waves-in-order` become advice quoting it.",
        examples=["CVE-2026-1234: every pool this week"],
    )
    servingBeforeBatchReason: str | None = Field(
        None, min_length=1,
        description="Why a serving pool may be released in a wave before (or with) a batch pool.",
        examples=["the T4 pool runs the nightly ETL"],
    )
    keepGenerationHours: Hours = Field(
        DEFAULT_KEEP_GENERATION_HOURS,
        description="Hours an image-owned pool's newest generation runs (since the deployment that first deployed "
        "it) before the previous one may be retired (policy `old-generation-kept`; the runbook's \"a full business "
        "day\"); under it only with `earlyRetireReason`.",
    )
    earlyRetireReason: str | None = Field(
        None, min_length=1,
        description="Why a previous generation may be retired before the newest ran `keepGenerationHours`.",
        examples=["the old AMI has a kernel CVE"],
    )
    maintenanceWindow: MaintenanceWindow | None = Field(
        None, description="Weekly windows in one time zone when a rollout may run; none: any time. Outside every "
        "window `gpu-rollout deploy-plan` leaves the stack alone (the deploy workflow's hourly run deploys it once "
        "one opens), `gpu-rollout watch` pauses the rollout before the operator starts another node (one already "
        "upgrading finishes), and policy `maintenance-window` advises. That policy also reports a prod stack "
        "without a window (at its advisory level).",
    )

    @model_validator(mode="after")
    def _floors_lowered_with_a_reason(self) -> Self:
        # The runbook's business day between waves and before the way back is removed: lowered only with the reason
        # the stack states (the same reasons that excuse an early release or retirement), never silently by a 0.
        if self.waveDwellHours < DEFAULT_WAVE_DWELL_HOURS and self.earlyReleaseReason is None:
            raise at(("waveDwellHours",), f"{self.waveDwellHours:g} h is under the runbook's business day "
                     f"({DEFAULT_WAVE_DWELL_HOURS:g} h) between waves: state why in rollout.earlyReleaseReason")
        if self.keepGenerationHours < DEFAULT_KEEP_GENERATION_HOURS and self.earlyRetireReason is None:
            raise at(("keepGenerationHours",), f"{self.keepGenerationHours:g} h is under the runbook's business day "
                     f"({DEFAULT_KEEP_GENERATION_HOURS:g} h) an old generation stays: state why in "
                     "rollout.earlyRetireReason")
        return self


def utc_now() -> datetime:
    """The real clock, the default of every ``now`` the rules, the deploy plan and watch take."""
    return datetime.now(UTC).replace(microsecond=0)


def hours_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / 3600


# The canary's soak before prod (policy soak-floor): prod refuses less than a day; the runbook keeps the canary
# "a week ahead of production", so anything shorter than a week is advice.
MIN_PROD_SOAK_HOURS = 24.0
RUNBOOK_SOAK_HOURS = 168.0
