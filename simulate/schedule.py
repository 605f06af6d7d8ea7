"""How long a change and the whole rollout take, from a simulated run of every wave: this change moves only the
waves it releases (a held pool is released by a later change, each wave ``rollout.waveDwellHours`` after the one
before), and between waves the runbook waits the dwell, which the simulated run leaves out (it releases a wave as
soon as the one before is done).

Nothing here simulates; it reads an :class:`simulate.outcome.Outcome` against the fleet's waves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulate.fleet import Fleet
from simulate.outcome import Outcome, Span


@dataclass(frozen=True)
class Schedule:
    released_waves: tuple[int, ...]  # the waves this change releases (a pool of it not held)
    held_waves: tuple[int, ...]  # the waves only later changes release
    released_pools: tuple[str, ...]
    held_pools: tuple[str, ...]
    dwell_hours: float  # rollout.waveDwellHours
    change_seconds: float | None  # the released waves' upgrades and the dwell between them; None: one never ends
    upgrade_seconds: float | None  # every wave's upgrades, end to end, without the dwell
    whole_seconds: float | None  # every wave's upgrades and a dwell between each two

    def as_json(self) -> dict[str, Any]:
        def rounded(seconds: float | None) -> float | None:
            return None if seconds is None else round(seconds, 1)

        return {"thisChange": {"waves": list(self.released_waves), "pools": list(self.released_pools),
                               "seconds": rounded(self.change_seconds)},
                "held": {"waves": list(self.held_waves), "pools": list(self.held_pools)},
                "waveDwellHours": self.dwell_hours, "upgradeSeconds": rounded(self.upgrade_seconds),
                "wholeRolloutSeconds": rounded(self.whole_seconds)}


def _took(span: Span | None) -> float | None:
    return None if span is None or span.start is None or span.end is None else span.end - span.start


def _total(spans: list[float | None], dwells: int, dwell_hours: float) -> float | None:
    if any(s is None for s in spans):
        return None
    return sum(s for s in spans if s is not None) + dwells * dwell_hours * 3600


def schedule(fleet: Fleet, outcome: Outcome) -> Schedule:
    """The change's and the whole rollout's duration from ``outcome``, a run of every wave of ``fleet``."""
    waves = sorted({p.wave for p in fleet.pools})
    released = tuple(w for w in waves if any(p.wave == w and not p.held for p in fleet.pools))
    held = tuple(w for w in waves if w not in released)
    by_wave = {w: next((s for s in outcome.waves if s.name == f"wave {w}"), None) for w in waves}
    took = {w: _took(by_wave[w]) for w in waves}
    return Schedule(
        released, held,
        tuple(p.name for p in fleet.pools if not p.held), tuple(p.name for p in fleet.pools if p.held),
        fleet.wave_dwell_hours,
        _total([took[w] for w in released], max(len(released) - 1, 0), fleet.wave_dwell_hours),
        _total([took[w] for w in waves], 0, 0.0),
        _total([took[w] for w in waves], max(len(waves) - 1, 0), fleet.wave_dwell_hours),
    )


__all__ = ["Schedule", "schedule"]
