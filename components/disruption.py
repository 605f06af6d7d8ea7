"""One PodDisruptionBudget per model server, so every eviction the upgrade makes keeps it above minAvailable."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.options import child_options
from renderers import manifests
from fleetspec.model import FleetSpec, Model


@dataclass(frozen=True)
class ModelBudgetArgs:
    spec: FleetSpec
    model: Model


class ModelBudget(pulumi.ComponentResource):
    def __init__(self, name: str, args: ModelBudgetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:disruption:ModelBudget", name, None, opts)
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{args.model.namespace}-{manifests.pdb_name(args.model)}",
            metadata=manifests.pdb_metadata(args.spec, args.model),
            spec=manifests.pdb_spec(args.model),
            opts=child_options(self, opts),
        )
        self.register_outputs({"minAvailable": args.model.minAvailable})
