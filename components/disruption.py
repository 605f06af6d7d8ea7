"""One PodDisruptionBudget per model server, so every eviction the upgrade makes keeps it above minAvailable."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options


class ModelBudgetArgs(ComponentArgs):
    namespace: str = Field(description="The model server's namespace, where its PDB goes.")
    pdb_name: str = Field(description="The PDB's name (manifests.pdb_name).")
    metadata: dict[str, Any] = Field(
        description="The PDB's metadata, with the model's facts the policy pack reads (manifests.pdb_metadata).")
    budget: dict[str, Any] = Field(description="The PDB's spec: minAvailable and the selector (manifests.pdb_spec).")
    min_available: int | str = Field(description="The model's minAvailable: the component's output.")


class ModelBudget(pulumi.ComponentResource):
    def __init__(self, name: str, args: ModelBudgetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:disruption:ModelBudget", name, None, opts)
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{args.namespace}-{args.pdb_name}",
            metadata=args.metadata,
            spec=args.budget,
            opts=child_options(self, opts),
        )
        self.register_outputs({"minAvailable": args.min_available})
