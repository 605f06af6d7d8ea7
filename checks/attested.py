"""The canary's attestations of the drivers a prod stack's pools move to, as preflight compares them with the
pools' nodes (``attested-kernel``): read from the project's ``attestations/<canary>/<driver>.json``.

Each is checked for form and digest only. Whether its signer is trusted, and everything else it binds, is the
pack's to judge (policy ``canary-attested``); preflight adds what only the cluster shows: the kernel prod's nodes
run today, which no stack file states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine_contracts import attestation
from fleetspec.model import FleetSpec, Stage


@dataclass(frozen=True)
class AttestedDrivers:
    """The attestations read, by driver; why one could not be read, by driver; and the folder they came from
    (None: the verb was given no project folder to read them from)."""

    folder: Path | None = None
    by_driver: dict[str, attestation.Attestation] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


def promoted_drivers(spec: FleetSpec) -> set[str]:
    """The drivers the released pools of a prod stack with a canary move to (none for any other stack)."""
    if spec.stage != Stage.PROD or spec.promotion is None:
        return set()
    return {target.driver for pool in spec.nodePools
            if not spec.pool_held(pool) and (target := spec.pool_target(pool)).driver is not None}


def read_attested(project_dir: Path, spec: FleetSpec) -> AttestedDrivers:
    """The canary's attestation of each driver :func:`promoted_drivers` names, from ``project_dir``."""
    folder = project_dir / attestation.ATTESTATION_DIR
    found: dict[str, attestation.Attestation] = {}
    unreadable: dict[str, str] = {}
    for driver in sorted(promoted_drivers(spec)):
        assert spec.promotion is not None  # promoted_drivers names none without one
        try:
            found[driver] = attestation.load(attestation.path_for(folder, spec.promotion.canaryStack, driver))
        except attestation.AttestationError as error:
            unreadable[driver] = str(error)
    return AttestedDrivers(folder, found, unreadable)
