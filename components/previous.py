"""The stack's last deployment, read by the program through a StackReference to the stack itself.

The engine hands a program only the new config; what the stack deployed last is in its own outputs. A
change that the cloud or the GPU Operator cannot take in one step (a replace-only field of a cloud pool,
per-pool driver mode switched on together with an operator upgrade) is only visible against that. The
pack's stack policies read the last deployment through ``engine_contracts.resource_facts.previous``, and `gpu-rollout
plan` answers the reference with ``--previous-outputs``. Each cloud pool also carries the record of its replace-only
fields as last deployed (a tag), for the resource policy that compares them.

The engine hands stack policies no StackReference, only resources and components with their outputs, so
the reference is held by a component that registers the referenced outputs as its own; a component's
outputs changing from one deployment to the next is no change to the stack.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import pulumi
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options
from renderers import manifests
from engine_contracts import resource_facts
from fleetspec.model import FleetSpec

T = TypeVar("T")


def read_referenced(
    reference: pulumi.StackReference, names: tuple[str, ...], read: Callable[[resource_facts.StackOutputs], T]
) -> pulumi.Output[T]:
    """``read`` of the referenced stack's outputs ``names`` (``engine_contracts.resource_facts.outputs``). Each is fetched
    by name, so it stays secret exactly when the referenced stack made it so."""
    return pulumi.Output.all(*(reference.get_output(name) for name in names)).apply(
        lambda values: read(resource_facts.read_stack_outputs(dict(zip(names, values, strict=True))))
    )


class PreviousDeploymentArgs(ComponentArgs):
    stack: str = Field(description="The stack itself, as a StackReference names it: `org/project/stack`.")


class PreviousDeployment(pulumi.ComponentResource):
    """Outputs of this stack's last successful deployment (none before the first), registered as this
    component's output ``outputs`` where the pack's stack policies see them."""

    def __init__(self, name: str, args: PreviousDeploymentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(resource_facts.PREVIOUS_DEPLOYMENT_COMPONENT, name, None, opts)
        self._reference = pulumi.StackReference(
            resource_facts.PREVIOUS_DEPLOYMENT, stack_name=args.stack, opts=child_options(self, opts)
        )
        self.register_outputs({"outputs": self._reference.outputs})
        # Read once for every pool: each read of a referenced output lifts the whole of the stack's outputs
        # (StackReference.get_output), so a read per pool grew with the square of the pools.
        self._cloud_pools = read_referenced(self._reference, (resource_facts.CLOUD_POOLS,), lambda last: last.cloud_pools)

    def cloud_pool_record(self, cloud_name: str, planned: str) -> pulumi.Output[str]:
        """What the cloud pool was last deployed with; the planned record for a pool not deployed yet."""
        return self._cloud_pools.apply(lambda records: records.get(cloud_name, planned))

    def timeline(self, spec: FleetSpec, now: datetime | None) -> pulumi.Output[resource_facts.Timeline]:
        """What this deployment records: the last deployment's times carried forward, ``now`` for what it
        releases or deploys first (``renderers.manifests.timeline``)."""
        names = (resource_facts.POOLS, resource_facts.TIMELINE)
        return read_referenced(self._reference, names, lambda last: manifests.timeline(spec, last, now))
