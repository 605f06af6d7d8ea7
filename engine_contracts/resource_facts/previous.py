"""The stack's last deployment, as the program's StackReference to its own stack shows it.

The program reads its own last outputs through a StackReference held by a component
(components/previous.py), which registers them as its output ``outputs``. The engine hands stack policies
every resource's and component's outputs, but no StackReference, so the pack reads what the fleet ran from
that component; no object in the cluster or the cloud has to carry it (a copy on one would change on every
deployment, so a second `pulumi up` with no change would still update it, while a component's outputs are
not a change). `gpu-rollout plan` answers the reference with ``--previous-outputs`` and records the
component's registered outputs the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine_contracts.resource_facts.outputs import PoolSummary, Timeline, read_stack_outputs

PREVIOUS_DEPLOYMENT = "previous-deployment"  # the logical name of the StackReference to the stack itself


@dataclass(frozen=True)
class PreviousDeployment:
    """What the stack's last successful deployment ran; empty before the first one.

    What ran is what the deployments recorded in the ``timeline`` output's ``driversRun`` (docs/validation.md,
    What "ran" means): per pool, each driver a deployment released it to through the prod gate. Never a config
    field: ``driverVersion`` and ``previousDriverVersion`` are what the config said, and a held pool's pin in its
    ``pools`` summary is ``previousVersion``, whether or not any node ran it. Only a last deployment made before
    ``driversRun`` existed is read from its summaries, and then only a released pool's driver."""

    operator_version: str | None = None
    per_pool_drivers: bool | None = None
    pool_drivers: Mapping[str, frozenset[str]] = field(default_factory=dict)  # pool -> every driver it ran
    cloud_pools: Mapping[str, str] = field(default_factory=dict)  # cloud pool -> replacement record
    pools: Mapping[str, PoolSummary] = field(default_factory=dict)  # pool -> its wave, role, held, generations
    timeline: Timeline = field(default_factory=Timeline)  # when its waves were released, generations deployed

    @property
    def drivers_ran(self) -> frozenset[str]:
        """Every driver a pool of the fleet ran as of the last deployment."""
        return frozenset(d for drivers in self.pool_drivers.values() for d in drivers)

    @property
    def deployed(self) -> bool:
        return self.operator_version is not None


def read_previous_deployment(outputs: Any) -> PreviousDeployment:
    """The last deployment from its stack outputs (``engine_contracts.resource_facts.outputs``; anything but a mapping
    reads as no deployment)."""
    last = read_stack_outputs(outputs)
    pool_drivers = {}
    recorded = last.timeline.drivers_run
    for name in dict.fromkeys([*last.pools, *recorded]):
        summary = last.pools.get(name, PoolSummary())
        if name in recorded:
            ran = set(recorded[name])
        elif summary.held is False and summary.driver_version:  # an older release's deployment: what it released
            ran = {summary.driver_version}
        else:
            ran = set()
        if ran:
            pool_drivers[name] = frozenset(ran)
    return PreviousDeployment(
        operator_version=last.operator_version or None,
        per_pool_drivers=last.per_pool_drivers,
        pool_drivers=pool_drivers,
        cloud_pools=dict(last.cloud_pools),
        pools={name: summary for name, summary in last.pools.items() if summary != PoolSummary()},
        timeline=last.timeline,
    )


def previous_deployment_outputs(props: Mapping[str, Any]) -> Any:
    """The last deployment's outputs, as the component's registered outputs hold them."""
    return props.get("outputs")
