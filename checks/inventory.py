"""One read of the cluster for preflight: a fixed number of LISTs, whatever the fleet's size.

One LIST of every node, classified in memory (a pool's nodes are found by the project's pool label, the
cloud's pool label or the declared selector: :func:`fleetspec.membership.node_membership`, which no single
label selector can express); one LIST each of pods, Deployments and PDBs across namespaces, the
operator's DaemonSets, ClusterPolicies and NVIDIADrivers, and the stacks' identity records in
kube-system. Everything else is derived in memory.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from checks import kube as k
from checks.attested import AttestedDrivers
from checks.quota import SurgeQuota
from checks.identity import read_records
from checks.node_os_channel import NodeOsChannel
from checks.registry import RegistryAnswers
from checks.objects import (
    Obj,
    gpu_request,
    labels_of,
    name_of,
    namespace_of,
    selector_matches,
    spec_of,
    template_containers,
    template_labels,
)
from gpu_knowledge import labels
from renderers import manifests
from fleetspec.membership import Membership, describe_selectors, node_membership, pool_node_selectors
from fleetspec.model import FleetSpec, NodePool


def memberships(spec: FleetSpec, nodes: list[Obj]) -> dict[str, Membership]:
    """Node name -> the stack pool it belongs to, for the nodes of ``nodes`` that are in one."""
    found = {}
    for node in nodes:
        membership = node_membership(spec, labels_of(node))
        if membership is not None:
            found[name_of(node)] = membership
    return found


def pool_nodes_of(spec: FleetSpec, nodes: list[Obj]) -> list[tuple[Obj, Membership]]:
    """The nodes of the stack's pools among ``nodes``, each with its membership, by name."""
    found = memberships(spec, nodes)
    return sorted(((n, found[name_of(n)]) for n in nodes if name_of(n) in found), key=lambda pair: name_of(pair[0]))


def pool_selectors_text(spec: FleetSpec, pools: list[NodePool] | None = None) -> str:
    """How messages name the labels a pool's nodes are found by, pool by pool."""
    return "; ".join(f"{pool.name}: {describe_selectors(pool_node_selectors(spec, pool))}"
                     for pool in (spec.nodePools if pools is None else pools))


