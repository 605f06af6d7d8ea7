"""`gpu-rollout simulate --from-cluster`: the live fleet as the simulator takes it (:class:`simulate.fleet.Fleet`),
read once, read-only, in preflight's constant number of LISTs (:func:`checks.inventory.read_inventory`).

- Nodes: the stack's pools' nodes (:mod:`fleetspec.membership`), their allocatable GPUs, whether GFD already reports
  ``driver.version`` (then nothing is left to do), the upgrade-state label (a node seen mid-upgrade starts that
  step over), cordoned, Ready, a skip label on a pool the stack has released (paused: it stays), and the pods
  matching the policy's ``waitForCompletion.podSelector`` running there.
- Models: each declared model's pods (its matchLabels in its namespace) and every other GPU Deployment of the
  stack's pools, with the PodDisruptionBudget that selects them (none: nothing stops an eviction), their
  replicas (the Deployment's, else the stack's) and where their pods run; weights from a cache as the
  ``weights-cache`` check judges them. Other GPU pods are placed but followed no further.
- Policies: each NVIDIADriver that carries its own ``upgradePolicy`` (operator v26.7.0+) over the pools whose nodes
  it owns, else the ClusterPolicy's over the rest; an unset key takes the kind's default
  (:mod:`fleetspec.operator`). Without a ClusterPolicy, the stack's own policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checks import kube as k
from checks.disruption import caches_weights, pdb_min_available
from checks.identity import identify_cluster, refuse_if_refuted
from checks.inventory import Inventory, read_inventory
from checks.nodestate import node_driver_version, require_nodes, upgrade_state
from checks.objects import (
    Obj,
    equality_selector,
    gpu_request,
    labels_of,
    meta,
    name_of,
    namespace_of,
    namespaced_name,
    pod_containers,
    selector_matches,
    spec_of,
    status_of,
    template_containers,
)
from checks.owner import driver_owner_of
from checks.progress import pod_ready
from simulate import fleet as sim
from gpu_knowledge import capacity, labels
from fleetspec import operator
from fleetspec.model import DriverOwner, FleetSpec
from gpu_knowledge.versions import parse_chart
from workload.result import driver_matches


def read_fleet(kube: k.Kube, spec: FleetSpec) -> sim.Fleet:
    """Read the cluster once (refusing another cluster, as preflight does) and describe it for the simulator."""
    inventory = read_inventory(kube, spec)
    refuse_if_refuted(kube, identify_cluster(spec, inventory.identity_records, inventory.nodes))
    require_nodes(inventory.pool_nodes, spec, "simulate --from-cluster")
    return fleet_of(inventory)


def fleet_of(inv: Inventory) -> sim.Fleet:
    spec = inv.spec
    if spec.driver.owner != DriverOwner.OPERATOR:
        sim.fleet_from_spec(spec)  # raises NotSimulated with the reason
    groups = _groups(inv)
    wait = {pool: group.policy.wait_selector for group in groups for pool in group.pools}
    nodes = []
    for node in inv.pool_nodes:
        pool_name = inv.pool_of(node)
        assert pool_name is not None
        pool = spec.pool(pool_name)
        node_labels = labels_of(node)
        reported = node_driver_version(node)
        allocatable = (status_of(node).get("allocatable") or {}).get(labels.GPU_RESOURCE)
        nodes.append(sim.Node(
            name=name_of(node), pool=pool_name,
            gpus=_count(allocatable, pool.gpusPerNode),
            needs_upgrade=not (reported and driver_matches(spec.driver.version, reported)),
            state=upgrade_state(node),
            cordoned=bool(spec_of(node).get("unschedulable")),
            ready=_node_ready(node),
            skip=node_labels.get(labels.SKIP_UPGRADE) == "true" and not spec.pool_held(pool),
            jobs=_jobs_on(inv, name_of(node), wait.get(pool_name, "")),
        ))
    models, pods = _models_and_pods(inv)
    validated = spec.validation is not None
    pools = tuple(sim.spec_pool(spec, p, validated) for p in spec.nodePools)
    return sim.Fleet(pools, tuple(nodes), models, groups, spec.simulation, pods, place_replicas=False,
                     source="cluster", per_pool_policies=spec.per_pool_upgrade_policies,
                     wave_dwell_hours=spec.rollout.waveDwellHours)


def _count(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


def _node_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status_of(node).get("conditions") or [])


def _jobs_on(inv: Inventory, node: str, selector: str) -> int:
    """Pods on ``node`` matching a ``waitForCompletion.podSelector`` (equality terms, as the operator's docs
    write them: ``key=value,key2=value2``) that still run."""
    terms = equality_selector(selector) if selector else None
    if not terms:
        return 0
    return sum(1 for p in inv.pods_on(node) if status_of(p).get("phase") in ("Running", "Pending")
               and selector_matches({"matchLabels": terms}, labels_of(p)))


# ---------------------------------------------------------------- models and their pods


def _pdb_of(inv: Inventory, namespace: str, pod_labels: Mapping[str, str]) -> Obj | None:
    """The PDB that selects these pods (the strictest where several do, though the API then refuses every
    eviction)."""
    found = [pdb for pdb in inv.pdbs if namespace_of(pdb) == namespace and spec_of(pdb).get("selector") is not None
             and selector_matches(spec_of(pdb).get("selector"), pod_labels)]
    return max(found, key=lambda pdb: pdb_min_available(pdb, 1_000_000), default=None)


def _models_and_pods(inv: Inventory) -> tuple[tuple[sim.Model, ...], tuple[sim.Pod, ...]]:
    spec = inv.spec
    durations = spec.simulation
    pool_of_node = {name_of(n): inv.pool_of(n) for n in inv.pool_nodes}
    gpu_pods = [p for p in inv.pods if spec_of(p).get("nodeName") in pool_of_node
                and gpu_request(pod_containers(p)) > 0]
    claimed: set[int] = set()
    models: list[sim.Model] = []
    pods: list[sim.Pod] = []

    def add(name: str, namespace: str, members: list[Obj], replicas: int, minimum: int | None, gpus: int,
            pools: set[str], load: int | None) -> None:
        index = len(models)
        pdb = _pdb_of(inv, namespace, labels_of(members[0]) if members else {})
        budget = None if pdb is None else (spec_of(pdb).get("minAvailable"), spec_of(pdb).get("maxUnavailable"))
        if budget is not None and budget[1] is not None:
            budget = (None, budget[1])  # the API refuses both; the controller reads maxUnavailable first
        kept = 0 if pdb is None else pdb_min_available(pdb, replicas)
        cached = any(caches_weights(p) for p in members)
        models.append(sim.Model(
            name, replicas, gpus,
            # Undeclared, without a PDB: every replica counts, as the spare-capacity check judges it.
            minimum if minimum is not None else (kept if pdb is not None else replicas),
            tuple(sorted(pools)), durations.load_seconds(cached, load), budget,
            "" if pdb is None else namespaced_name(pdb)))
        for pod in members:
            claimed.add(id(pod))
            pods.append(sim.Pod(str(spec_of(pod).get("nodeName")), gpus, index, pod_ready(pod), True, name_of(pod)))

    for model in spec.models:
        members = [p for p in gpu_pods if namespace_of(p) == model.namespace
                   and selector_matches({"matchLabels": model.matchLabels}, labels_of(p))]
        deployment = next((d for d in inv.deployments if namespaced_name(d) == f"{model.namespace}/{model.name}"),
                          None)
        replicas = _replicas(deployment, model.replicas)
        pools = {pool_of_node[str(spec_of(p).get("nodeName"))] or "" for p in members} | set(model.nodePools)
        add(f"{model.namespace}/{model.name}", model.namespace, members, replicas,
            capacity.min_available_replicas(model.minAvailable, replicas), model.gpusPerReplica,
            {p for p in pools if p}, model.loadSeconds)
    declared = {(m.namespace, m.name) for m in spec.models}
    for deployment in inv.gpu_deployments():
        if (namespace_of(deployment), name_of(deployment)) in declared:
            continue
        selector = spec_of(deployment).get("selector")
        members = [p for p in gpu_pods if id(p) not in claimed and namespace_of(p) == namespace_of(deployment)
                   and selector_matches(selector, labels_of(p))]
        if not members:
            continue
        replicas = _replicas(deployment, len(members))
        pools = {pool_of_node[str(spec_of(p).get("nodeName"))] or "" for p in members}
        add(namespaced_name(deployment), namespace_of(deployment) or "", members, replicas, None,
            max(1, gpu_request(template_containers(deployment))), {p for p in pools if p}, None)
    for pod in gpu_pods:
        if id(pod) in claimed:
            continue
        owned = any(ref.get("controller") for ref in meta(pod).get("ownerReferences") or [])
        pods.append(sim.Pod(str(spec_of(pod).get("nodeName")), gpu_request(pod_containers(pod)), None,
                            pod_ready(pod), owned, name_of(pod)))
    return tuple(models), tuple(pods)


def _replicas(deployment: Obj | None, default: int) -> int:
    if deployment is None:
        return default
    value = spec_of(deployment).get("replicas")
    return 1 if value is None else int(value)


# ---------------------------------------------------------------- upgrade policies


def _policy(raw: Any, defaults: Mapping[str, object], fallback: sim.Policy) -> sim.Policy:
    """A live ``upgradePolicy`` (the CRD's spelling); an unset or malformed key takes the kind's default, a
    block's keys the stack model's defaults (``fleetspec.operator``)."""
    policy = raw if isinstance(raw, Mapping) else {}

    def top(key: str) -> Any:
        value = policy.get(key)
        return defaults.get(key) if value is None else value

    def sub(block: str, key: str, default: Any) -> Any:
        value = (policy.get(block) or {}).get(key) if isinstance(policy.get(block), Mapping) else None
        return default if value is None or isinstance(value, bool) != isinstance(default, bool) else value

    base = sim.Policy.from_spec(operator.UpgradePolicy())
    parallel = top("maxParallelUpgrades")
    unavailable = top("maxUnavailable")
    try:
        capacity.max_unavailable_nodes(unavailable, 1)
    except ValueError:
        unavailable = fallback.max_unavailable
    return sim.Policy(
        auto_upgrade=bool(top("autoUpgrade")),
        max_parallel=parallel if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel >= 0
        else fallback.max_parallel,
        max_unavailable=unavailable,  # checked just above
        wait_selector=str(sub("waitForCompletion", "podSelector", base.wait_selector)),
        wait_timeout=int(sub("waitForCompletion", "timeoutSeconds", base.wait_timeout)),
        deletion_force=bool(sub("podDeletion", "force", base.deletion_force)),
        deletion_timeout=int(sub("podDeletion", "timeoutSeconds", base.deletion_timeout)),
        drain_enable=bool(sub("drain", "enable", base.drain_enable)),
        drain_force=bool(sub("drain", "force", base.drain_force)),
        drain_timeout=int(sub("drain", "timeoutSeconds", base.drain_timeout)),
    )


def _groups(inv: Inventory) -> tuple[sim.Group, ...]:
    spec = inv.spec
    stack_policy = sim.Policy.from_spec(spec.gpuOperator.upgradePolicy)
    cluster_policy = inv.cluster_policy
    driver = spec_of(cluster_policy or {}).get("driver") or {}
    if cluster_policy is None:
        # No ClusterPolicy to read: the stack's own policy, as `pulumi up` would set it.
        return sim.spec_groups(spec)
    cluster = _policy(driver.get("upgradePolicy"), operator.CLUSTER_POLICY_DEFAULTS, stack_policy)
    version = parse_chart(inv.operator_version or spec.gpuOperator.chartVersion)
    per_driver = bool(driver.get("useNvidiaDriverCRD")) and version is not None and version >= (26, 7, 0)
    by_driver: dict[str, list[str]] = {}
    rest: list[str] = []
    drivers = {name_of(d): d for d in inv.nvidia_drivers or []}
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        owner = driver_owner_of(inv, nodes[0], True) if per_driver and nodes else None
        if owner is not None and isinstance(spec_of(drivers[owner]).get("upgradePolicy"), Mapping):
            by_driver.setdefault(owner, []).append(pool.name)
        else:
            rest.append(pool.name)
    # A malformed key of an NVIDIADriver falls back to what the stack gives its pool (FleetSpec.upgrade_policy).
    groups = [sim.Group(sim.NVIDIA_DRIVER, name, tuple(pools),
                        _policy(spec_of(drivers[name]).get("upgradePolicy"), operator.NVIDIA_DRIVER_POLICY_DEFAULTS,
                                sim.Policy.from_spec(spec.upgrade_policy(spec.pool(pools[0])))))
              for name, pools in sorted(by_driver.items())]
    if rest:
        groups.append(sim.Group(sim.CLUSTER_POLICY, name_of(cluster_policy), tuple(rest), cluster))
    return tuple(groups)


__all__ = ["fleet_of", "read_fleet"]
