"""The stack's cluster (runbook: "Which cluster the live commands reach", "Pool membership"):
cluster-identity, pool-membership.

Another cluster never gets this far: preflight refuses it before any check runs
(:func:`checks.identity.refuse_if_refuted`); here an unconfirmed one is a warning.
"""

from __future__ import annotations

from collections import Counter

from checks.identity import Verdict, identify_cluster
from checks.inventory import Inventory, pool_selectors_text
from checks.metadata import CLUSTER, check
from checks.results import Finding, failed, passed, warned
from gpu_knowledge import labels
from fleetspec.membership import CLOUD_POOL_LABELS, Via
from fleetspec.model import Cloud
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
