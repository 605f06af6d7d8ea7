"""The stack's last deployment, read by the program through a StackReference to the stack itself.

The engine hands a program only the new config; what the stack deployed last is in its own outputs. A
change that the cloud or the GPU Operator cannot take in one step (a replace-only field of a cloud pool,
per-pool driver mode switched on together with an operator upgrade) is only visible against that. The
reference is itself a resource of the stack: the engine shows its outputs (the last deployment's exports)
to the pack's stack policies, which read them through ``spec.resource_facts.previous``, and `gpu-rollout
plan` answers it with ``--previous-outputs``. Each cloud pool also carries the record of its replace-only
fields as last deployed (a tag), for the resource policy that compares them.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spec import resource_facts

# The outputs the next deployment reads back (their one home is spec.resource_facts.previous); the program
# exports them under these names.
from spec.resource_facts.previous import (
    CLOUD_POOLS as CLOUD_POOLS,
    OPERATOR_VERSION as OPERATOR_VERSION,
    PER_POOL_DRIVERS as PER_POOL_DRIVERS,
    PREVIOUS_DRIVER_VERSION as PREVIOUS_DRIVER_VERSION,
)


class PreviousDeployment:
    """Outputs of this stack's last successful deployment (none before the first)."""

    def __init__(self, parent: pulumi.Resource) -> None:
        stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        self._reference = pulumi.StackReference(
            resource_facts.PREVIOUS_DEPLOYMENT, stack_name=stack, opts=pulumi.ResourceOptions(parent=parent)
        )

    def output(self, key: str, default: Any) -> pulumi.Output[Any]:
        return self._reference.get_output(key).apply(lambda value: default if value is None else value)

    def cloud_pool_record(self, cloud_name: str, planned: str) -> pulumi.Output[str]:
        """What the cloud pool was last deployed with; the planned record for a pool not deployed yet."""
        return self.output(resource_facts.CLOUD_POOLS, {}).apply(
            lambda pools: str(pools.get(cloud_name, planned)) if isinstance(pools, dict) else planned
        )
