"""Per-node facts shared by preflight, watch and pause: the driver a node runs and whether it is done.

A node is *done* when the upgrade controller has nothing left to do on it for this stack: its state
label is ``upgrade-done`` (or absent: the controller has not processed it, or the driver is not the
operator's) **and** GFD reports the driver its pool moves to (``FleetSpec.pool_target``).
The state label alone is not enough: before a version bump every node is ``upgrade-done`` on the old
driver, and the operator only moves it back to ``upgrade-required`` at its next reconcile (gpu-operator
reference section 3.1, state 9).

This would sit well in ``fleetspec/`` next to ``pool_target`` if it stops needing live node labels;
it reads GFD labels, so it lives with the live checks.
"""

from __future__ import annotations

from typing import TypeVar

from checks.errors import ClusterError
from checks.objects import Obj, labels_of
from gpu_knowledge import labels
from fleetspec.membership import describe_selectors, node_membership, pool_node_selectors
from fleetspec.model import FleetSpec


class NoNodesError(ClusterError):
    """No node of the cluster belongs to a pool of the stack: most likely the wrong cluster or context."""


def node_driver_version(node: Obj) -> str | None:
    """GFD's driver version; falls back to the deprecated cuda.driver.major/minor/rev labels."""
    node_labels = labels_of(node)
    full = node_labels.get(labels.GFD_DRIVER_VERSION)
    if full:
        return full
    parts = [node_labels.get(key) for key in (labels.GFD_DRIVER_MAJOR_DEPRECATED, labels.GFD_DRIVER_MINOR_DEPRECATED,
                                               labels.GFD_DRIVER_REV_DEPRECATED)]
    if parts[0] and parts[1]:
        return ".".join(p for p in parts if p)
    return None


def upgrade_state(node: Obj) -> str:
    """The operator's upgrade-state label, "" when the node has none."""
    return labels_of(node).get(labels.UPGRADE_STATE, "")


def target_driver(spec: FleetSpec, node: Obj) -> str | None:
    """The driver the node's pool moves to (``FleetSpec.pool_target``); None for a node of no pool of this stack (the pool is
    found by :func:`fleetspec.membership.node_membership`: project label, cloud pool label or declared selector)."""
    membership = node_membership(spec, labels_of(node))
    return spec.pool_target(membership.pool).driver if membership is not None else None


def node_done(spec: FleetSpec, node: Obj) -> bool:
    """``upgrade-done`` (or no state label) and running its pool's target driver per GFD."""
    target = target_driver(spec, node)
    return (target is not None and upgrade_state(node) in ("", labels.UPGRADE_DONE)
            and node_driver_version(node) == target)


_Node = TypeVar("_Node")


def require_nodes(nodes: list[_Node], spec: FleetSpec, what: str) -> list[_Node]:
    """``nodes`` (the stack's pool nodes), or NoNodesError when there are none (a wrong context must not
    look like success)."""
    if not nodes:
        looked = "; ".join(f"{pool.name}: {describe_selectors(pool_node_selectors(spec, pool))}"
                           for pool in spec.nodePools)
        raise NoNodesError(f"{what}: no node of the stack's pools on this cluster (looked for {looked}); is "
                           "--kubeconfig/--context pointing at the stack's cluster?")
    return nodes
