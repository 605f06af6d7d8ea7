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

from spec.resource_facts.values import flag

PREVIOUS_DEPLOYMENT = "previous-deployment"  # the logical name of the StackReference to the stack itself

# Stack outputs the next deployment reads back; __main__ exports them under these names.
CLOUD_POOLS = "cloudPools"  # cloud pool name -> replace-only fields it was deployed with (spec.replacement)
OPERATOR_VERSION = "operatorVersion"
PER_POOL_DRIVERS = "perPoolDrivers"
DRIVER_VERSION = "driverVersion"  # the target of the last deployment
PREVIOUS_DRIVER_VERSION = "previousDriverVersion"  # what its held pools stayed on
POOLS = "pools"  # pool -> {"driverVersion": ...} as the last deployment pinned it


@dataclass(frozen=True)
class PreviousDeployment:
    """What the stack's last successful deployment ran; empty before the first one."""

    operator_version: str | None = None
    per_pool_drivers: bool | None = None
    drivers_ran: frozenset[str] = frozenset()  # its target, what held pools stayed on, each pool's pin
    cloud_pools: Mapping[str, str] = field(default_factory=dict)  # cloud pool -> replacement record

    @property
    def deployed(self) -> bool:
        return self.operator_version is not None


def read_previous_deployment(outputs: Any) -> PreviousDeployment:
    """The last deployment from its stack outputs (a mapping; anything else reads as no deployment)."""
    if not isinstance(outputs, Mapping):
        return PreviousDeployment()
    operator_version = outputs.get(OPERATOR_VERSION)
    per_pool = outputs.get(PER_POOL_DRIVERS)
    ran = {v for v in (outputs.get(DRIVER_VERSION), outputs.get(PREVIOUS_DRIVER_VERSION)) if isinstance(v, str) and v}
    pools = outputs.get(POOLS)
    if isinstance(pools, Mapping):
        ran |= {
            p["driverVersion"] for p in pools.values()
            if isinstance(p, Mapping) and isinstance(p.get("driverVersion"), str) and p["driverVersion"]
        }
    cloud_pools = outputs.get(CLOUD_POOLS)
    return PreviousDeployment(
        operator_version=operator_version if isinstance(operator_version, str) and operator_version else None,
        per_pool_drivers=per_pool if isinstance(per_pool, bool) else flag(per_pool),
        drivers_ran=frozenset(ran),
        cloud_pools={str(k): str(v) for k, v in cloud_pools.items()} if isinstance(cloud_pools, Mapping) else {},
    )


def previous_deployment_outputs(props: Mapping[str, Any]) -> Any:
    """The last deployment's outputs, as the component's registered outputs hold them."""
    return props.get("outputs")
