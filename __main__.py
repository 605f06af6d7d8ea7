"""The Pulumi program: load the FleetSpec from this stack's config, build the fleet, export outputs."""

import pulumi

from components.fleet import GpuFleet, GpuFleetArgs
from components.program_config import runtime_config
from fleetspec.load import spec_from_config

spec = spec_from_config(runtime_config(), source=f"stack {pulumi.get_stack()}")
fleet = GpuFleet("fleet", GpuFleetArgs(spec=spec))

# Names and shape: engine_contracts/resource_facts/outputs.py. The next deployment reads them back (components/previous.py),
# a prod stack its canary's (components/promotion.py), and `gpu-rollout plan`/`diff` show them.
for name, value in fleet.outputs.items():
    pulumi.export(name, value)
