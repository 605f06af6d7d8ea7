"""The base of every component's args: a frozen, closed model of exactly what the component uses.

``GpuFleet`` (components/fleet.py) builds each component's args from the FleetSpec: the spec's own typed blocks
where a component reads them, and where a body needs stack-wide facts (stage, change ticket, driver owner, ...)
the body itself, rendered by renderers/manifests.py. So a component's inputs show in its signature, and no
component reaches into the whole spec.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ComponentArgs(BaseModel):
    # Frozen and closed like the spec's models; Pulumi values (Outputs, resources) ride along as they are.
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
