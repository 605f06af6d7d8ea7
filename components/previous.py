"""The stack's last deployment, read by the program through a StackReference to the stack itself.

The engine hands a program only the new config; what the stack deployed last is in its own outputs. A
change that the cloud or the GPU Operator cannot take in one step (a replace-only field of a cloud pool,
per-pool driver mode switched on together with an operator upgrade) is only visible against that. The
program puts the last deployment's values on the resources it registers, where the policy pack, `pulumi
preview` and `gpu-rollout plan` (which answers this reference with `--previous-outputs`) all see them.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spec import resource_facts

# Stack outputs this module reads back; __main__ exports them under the same names.
CLOUD_POOLS = "cloudPools"  # cloud pool name -> replace-only fields it was deployed with (spec.replacement)
OPERATOR_VERSION = "operatorVersion"
PER_POOL_DRIVERS = "perPoolDrivers"
DRIVER_VERSION = "driverVersion"  # the target of the last deployment
PREVIOUS_DRIVER_VERSION = "previousDriverVersion"  # what its held pools stayed on
POOLS = "pools"  # pool -> {"driverVersion": ...} as the last deployment pinned it


class PreviousDeployment:
    """Outputs of this stack's last successful deployment (none before the first)."""

    def __init__(self, parent: pulumi.Resource) -> None:
        stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        self._reference = pulumi.StackReference(
            "previous-deployment", stack_name=stack, opts=pulumi.ResourceOptions(parent=parent)
        )

    def output(self, key: str, default: Any) -> pulumi.Output[Any]:
        return self._reference.get_output(key).apply(lambda value: default if value is None else value)

    def cloud_pool_record(self, cloud_name: str, planned: str) -> pulumi.Output[str]:
        """What the cloud pool was last deployed with; the planned record for a pool not deployed yet."""
        return self.output(CLOUD_POOLS, {}).apply(
            lambda pools: str(pools.get(cloud_name, planned)) if isinstance(pools, dict) else planned
        )

    def drivers_ran(self) -> pulumi.Output[str]:
        """Driver versions the fleet ran as of the last deployment (its target, what held pools stayed on,
        each pool's pin), comma-separated: a rollback goes back to one of them."""

        def collect(args: list[Any]) -> str:
            target, previous_target, pools = args
            found = {v for v in (target, previous_target) if isinstance(v, str) and v}
            if isinstance(pools, dict):
                found |= {
                    p["driverVersion"] for p in pools.values()
                    if isinstance(p, dict) and isinstance(p.get("driverVersion"), str)
                }
            return resource_facts.drivers_ran_text(found)

        return pulumi.Output.all(
            self.output(DRIVER_VERSION, None), self.output(PREVIOUS_DRIVER_VERSION, None), self.output(POOLS, None)
        ).apply(collect)