@dataclass
class Inventory:
    spec: FleetSpec
    nodes: list[Obj]  # every node of the cluster
    pool_nodes: list[Obj]  # the nodes of the stack's pools (fleetspec.membership)
    gpu_nodes: list[Obj]  # every GPU node: the stack's pools plus any other node with gpu.present=true
    pods: list[Obj]
    deployments: list[Obj]
    pdbs: list[Obj]
    operator_daemonsets: list[Obj]
    cluster_policies: list[Obj] | None  # None: the CRD is not installed
    nvidia_drivers: list[Obj] | None
    identity_records: list[Obj] = field(default_factory=list)
    attested: AttestedDrivers = field(default_factory=AttestedDrivers)  # the canary's, of the promoted drivers
    registry: RegistryAnswers = field(default_factory=RegistryAnswers)  # precompiled driver images, asked before the checks
    node_os_channel: NodeOsChannel = field(default_factory=NodeOsChannel)  # AKS: read from ARM before the checks
    surge_quota: SurgeQuota | None = None  # the region's quota against surge (checks.quota); None: not read
    membership: dict[str, Membership] = field(default_factory=dict, init=False)
    _pods_by_node: dict[str, list[Obj]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.membership = memberships(self.spec, self.pool_nodes)
        by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in self.pods:
            node = spec_of(pod).get("nodeName")
            if node:
                by_node[node].append(pod)
        self._pods_by_node = dict(by_node)

    @property
    def cluster_policy(self) -> Obj | None:
        """The ClusterPolicy the stack patches and the chart creates, by name (``cluster-policy``); the
        operator reconciles only one, and a differently named one is not the stack's (``cluster-policy``
        check)."""
        return next((p for p in self.cluster_policies or [] if name_of(p) == manifests.CLUSTER_POLICY_NAME), None)

    def pool_of(self, node: Obj) -> str | None:
        membership = self.membership.get(name_of(node))
        return membership.pool.name if membership else None

    def membership_of(self, node: Obj) -> Membership | None:
        return self.membership.get(name_of(node))

    def nodes_of_pool(self, pool: str) -> list[Obj]:
        return [n for n in self.pool_nodes if self.pool_of(n) == pool]

    def pods_on(self, node: str) -> list[Obj]:
        return self._pods_by_node.get(node, [])

    def driver_pods_on(self, node: str) -> list[Obj]:
        namespace = self.spec.gpuOperator.namespace
        return [
            p for p in self.pods_on(node)
            if namespace_of(p) == namespace
            and any(labels_of(p).get(key) == value for key, value in labels.DRIVER_POD_LABELS)
        ]

    @property
    def operator_version(self) -> str | None:
        """The GPU Operator release running now: the tag of the gpu-operator Deployment's image."""
        for deployment in self.deployments:
            for container in template_containers(deployment):
                repo, _, tag = container.get("image", "").rpartition(":")
                if repo.endswith("/gpu-operator") and tag:
                    return tag
        return None

    def gpu_deployments(self) -> list[Obj]:
        """Deployments whose pods ask for GPUs, declared as models or not, that this stack's upgrade can
        disrupt: a pod of theirs runs on a node of the stack's pools, or the stack declares them (a model
        scaled to zero still needs its budget). Another stack's model servers on other pools are not this
        stack's upgrade's business (a canary preflight must not fail on prod's)."""
        pool_nodes = {name_of(n) for n in self.pool_nodes}
        declared = {(m.namespace, m.name) for m in self.spec.models}
        return [
            d for d in self.deployments
            if gpu_request(template_containers(d)) > 0
            and ((namespace_of(d), name_of(d)) in declared
                 or any(spec_of(p).get("nodeName") in pool_nodes for p in self.pods_of(d)))
        ]

    def pdbs_for(self, workload: Obj) -> list[Obj]:
        namespace = namespace_of(workload)
        pod_labels = template_labels(workload)
        # policy/v1: a null selector selects no pod, an empty one ({}) every pod of the namespace.
        return [
            pdb for pdb in self.pdbs
            if namespace_of(pdb) == namespace
            and spec_of(pdb).get("selector") is not None
            and selector_matches(spec_of(pdb).get("selector"), pod_labels)
        ]

    def pods_of(self, workload: Obj) -> list[Obj]:
        namespace = namespace_of(workload)
        selector = spec_of(workload).get("selector")
        return [p for p in self.pods if namespace_of(p) == namespace and selector_matches(selector, labels_of(p))]


def read_inventory(kube: k.Kube, spec: FleetSpec, attested: AttestedDrivers | None = None) -> Inventory:
    """Everything preflight needs, read once, beside the canary's attestations read from the project
    (``attested``; none given: not read). Any failed LIST raises: no partial inventory."""
    nodes = kube.list(k.NODES)
    pool_nodes = [node for node, _ in pool_nodes_of(spec, nodes)]
    seen = {name_of(n) for n in pool_nodes}
    gpu_nodes = pool_nodes + [n for n in nodes if name_of(n) not in seen
                              and labels_of(n).get(labels.GPU_PRESENT) == "true"]
    return Inventory(
        spec=spec,
        nodes=nodes,
        pool_nodes=pool_nodes,
        gpu_nodes=gpu_nodes,
        pods=kube.list(k.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed"),
        deployments=kube.list(k.DEPLOYMENTS),
        pdbs=kube.list(k.PDBS),
        operator_daemonsets=kube.list(k.DAEMONSETS, namespace=spec.gpuOperator.namespace),
        cluster_policies=kube.list_optional(k.CLUSTER_POLICIES),
        nvidia_drivers=kube.list_optional(k.NVIDIA_DRIVERS),
        identity_records=read_records(kube),
        attested=attested if attested is not None else AttestedDrivers(),
    )
