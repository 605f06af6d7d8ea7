"""Is a canary ready to attest, and when will it be: what the soak schedule asks before it runs `verify`.

A canary's soak starts when the last of its upgraded nodes finished its upgrade (the start `verify` records
in the attestation, :attr:`checks.verify_facts.VerifyFacts.soak_start`), and it is long enough once it has
lasted the ``promotion.minSoakHours`` of every prod stack promoted from the canary (the longest of them:
the attestation must admit the driver into each). :func:`read` takes those facts from the cluster with one
LIST of nodes (another cluster is refused first, as `verify` refuses it); :func:`readiness` is pure. A canary
whose attestation of its driver is already in the project, sound and soaked long enough, needs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks import kube as k
from checks.identity import identify_cluster
from checks.identity import read_records, refuse_if_refuted
from checks.nodestate import NoNodesError
from checks.verify_facts import upgrade_finished_at, upgraded_nodes
from engine_contracts import attestation
from fleetspec.model import FleetSpec


@dataclass(frozen=True)
class SoakFacts:
    """What the cluster shows of the canary's soak."""

    drivers: frozenset[str]  # the targets its upgraded nodes move to (one, on a sound canary)
    nodes: int  # upgraded nodes
    finished: tuple[float, ...]  # when each finished its upgrade (epoch seconds), where the cluster shows it
    waiting: tuple[str, ...]  # nodes whose finished upgrade the cluster does not show yet

    @property
    def start(self) -> float | None:
        """When the last upgraded node finished: None while any has not."""
        return max(self.finished) if self.finished and not self.waiting else None


@dataclass(frozen=True)
class Soak:
    stack: str
    driver: str | None
    start: float | None
    hours_needed: float | None  # the longest minSoakHours of the prod stacks promoted from it
    prod_stacks: tuple[str, ...]
    ready: bool  # verify may run now and its attestation admits the driver into every prod stack
    reason: str
    attested: str | None = None  # the project's attestation that already admits the driver
    waiting: tuple[str, ...] = field(default=())

    @property
    def ready_at(self) -> float | None:
        if self.start is None or self.hours_needed is None:
            return None
        return self.start + self.hours_needed * 3600


def read(kube: k.Kube, spec: FleetSpec) -> SoakFacts:
    """The canary's upgraded nodes and when each finished; another cluster raises WrongClusterError."""
    all_nodes = kube.list(k.NODES)
    refuse_if_refuted(kube, identify_cluster(spec, read_records(kube), all_nodes))
    nodes = upgraded_nodes(spec, all_nodes)
    if not nodes:
        raise NoNodesError(f"no node of a released pool of the stack ({', '.join(p.name for p in spec.nodePools)}) "
                           f"was found on {kube.where}: the wrong cluster or --context?")
    finished = {n.name: upgrade_finished_at(n.node, n.target) for n in nodes}
    return SoakFacts(frozenset(n.target for n in nodes), len(nodes),
                     tuple(t for t in finished.values() if t is not None),
                     tuple(sorted(name for name, t in finished.items() if t is None)))


def _attested(directory: Path, stack: str, driver: str, hours: float) -> str | None:
    """The path of the project's attestation of ``driver`` when it is sound and soaked ``hours``."""
    try:
        path = attestation.path_for(directory, stack, driver)
        found = attestation.load(path) if path.is_file() else None
    except attestation.AttestationError:
        return None
    return str(path) if found is not None and found.soak_hours >= hours else None


def readiness(stack: str, facts: SoakFacts, prod_hours: dict[str, float], attestations: Path, now: float) -> Soak:
    """Whether `verify` of the canary now gives an attestation every prod stack promoted from it accepts."""
    prods = tuple(sorted(prod_hours))
    hours = max(prod_hours.values()) if prod_hours else None
    driver = next(iter(facts.drivers)) if len(facts.drivers) == 1 else None
    common: dict[str, Any] = {"stack": stack, "driver": driver, "start": facts.start, "hours_needed": hours,
                              "prod_stacks": prods, "waiting": facts.waiting}
    if driver is None:
        return Soak(**common, ready=False, reason=f"its upgraded nodes move to more than one driver "
                    f"({', '.join(sorted(facts.drivers))}): no attestation covers them")
    if hours is None:
        return Soak(**common, ready=False, reason="no prod stack names it as promotion.canaryStack: nothing waits "
                    "for its attestation")
    if facts.start is None:
        return Soak(**common, ready=False, reason=f"the soak has not started: {len(facts.waiting)} of {facts.nodes} "
                    "upgraded node(s) show no finished upgrade yet")
    done = _attested(attestations, stack, driver, hours)
    if done is not None:
        return Soak(**common, ready=False, attested=done, reason=f"{done} already admits {driver} after "
                    f"{hours:g} h: nothing to attest")
    soaked = (now - facts.start) / 3600
    if soaked < hours:
        return Soak(**common, ready=False, reason=f"soaked {soaked:.1f} h of the {hours:g} h "
                    f"{', '.join(prods)} ask{'s' if len(prods) == 1 else ''}")
    return Soak(**common, ready=True, reason=f"soaked {soaked:.1f} h, at least the {hours:g} h "
                f"{', '.join(prods)} ask{'s' if len(prods) == 1 else ''}: verify may attest {driver}")
