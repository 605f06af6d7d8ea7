"""Which cloud quota a GPU node counts against, in vCPUs: the EC2 Service Quotas codes of the P and G instance
classes, Azure's regional vCPU quota, and the nodes an AKS ``maxSurge`` adds. Pure data; no I/O.

EC2 counts running On-Demand instances, and Spot requests, per instance class in vCPUs (the Service Quotas
console's "Running On-Demand P instances", code ``L-417A185B``, and its siblings); Azure counts vCPUs per VM
family (the family the Resource SKUs API names for a size, the usage of the same name) and in all
(``cores``, "Total Regional vCPUs"). Sources: Amazon EC2 User Guide, "Amazon EC2 service quotas"
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html); Microsoft Learn, "Check vCPU
quotas" (https://learn.microsoft.com/azure/virtual-machines/quotas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EC2_SERVICE_CODE = "ec2"
AZURE_REGIONAL_VCPUS = "cores"  # the usage of every VM's vCPUs in the region, whatever its family


@dataclass(frozen=True)
class Ec2Quota:
    code: str  # the Service Quotas code, e.g. L-417A185B
    name: str  # as Service Quotas names it
    prefixes: tuple[str, ...]  # instance type classes it counts (the part before the generation digit)
    spot: bool  # counts Spot requests, not On-Demand instances


EC2_QUOTAS: tuple[Ec2Quota, ...] = (
    Ec2Quota("L-417A185B", "Running On-Demand P instances", ("p",), False),
    Ec2Quota("L-DB2E81BA", "Running On-Demand G and VT instances", ("g", "vt"), False),
    Ec2Quota("L-7212CCBC", "All P Spot Instance Requests", ("p",), True),
    Ec2Quota("L-3819A6DF", "All G and VT Spot Instance Requests", ("g", "vt"), True),
)


def instance_class(instance_type: str) -> str:
    """The class letters of an EC2 instance type: ``p`` for ``p5.48xlarge``, ``vt`` for ``vt1.3xlarge``."""
    family = instance_type.strip().lower().split(".", 1)[0]
    return family[: len(family) - len(family.lstrip("abcdefghijklmnopqrstuvwxyz"))] if family else ""


def ec2_quota(instance_type: str, spot: bool) -> Ec2Quota | None:
    """The vCPU quota an instance of ``instance_type`` counts against (On-Demand, or Spot); None for a class
    outside the P and G quotas."""
    cls = instance_class(instance_type)
    return next((q for q in EC2_QUOTAS if cls in q.prefixes and q.spot == spot), None)


def aks_surge_nodes(max_surge: str, nodes: int) -> int:
    """Nodes AKS adds at once to an agent pool of ``nodes`` for ``maxSurge``: a count, or a percentage of the
    pool's nodes rounded up; at least one."""
    text = max_surge.strip()
    if text.endswith("%"):
        return max(1, math.ceil(nodes * float(text[:-1]) / 100))
    return max(1, int(text))


__all__ = ["AZURE_REGIONAL_VCPUS", "EC2_QUOTAS", "EC2_SERVICE_CODE", "Ec2Quota", "aks_surge_nodes", "ec2_quota",
           "instance_class"]
