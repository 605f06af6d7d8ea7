"""The Pulumi program: load the FleetSpec from this stack's config, build the fleet, export outputs."""

import pulumi

from components import previous
from components.fleet import GpuFleet, GpuFleetArgs
from components.program_config import runtime_config
from spec.load import spec_from_config

spec = spec_from_config(runtime_config(), source=f"stack {pulumi.get_stack()}")
fleet = GpuFleet("fleet", GpuFleetArgs(spec))

pulumi.export("stage", fleet.stage)
pulumi.export("cluster", fleet.cluster)
pulumi.export("driverVersion", fleet.driver_version)
pulumi.export("pools", fleet.pools)
pulumi.export("releasedPools", fleet.released_pools)
pulumi.export("heldPools", fleet.held_pools)
# Read back by the next deployment (components/previous.py) to catch changes the cloud cannot make in place.
pulumi.export(previous.CLOUD_POOLS, fleet.cloud_pools)
pulumi.export(previous.OPERATOR_VERSION, fleet.operator_version)
pulumi.export(previous.PER_POOL_DRIVERS, fleet.per_pool_drivers)
pulumi.export(previous.PREVIOUS_DRIVER_VERSION, fleet.previous_driver_version)
