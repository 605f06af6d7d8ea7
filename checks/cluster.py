"""The stack's cluster (runbook: "Which cluster the live commands reach", "Pool membership"):
cluster-identity, pool-membership, pool-adopted, pool-hardware.

Another cluster never gets this far: preflight refuses it before any check runs
(:func:`checks.identity.refuse_if_refuted`); here an unconfirmed one is a warning.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from checks.identity import Verdict, identify_cluster
from checks.inventory import Inventory, pool_selectors_text
from checks.metadata import CLUSTER, check
from checks.objects import labels_of, name_of
from checks.results import Finding, failed, few, passed, warned
from gpu_knowledge import cloud_gpus, compat, labels
from fleetspec.membership import CLOUD_POOL_LABELS, Via
from renderers import manifests
from fleetspec.model import Cloud, NodePool
from vocabulary.check_ids import CheckId


@check(CheckId.CLUSTER_IDENTITY, CLUSTER)
def check_cluster_identity(inv: Inventory) -> list[Finding]:
    """Confirmed by an identity record or the nodes: pass; nothing to compare yet: warn."""
    identity = identify_cluster(inv.spec, inv.identity_records, inv.nodes)
    status = passed if identity.verdict == Verdict.CONFIRMED else warned
    return [status("cluster", identity.message)]


@check(CheckId.POOL_MEMBERSHIP, CLUSTER)
def check_pool_membership(inv: Inventory) -> list[Finding]:
    """How each pool's nodes were found; nodes found only by the cloud's pool label warn (not yet labelled)."""
    spec = inv.spec
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            results.append(failed(pool.name, "no node of the pool on this cluster (looked for "
                                  f"{pool_selectors_text(spec, [pool])}); wrong cluster or --context, or the pool "
                                  "does not exist yet"))
            continue
        vias = Counter(membership.via for n in nodes if (membership := inv.membership_of(n)) is not None)
        if spec.cluster.cloud == Cloud.EXISTING:
            selector = ",".join(f"{k}={v}" for k, v in sorted((pool.existing.nodeSelector if pool.existing else {})
                                                              .items()))
            results.append(passed(pool.name, f"{len(nodes)} node(s) by the declared nodeSelector "
                                  f"{selector} (on an existing cluster this project never labels the nodes)"))
        elif vias[Via.CLOUD_LABEL]:
            cloud_label = CLOUD_POOL_LABELS[spec.cluster.cloud]
            held = " and the skip label that holds it" if spec.pool_held(pool) else ""
            results.append(warned(pool.name, f"{vias[Via.CLOUD_LABEL]} of {len(nodes)} node(s) "
                                  f"found by the cloud's {cloud_label}, without {labels.POOL}: the first `pulumi up` "
                                  f"of this stack adds it{held} through the pool's node labels"))
        else:
            results.append(passed(pool.name, f"{len(nodes)} node(s) carry {labels.POOL}={pool.name}"))
    return results


@check(CheckId.POOL_ADOPTED, CLUSTER)
def check_pool_adopted(inv: Inventory) -> list[Finding]:
    """On AKS and EKS, each cloud pool the stack declares is its own (its nodes carry the project's pool label, or
    the stage's identity record says the stack has run `up` here), one it adopts (``aks.adopt``/``eks.adopt``), or
    one the cluster does not run yet. Before a first deployment, a pool of that name the cluster runs already and the
    stack does not adopt warns: the first `up` would try to create a second one beside the pool serving traffic (the
    cloud refuses a second of one name, so that `up` fails). An adopted pool the cluster does not run fails."""
    spec = inv.spec
    cloud_label = CLOUD_POOL_LABELS.get(spec.cluster.cloud)
    if cloud_label is None:
        return []  # an existing cluster: the stack creates no cloud pool
    # This stage's identity record: the stack has run `up` on this cluster, so its pools are its own (created or
    # adopted then); only a first deployment can meet a pool of its name it did not make.
    deployed = any(name_of(r) == manifests.identity_name(spec) for r in inv.identity_records)
    results = []
    for pool in spec.nodePools:
        adopted = pool.adopted
        for generation in manifests.pool_generations(pool):  # the cloud pools the program declares
            name = pool.cloud_name(generation)
            nodes = [n for n in inv.nodes if labels_of(n).get(cloud_label) == name]
            ours = [n for n in nodes if labels_of(n).get(labels.POOL) == pool.name]
            subject = pool.name if name == pool.name else f"{pool.name} ({name})"
            if adopted is not None and adopted[0] == name:
                results.append(passed(subject, f"adopts {cloud_label}={name} ({len(nodes)} node(s)): the first `up` "
                                      "imports it") if nodes else
                               failed(subject, f"adopts {adopted[1]}, but no node of the cluster carries "
                                      f"{cloud_label}={name}: wrong ID, cluster or --context"))
            elif len(ours) < len(nodes) and not deployed:
                # Warned here, where the cluster is read as it stands; `plan --from-cluster`, which judges the change
                # the first `up` makes, refuses it (rollout.plan.live_checks).
                results.append(warned(subject, f"the cluster runs {cloud_label}={name} already ({len(nodes)} "
                                      f"node(s)), not created by this stack (no {labels.POOL}): adopt it "
                                      f"(nodePools[].{spec.cluster.cloud}.adopt: its ID, docs/adopt.md), else the "
                                      "first `up` tries to create a second pool of that name"))
            elif nodes:
                results.append(passed(subject, f"{len(nodes)} node(s) of {name}, this stack's own (" + (
                    f"they carry {labels.POOL})" if ours else f"its identity record {manifests.identity_name(spec)} "
                    "says it has run `up` here)")))
            else:
                results.append(passed(subject, f"the cluster runs no {name} yet: the first `up` creates it"))
    return results


def _gfd_count(value: str | None) -> int | None:
    """GFD's ``nvidia.com/gpu.count`` as a number; None when the label is missing or not a count."""
    return int(value) if value is not None and value.isdigit() else None


def _launch_template_only(pool: NodePool) -> bool:
    """An EKS pool whose instance type only its launch template sets: the pack cannot see it, preflight judges it."""
    return pool.eks is not None and pool.eks.launchTemplate is not None and not pool.eks.instanceTypes


@dataclass
class _Seen:
    """What a pool's nodes show against its declaration, node by node, in words."""

    wrong: list[str] = field(default_factory=list)  # a node whose labels or size contradict the declaration
    unlabelled: list[str] = field(default_factory=list)  # GFD has not labelled it yet
    unreadable: list[str] = field(default_factory=list)  # a GPU count that is no number
    unsized: list[str] = field(default_factory=list)  # a launch-template pool's node of no size the table knows


def _judge_gfd(seen: _Seen, name: str, node_labels: dict[str, str], pool: NodePool, mig: bool) -> None:
    product, count_text = node_labels.get(labels.GPU_PRODUCT), node_labels.get(labels.GPU_COUNT)
    if product is None or count_text is None:
        seen.unlabelled.append(name)
        return
    count = _gfd_count(count_text)
    if count is None:
        seen.unreadable.append(f"{name} ({labels.GPU_COUNT}={count_text!r})")
        return
    shows = []
    if not compat.same_gpu_product(product, pool.gpuProduct):
        shows.append(f"{labels.GPU_PRODUCT}={product}")
    if not mig and count != pool.gpusPerNode:
        shows.append(f"{labels.GPU_COUNT}={count}")
    if shows:
        seen.wrong.append(f"{name} shows {', '.join(shows)}")


def gfd_contradiction(name: str, node_labels: dict[str, str], pool: NodePool) -> str | None:
    """What a node's GFD labels show against its pool's declared product and count (None: as declared, or not
    labelled yet), as pool-hardware judges it; the guard's ``gfd-labels`` drift (checks/drift.py) reads it."""
    seen = _Seen()
    _judge_gfd(seen, name, node_labels, pool, pool.migConfig != labels.MIG_CONFIG_DISABLED)
    found = seen.wrong + seen.unreadable
    return found[0] if found else None


def _judge_size(seen: _Seen, name: str, size: str | None, declared: cloud_gpus.Declared, template_only: bool) -> None:
    row = cloud_gpus.any_size(size) if size else None
    if row is not None:
        contradicts = cloud_gpus.contradictions(row, declared)
        if contradicts:
            seen.wrong.append(f"{name} is a {size}, which carries {row.describe()}: {'; '.join(contradicts)}")
    elif template_only:
        seen.unsized.append(f"{name} ({size})" if size else f"{name} (no {labels.INSTANCE_TYPE})")


def _verdict(pool: NodePool, nodes: int, seen: _Seen, mig: bool) -> Finding:
    stated = f"gpuProduct {pool.gpuProduct}, gpusPerNode {pool.gpusPerNode}, nvswitch {str(pool.nvswitch).lower()}"
    if seen.wrong:
        return failed(pool.name, f"declared {stated}, but {few(seen.wrong, 3)}; the declaration drives the canary "
                      "gate, the capacity arithmetic and Fabric Manager: declare what the nodes are, or move the pool "
                      "to nodes that match")
    parts = []
    if seen.unlabelled:
        parts.append(f"{few(seen.unlabelled)} not labelled by GPU Feature Discovery yet (no {labels.GPU_PRODUCT} or "
                     f"{labels.GPU_COUNT}): check again once GFD runs there")
    if seen.unreadable:
        parts.append(f"{few(seen.unreadable)}: not a GPU count")
    if seen.unsized:
        parts.append(f"the launch template sets the instance type and {few(seen.unsized)} is not one "
                     f"{cloud_gpus.TABLE} knows: its hardware was not compared with the size")
    if parts:
        return warned(pool.name, f"declared {stated}; " + "; ".join(parts))
    return passed(pool.name, f"{nodes} node(s) show {pool.gpusPerNode} x {pool.gpuProduct}"
                  f"{' (MIG layout: GPU count not compared)' if mig else ''}, as declared")


@check(CheckId.POOL_HARDWARE, CLUSTER)
def check_pool_hardware(inv: Inventory) -> list[Finding]:
    """Each pool's declared hardware against what its nodes show: GFD's ``nvidia.com/gpu.product`` and
    ``nvidia.com/gpu.count`` (a node GFD has not labelled yet warns), and the node's own size
    (``node.kubernetes.io/instance-type``) where ``gpu_knowledge.cloud_gpus`` knows it; for an EKS pool whose
    launch template sets the type, that size is the only place it is seen (the pack cannot), so a node without
    it, or of a type the table does not know, warns."""
    results = []
    for pool in inv.spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            continue  # pool-membership fails it already
        mig = pool.migConfig != labels.MIG_CONFIG_DISABLED
        declared = cloud_gpus.Declared(pool.gpuProduct, pool.gpusPerNode, pool.nvswitch, mig=mig)
        template_only = _launch_template_only(pool)
        seen = _Seen()
        for node in nodes:
            node_labels = labels_of(node)
            _judge_gfd(seen, name_of(node), node_labels, pool, mig)
            _judge_size(seen, name_of(node), node_labels.get(labels.INSTANCE_TYPE), declared, template_only)
        results.append(_verdict(pool, len(nodes), seen, mig))
    return results
