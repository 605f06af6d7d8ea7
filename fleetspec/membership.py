"""Which of the stack's pools a node belongs to, before and after this stack has labelled it.

The project's pool label (``gpu-driver-upgrade.io/pool``) reaches a node only through the cloud pool's
node labels, so on the first ``pulumi up`` of a stack over pools that already exist it is not there yet.
A node is therefore found by the project's label when it carries one, else by the cloud's own pool
label (AKS ``kubernetes.azure.com/agentpool``, EKS ``eks.amazonaws.com/nodegroup``, set from the
node's first boot), else by the ``nodeSelector`` a ``cloud: existing`` stack declares per pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpu_knowledge import labels
from fleetspec.model import Cloud, FleetSpec, Generation, NodePool

CLOUD_POOL_LABELS: dict[Cloud, str] = {Cloud.AKS: labels.AKS_AGENT_POOL, Cloud.EKS: labels.EKS_NODE_GROUP}


class Via(StrEnum):
    PROJECT_LABEL = "project label"
    CLOUD_LABEL = "cloud pool label"
    NODE_SELECTOR = "declared nodeSelector"


@dataclass(frozen=True)
class Membership:
    pool: NodePool
    generation: Generation | None  # the pool's generation the node runs, where it can be told
    via: Via

    @property
    def labelled(self) -> bool:
        """The node carries the project's labels (after the first `pulumi up` of its pool)."""
        return self.via == Via.PROJECT_LABEL


def _all_generations(pool: NodePool) -> list[Generation | None]:
    # Retired generations too: their nodes still belong to the pool while the cloud removes them.
    return list(pool.generations) if pool.generations else [None]


def _generation_by_id(pool: NodePool, value: str | None) -> Generation | None:
    return next((g for g in pool.generations or [] if str(g.id) == value), None)


def selects(selector: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    return all(node_labels.get(key) == value for key, value in selector.items())


def node_membership(spec: FleetSpec, node_labels: Mapping[str, str]) -> Membership | None:
    """The stack pool of a node with these labels, or None when the node is not in one of its pools."""
    pools = {pool.name: pool for pool in spec.nodePools}
    project = node_labels.get(labels.POOL)
    if project is not None:
        # Labelled by a stack: this one's pool, or another stack's (then never this stack's node).
        pool = pools.get(project)
        if pool is None:
            return None
        return Membership(pool, _generation_by_id(pool, node_labels.get(labels.GENERATION)), Via.PROJECT_LABEL)
    cloud_label = CLOUD_POOL_LABELS.get(spec.cluster.cloud)
    if cloud_label is not None:
        value = node_labels.get(cloud_label)
        for pool in spec.nodePools:
            for generation in _all_generations(pool):
                if value is not None and pool.cloud_name(generation) == value:
                    return Membership(pool, generation, Via.CLOUD_LABEL)
        return None
    for pool in spec.nodePools:
        if pool.existing is not None and selects(pool.existing.nodeSelector, node_labels):
            return Membership(pool, None, Via.NODE_SELECTOR)
    return None


def pool_node_selectors(spec: FleetSpec, pool: NodePool) -> list[dict[str, str]]:
    """Label sets, any one of which marks a node of the pool (for LIST label selectors and messages)."""
    found = [{labels.POOL: pool.name}]
    cloud_label = CLOUD_POOL_LABELS.get(spec.cluster.cloud)
    if cloud_label is not None:
        found += [{cloud_label: pool.cloud_name(g)} for g in _all_generations(pool)]
    elif pool.existing is not None:
        found.append(dict(pool.existing.nodeSelector))
    return found


def describe_selectors(selectors: list[dict[str, str]]) -> str:
    """``a=1`` or ``b=2,c=3``: how a message names the labels it looked for."""
    return " or ".join(",".join(f"{k}={v}" for k, v in sorted(s.items())) for s in selectors)
