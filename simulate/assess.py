"""`gpu-rollout simulate`'s one call: the rollout under the configured policy (or another parallelism), the lower
bound it is measured against, and the safest fast parallelism."""

from __future__ import annotations

from dataclasses import dataclass

from simulate.bounds import LowerBound, lower_bound
from simulate.engine import simulate
from simulate.fleet import Fleet
from simulate.outcome import Outcome
from simulate.search import Recommended, admitted_by_pool, beyond_the_pack, recommend


@dataclass(frozen=True)
class Assessment:
    fleet: Fleet
    seed: int
    outcome: Outcome  # under the policy as configured (or with --parallel)
    lower_bound: LowerBound
    recommended: Recommended
    # The bound within what the policy pack admits (simulate.bounds); None where it admits no parallelism on a pool.
    within_pack: LowerBound | None = None
    # Where the policies as simulated are ones the pack refuses (a canary's maxParallelUpgrades other than 1, more
    # nodes of a pool at once than its spare capacity admits): plan refuses a stack that sends them.
    beyond_the_pack: tuple[str, ...] = ()

    @property
    def ratio(self) -> float | None:
        """Predicted duration over the lower bound (1.0: no schedule could do better)."""
        if self.outcome.seconds is None or self.lower_bound.seconds <= 0:
            return None
        return self.outcome.seconds / self.lower_bound.seconds

    @property
    def recommended_ratio(self) -> float | None:
        """The recommendation's predicted duration over the lower bound."""
        outcome = self.recommended.outcome
        if outcome is None or outcome.seconds is None or self.lower_bound.seconds <= 0:
            return None
        return outcome.seconds / self.lower_bound.seconds

    @property
    def recommended_within_pack_ratio(self) -> float | None:
        """The recommendation's predicted duration over the bound within what the pack admits (the recommendation
        is held to it, so that bound holds for it): what the controller's schedule costs beyond the pack's rules."""
        outcome = self.recommended.outcome
        if outcome is None or outcome.seconds is None or self.within_pack is None or self.within_pack.seconds <= 0:
            return None
        return outcome.seconds / self.within_pack.seconds


def with_parallelism(fleet: Fleet, parallel: int) -> Fleet:
    """Every policy of ``fleet`` with ``maxParallelUpgrades`` set to ``parallel`` (its maxUnavailable kept)."""
    return fleet.with_policies(tuple(g.policy.with_parallelism(parallel, g.policy.max_unavailable)
                                     for g in fleet.groups))


def assess(fleet: Fleet, seed: int = 0, parallel: int | None = None) -> Assessment:
    """Simulate ``fleet`` as configured (with ``parallel`` instead of each policy's maxParallelUpgrades when given),
    bound it, and search the safest fast parallelism."""
    if parallel is not None:
        fleet = with_parallelism(fleet, parallel)
    outcome = simulate(fleet, seed)
    admits = admitted_by_pool(fleet)
    return Assessment(fleet, seed, outcome, lower_bound(fleet, outcome.models), recommend(fleet, seed),
                      None if admits is None else lower_bound(fleet, outcome.models, admits),
                      tuple(beyond_the_pack(fleet)))


__all__ = ["Assessment", "assess", "with_parallelism"]
