"""The Pulumi program: load the FleetSpec from this stack's config, build the fleet, export outputs."""

import pulumi

from components.fleet import GpuFleet, GpuFleetArgs
from spec.load import runtime_config, spec_from_config

spec = spec_from_config(runtime_config(), source=f"stack {pulumi.get_stack()}")
fleet = GpuFleet("fleet", GpuFleetArgs(spec))

pulumi.export("stage", fleet.stage)
pulumi.export("driverVersion", fleet.driver_version)
pulumi.export("pools", fleet.pools)
pulumi.export("releasedPools", fleet.released_pools)
pulumi.export("heldPools", fleet.held_pools)
