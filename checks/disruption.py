"""Capacity and disruption controls (runbook section 2): model-replicas, model-pdb, pdb-blocks-drain,
readiness-probe, spare-capacity, weights-cache, and change-ticket."""

from __future__ import annotations

from checks.inventory import (
    Inventory,
    Obj,
    gpu_request,
    labels_of,
    meta,
    name_of,
    pod_containers,
    selector_matches,
    template_containers,
)
from checks.results import CheckResult, failed, passed, warned
from spec import capacity, labels
from spec.model import Stage

# A pod template annotated so declares its weights baked into (and pre-pulled with) the image.
WEIGHTS_IN_IMAGE = f"{labels.DOMAIN}/weights-in-image"


def _key(obj: Obj) -> str:
    return f"{meta(obj).get('namespace')}/{name_of(obj)}"


def _replicas(deployment: Obj) -> int:
    value = (deployment.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def pdb_min_available(pdb: Obj, replicas: int) -> int:
    """Pods a live PDB keeps available out of ``replicas``, as the disruption controller computes it.

    ``capacity.pdb_disruptions_allowed`` does the arithmetic (``maxUnavailable`` or ``minAvailable``,
    percentages rounded UP; neither protects nothing); this is ``replicas`` minus what it allows.
    """
    spec = pdb.get("spec") or {}
    max_unavailable = spec.get("maxUnavailable")
    # The API refuses a PDB with both; should one come through, maxUnavailable wins, as in the controller.
    min_available = spec.get("minAvailable") if max_unavailable is None else None
    return replicas - capacity.pdb_disruptions_allowed(min_available, max_unavailable, replicas)


def workload_min_available(inv: Inventory, deployment: Obj) -> int:
    """The strictest minimum any PDB selecting the Deployment's pods enforces (0 without a PDB)."""
    replicas = _replicas(deployment)
    return max((pdb_min_available(p, replicas) for p in inv.pdbs_for(deployment)), default=0)


def check_model_replicas(inv: Inventory) -> list[CheckResult]:
    results = []
    by_key = {_key(d): d for d in inv.deployments}
    declared = set()
    for model in inv.spec.models:
        key = f"{model.namespace}/{model.name}"
        declared.add(key)
        deployment = by_key.get(key)
        if deployment is None:
            results.append(_replicas_from_pods(inv, model, key))
        elif _replicas(deployment) < 2:
            results.append(failed("model-replicas", key, f"{_replicas(deployment)} replica: gone the moment its node "
                                  "drains; run at least 2"))
        else:
            results.append(passed("model-replicas", key, f"{_replicas(deployment)} replicas "
                                  f"(stack declares {model.replicas})"))
    for deployment in inv.gpu_deployments():
        key = _key(deployment)
        if key not in declared and _replicas(deployment) < 2:
            results.append(failed("model-replicas", key, f"GPU Deployment not in the stack with "
                                  f"{_replicas(deployment)} replica"))
    return results


def _replicas_from_pods(inv: Inventory, model, key: str) -> CheckResult:
    """A model that is no Deployment named after itself (StatefulSet, LeaderWorkerSet, KServe, bare pods):
    its replicas are the pods matching its matchLabels in its namespace, whatever owns them."""
    pods = [p for p in inv.pods if meta(p).get("namespace") == model.namespace
            and selector_matches({"matchLabels": model.matchLabels}, labels_of(p))]
    if not pods:
        return failed("model-replicas", key, "declared in the stack but neither a Deployment of that name nor a pod "
                      "matching its matchLabels in its namespace")
    owners = sorted({f"{ref.get('kind')} {ref.get('name')}" for p in pods
                     for ref in meta(p).get("ownerReferences") or [] if ref.get("controller")}) or ["no controller"]
    if len(pods) < 2:
        return failed("model-replicas", key, f"1 pod ({', '.join(owners)}): gone the moment its node drains; run "
                      "at least 2")
    return passed("model-replicas", key, f"{len(pods)} pods ({', '.join(owners)}; stack declares {model.replicas})")


def check_model_pdb(inv: Inventory) -> list[CheckResult]:
    results = []
    for deployment in inv.gpu_deployments():
        pdbs = inv.pdbs_for(deployment)
        if pdbs:
            results.append(passed("model-pdb", _key(deployment), f"PDB {', '.join(name_of(p) for p in pdbs)}"))
        else:
            results.append(failed("model-pdb", _key(deployment), "no PodDisruptionBudget selects its pods"))
    return results


def check_pdb_blocks_drain(inv: Inventory) -> list[CheckResult]:
    results = []
    for deployment in inv.gpu_deployments():
        replicas = _replicas(deployment)
        for pdb in inv.pdbs_for(deployment):
            spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
            subject = f"{meta(pdb).get('namespace')}/{name_of(pdb)}"
            allowed = status.get("disruptionsAllowed")
            minimum = pdb_min_available(pdb, replicas)
            blocks = []
            if replicas > 0 and minimum >= replicas:
                rule = (f"maxUnavailable {spec['maxUnavailable']}" if spec.get("maxUnavailable") is not None
                        else f"minAvailable {spec.get('minAvailable')}")
                blocks.append(f"{rule} keeps all {replicas} replicas ({minimum}) available: no eviction is allowed")
            if allowed == 0:
                blocks.append("0 disruptions allowed now (unhealthy pods?)")
            if blocks:
                results.append(failed("pdb-blocks-drain", subject, "blocks every drain, so the upgrade would stall on "
                                      "the first node: " + "; ".join(blocks)))
            else:
                results.append(passed("pdb-blocks-drain", subject, f"{allowed} disruption(s) allowed now, "
                                      f"keeps {minimum} of {replicas}"))
    return results


def check_readiness_probe(inv: Inventory) -> list[CheckResult]:
    results = []
    for deployment in inv.gpu_deployments():
        missing = [c.get("name", "?") for c in template_containers(deployment)
                   if gpu_request([c]) > 0 and not c.get("readinessProbe")]
        if missing:
            results.append(failed("readiness-probe", _key(deployment), f"container(s) {', '.join(missing)} have no "
                                  "readinessProbe: traffic would reach pods still loading weights"))
        else:
            results.append(passed("readiness-probe", _key(deployment), "every GPU container has a readinessProbe"))
    return results


def check_spare_capacity(inv: Inventory) -> list[CheckResult]:
    results = []
    gpu_deployments = inv.gpu_deployments()
    for pool in inv.spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        measured = capacity.spare_capacity(
            capacity.NodeGpus(
                name_of(n),
                int(((n.get("status") or {}).get("allocatable") or {}).get(labels.GPU_RESOURCE, 0) or 0),
                sum(gpu_request(pod_containers(p)) for p in inv.pods_on(name_of(n))),
            )
            for n in nodes
        )
        text = (f"{measured.allocatable} GPUs allocatable, {measured.requested} requested, spare {measured.spare} "
                f"vs largest node {measured.largest_node}")
        if not nodes:
            results.append(failed("spare-capacity", pool.name, "no nodes found for the pool"))
        elif measured.covers_one_node:
            results.append(passed("spare-capacity", pool.name, text))
        else:
            workloads = _workloads_on(inv, gpu_deployments, {name_of(n) for n in nodes})
            # GPU pods outside the Deployments (jobs, bare pods) use capacity too; no PDB protects them.
            other = measured.requested - capacity.requested_gpus(workloads)
            if other > 0:
                workloads.append(capacity.Workload("other GPU pods", other, 1, 0))
            shape = capacity.PoolShape(pool.name, len(nodes), measured.largest_node)
            loss = capacity.take_nodes_out(shape, workloads, 1)
            if loss.below_min:
                results.append(failed("spare-capacity", pool.name, f"{text}: taking one node out can drop "
                                      f"{', '.join(loss.below_min)} below minAvailable"))
            else:
                results.append(warned("spare-capacity", pool.name, f"{text}: evicted pods stay Pending until the "
                                      "node returns (PDBs still hold); add a node or surge"))
    return results


def _workloads_on(inv: Inventory, deployments: list[Obj], node_names: set[str]) -> list[capacity.Workload]:
    workloads = []
    for deployment in deployments:
        if not any((p.get("spec") or {}).get("nodeName") in node_names for p in inv.pods_of(deployment)):
            continue
        # No PDB: nothing stops an eviction, but losing every replica still takes the model down;
        # judge it as if all replicas had to stay (the model-pdb check fails it on its own).
        minimum = workload_min_available(inv, deployment) if inv.pdbs_for(deployment) else _replicas(deployment)
        workloads.append(capacity.Workload(_key(deployment), _replicas(deployment), max(1, gpu_request(
            template_containers(deployment))), minimum))
    return workloads


def _caches_weights(pod: Obj) -> bool:
    if (meta(pod).get("annotations") or {}).get(WEIGHTS_IN_IMAGE) == "true":
        return True
    # A generic ephemeral volume is a PVC created and deleted with the pod: empty on every reschedule.
    return any("persistentVolumeClaim" in v or "hostPath" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def check_weights_cache(inv: Inventory) -> list[CheckResult]:
    results = []
    for deployment in inv.gpu_deployments():
        pods = inv.pods_of(deployment)
        uncached = [name_of(p) for p in pods if not _caches_weights(p)]
        if uncached:
            results.append(warned("weights-cache", _key(deployment), f"{len(uncached)} pod(s) load weights without a "
                                  f"PVC, host path or pre-pulled image ({WEIGHTS_IN_IMAGE}=true): rescheduled pods "
                                  "take 20+ minutes"))
        else:
            results.append(passed("weights-cache", _key(deployment), f"{len(pods)} pod(s) load weights from a cache"))
    return results


def check_change_ticket(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    if spec.changeTicket:
        return [passed("change-ticket", "stack", f"change ticket {spec.changeTicket}")]
    if spec.stage == Stage.PROD:
        return [failed("change-ticket", "stack", "prod needs changeTicket set (and model owners told)")]
    return [warned("change-ticket", "stack", "no changeTicket; raise one and tell the model owners")]


