"""Is the cluster we reached the stack's own? One judgement, used by every live verb before it reads on
or writes anything.

Evidence, strongest first:

- **Identity records.** Each stack's ``pulumi up`` writes ``kube-system/gpu-driver-upgrade-<stage>``
  (label ``gpu-driver-upgrade.io/record=cluster-identity``) with ``cluster`` and, on AKS/EKS, the cloud's
  own names (``renderers.manifests.identity_data``). A record of either stage that names another ``cluster``
  (or another AKS resource group / cluster, EKS cluster / region) refutes; one that names ours confirms.
- **EKS nodes.** A node's ``spec.providerID`` (``aws:///<availability zone>/<instance id>``) and its
  ``topology.kubernetes.io/region`` label put it in a region; an EKS cluster is regional, so a node in
  another region than ``cluster.eks.region`` refutes. Nodes in the region confirm it only weakly (many
  clusters share a region), so they never outweigh a record.
- **AKS nodes.** ``kubernetes.azure.com/cluster`` is the cluster's node resource group, by default
  ``MC_<resource group>_<cluster name>_<location>``. A value that starts with the stack's
  ``MC_<resourceGroup>_<clusterName>_`` confirms. A value of the default shape that names another
  resource group or cluster refutes, unless a record confirms ours (a custom node resource group may
  happen to look like a default one). Any other value is a custom node resource group: no evidence.

Verdict: *refuted* when a record or an EKS region says another cluster (or AKS nodes do and nothing
confirms ours); *confirmed* when some evidence names ours; otherwise *unconfirmed* (first run: no record
yet, and nothing on the nodes to compare): the verbs proceed and say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from checks import kube as k
from checks.errors import WrongClusterError
from checks.objects import Obj, labels_of, meta, name_of, spec_of
from gpu_knowledge import labels
from renderers import manifests
from fleetspec.model import Cloud, FleetSpec

RECORD_SELECTOR = f"{labels.RECORD}={labels.RECORD_CLUSTER_IDENTITY}"
_PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[a-z0-9-]+)/(?P<instance>[^/]+)$")
# The default AKS node resource group: MC_<resource group>_<cluster>_<location>; a location is lowercase
# letters and digits (westeurope, eastus2).
_AKS_DEFAULT_NODE_RG = re.compile(r"^MC_.+_.+_[a-z0-9]+$", re.IGNORECASE)


class Verdict(StrEnum):
    CONFIRMED = "confirmed"
    UNCONFIRMED = "unconfirmed"
    REFUTED = "refuted"


@dataclass(frozen=True)
class ClusterIdentity:
    verdict: Verdict
    expected: str  # the stack's cluster, as the messages name it
    record: str  # the identity record the stack's `pulumi up` writes (namespace/name)
    confirms: tuple[str, ...] = field(default=())  # evidence that this is the stack's cluster
    refutes: tuple[str, ...] = field(default=())  # evidence that it is another
    compared: tuple[str, ...] = field(default=())  # what was looked at, found or not

    @property
    def message(self) -> str:
        if self.verdict == Verdict.REFUTED:
            return (f"this is not the stack's cluster {self.expected}: " + "; ".join(self.refutes)
                    + ". Point --kubeconfig/--context (or cluster.existing) at the stack's cluster")
        if self.verdict == Verdict.CONFIRMED:
            return f"the stack's cluster {self.expected}: " + "; ".join(self.confirms)
        return (f"cannot confirm that this is the stack's cluster {self.expected}: nothing to compare yet ("
                + "; ".join(self.compared) + f"); proceeding. The stack's `pulumi up` writes the identity record "
                f"{self.record}")

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "expected": self.expected, "confirms": list(self.confirms),
                "refutes": list(self.refutes), "message": self.message}


def expected_cluster(spec: FleetSpec) -> str:
    """The stack's cluster as messages name it: its name and the cloud's own names for it."""
    cluster = spec.cluster
    if cluster.aks is not None:
        return f"'{cluster.name}' (AKS {cluster.aks.resourceGroup}/{cluster.aks.clusterName})"
    if cluster.eks is not None:
        return f"'{cluster.name}' (EKS {cluster.eks.clusterName} in {cluster.eks.region})"
    return f"'{cluster.name}'"


def _record_name(record: Obj) -> str:
    return f"{meta(record).get('namespace', manifests.RECORD_NAMESPACE)}/{meta(record).get('name', '?')}"


def _judge_record(spec: FleetSpec, record: Obj) -> tuple[list[str], list[str]]:
    """(confirms, refutes) from one identity record."""
    data = record.get("data") or {}
    ours = manifests.identity_data(spec)
    where = f"identity record {_record_name(record)}"
    if data.get("stage"):
        where += f" (written by the {data['stage']} stack)"
    different = []
    if "cluster" in data and data["cluster"] != ours["cluster"]:
        different.append(f"cluster '{data['cluster']}'")
    # The cloud's own names, where both sides have them; Azure resource group names ignore case.
    for key, fold in (("aksResourceGroup", True), ("aksClusterName", False), ("eksClusterName", False),
                      ("eksRegion", False)):
        theirs, mine = data.get(key), ours.get(key)
        if theirs is None or mine is None:
            continue
        if (theirs.lower() != mine.lower()) if fold else (theirs != mine):
            different.append(f"{key} '{theirs}'")
    if different:
        return [], [f"{where} names {', '.join(different)}"]
    if "cluster" not in data:
        return [], []
    return [f"{where} names cluster '{data['cluster']}'"], []


def _node_region(node: Obj, region: str) -> tuple[str | None, str]:
    """(the region the node is in, where that was read), from its region label, else its provider ID."""
    node_labels = labels_of(node)
    if labels.TOPOLOGY_REGION in node_labels:
        return node_labels[labels.TOPOLOGY_REGION], labels.TOPOLOGY_REGION
    match = _PROVIDER_ID.match(str(spec_of(node).get("providerID") or ""))
    if match is None:
        return None, ""
    zone = match.group("zone")
    # us-east-1a is in us-east-1; so are the local zone us-east-1-bos-1a and the Wavelength us-east-1-wl1-...
    if re.fullmatch(re.escape(region) + r"([a-z]|-.+)", zone):
        return region, "spec.providerID"
    standard = re.fullmatch(r"(?P<region>[a-z]+(?:-[a-z]+)+-\d+)[a-z]", zone)
    return (standard.group("region") if standard else f"the region of {zone}"), "spec.providerID"


def _judge_eks(spec: FleetSpec, nodes: Iterable[Obj]) -> tuple[list[str], list[str], list[str]]:
    assert spec.cluster.eks is not None
    region = spec.cluster.eks.region
    inside = 0
    outside: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        found, source = _node_region(node, region)
        if found is None:
            continue
        if found == region:
            inside += 1
        else:
            outside.setdefault((found, source), []).append(name_of(node) or "?")
    refutes = [f"node(s) {', '.join(sorted(names)[:3])} are in {found} ({source}), not {region}"
               for (found, source), names in sorted(outside.items())]
    weak = [f"{inside} node(s) in {region}"] if inside and not refutes else []
    return weak, refutes, [f"node regions ({labels.TOPOLOGY_REGION}, spec.providerID) against {region}"]


def _judge_aks(spec: FleetSpec, nodes: Iterable[Obj]) -> tuple[list[str], list[str], list[str]]:
    assert spec.cluster.aks is not None
    prefix = f"MC_{spec.cluster.aks.resourceGroup}_{spec.cluster.aks.clusterName}_"
    confirms: dict[str, int] = {}
    others: dict[str, int] = {}
    for node in nodes:
        value = labels_of(node).get(labels.AKS_CLUSTER)
        if not value:
            continue
        if value.lower().startswith(prefix.lower()):
            confirms[value] = confirms.get(value, 0) + 1
        elif _AKS_DEFAULT_NODE_RG.match(value):
            others[value] = others.get(value, 0) + 1
    compared = [f"nodes' {labels.AKS_CLUSTER} against the default node resource group {prefix}<location>"]
    return ([f"{n} node(s) carry {labels.AKS_CLUSTER}={value}" for value, n in sorted(confirms.items())],
            [f"{n} node(s) carry {labels.AKS_CLUSTER}={value}, the default node resource group of another "
             f"cluster (the stack's would start {prefix})" for value, n in sorted(others.items())],
            compared)


def identify_cluster(spec: FleetSpec, records: list[Obj], nodes: list[Obj]) -> ClusterIdentity:
    """The verdict from the identity records and the nodes (pure)."""
    expected = expected_cluster(spec)
    record = f"{manifests.RECORD_NAMESPACE}/{manifests.identity_name(spec)}"
    strong_confirms: list[str] = []
    strong_refutes: list[str] = []
    for found_record in sorted(records, key=_record_name):
        confirms, refutes = _judge_record(spec, found_record)
        strong_confirms += confirms
        strong_refutes += refutes
    compared = [f"{len(records)} identity record(s) in {manifests.RECORD_NAMESPACE} ({RECORD_SELECTOR})"]
    weak_confirms: list[str] = []
    weak_refutes: list[str] = []
    if spec.cluster.cloud == Cloud.EKS:
        weak_confirms, region_refutes, seen = _judge_eks(spec, nodes)
        strong_refutes += region_refutes  # a node in another region cannot be in this regional cluster
        compared += seen
    elif spec.cluster.cloud == Cloud.AKS:
        node_confirms, node_refutes, seen = _judge_aks(spec, nodes)
        compared += seen
        strong_confirms += node_confirms  # the default node resource group names the cluster itself
        weak_refutes = node_refutes
    if strong_refutes or (weak_refutes and not strong_confirms):
        return ClusterIdentity(Verdict.REFUTED, expected, record, tuple(strong_confirms), tuple(strong_refutes + weak_refutes),
                               tuple(compared))
    if strong_confirms:
        return ClusterIdentity(Verdict.CONFIRMED, expected, record, tuple(strong_confirms), tuple(weak_refutes),
                               tuple(compared))
    return ClusterIdentity(Verdict.UNCONFIRMED, expected, record, tuple(weak_confirms), (), tuple(compared))


def kube_system_uid(kube: k.Kube) -> str | None:
    """``metadata.uid`` of the ``kube-system`` Namespace: set by the API server when the cluster was made, so
    another cluster, even one of the same name, shows another (the canary's attestation records it)."""
    uid = meta(kube.get(k.NAMESPACES, manifests.RECORD_NAMESPACE)).get("uid")
    return str(uid) if uid else None


def read_records(kube: k.Kube) -> list[Obj]:
    """Every stack's identity record in the cluster (one LIST in kube-system)."""
    return kube.list(k.CONFIGMAPS, namespace=manifests.RECORD_NAMESPACE, label_selector=RECORD_SELECTOR)


def require_stack_cluster(kube: k.Kube, spec: FleetSpec, nodes: list[Obj] | None = None) -> ClusterIdentity:
    """The verdict for the cluster ``kube`` reaches; raises :class:`WrongClusterError` when it is another.

    ``nodes`` are every node of the cluster when the caller listed them already; else they are listed here.
    """
    records = read_records(kube)
    if nodes is None:
        nodes = kube.list(k.NODES) if spec.cluster.cloud in (Cloud.AKS, Cloud.EKS) else []
    identity = identify_cluster(spec, records, nodes)
    refuse_if_refuted(kube, identity)
    return identity


def refuse_if_refuted(kube: k.Kube, identity: ClusterIdentity) -> None:
    if identity.verdict == Verdict.REFUTED:
        raise WrongClusterError(f"refusing to act on {kube.where}: {identity.message}")
