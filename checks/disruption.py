"""Capacity and disruption controls (runbook section 2): spare-capacity, surge-quota, model-replicas, model-pdb,
pdb-blocks-drain, readiness-probe, weights-cache, batch-jobs, model-metrics.

Whether every model keeps what its PodDisruptionBudget promises while one node at a time drains, and
comes back quickly: the arithmetic is :mod:`gpu_knowledge.capacity`, shared with the policy pack.
"""

from __future__ import annotations

from checks import quota
from checks.inventory import Inventory
from checks.objects import (
    Obj,
    equality_selector,
    owned_by,
    annotations_of,
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
from checks.metadata import CAPACITY, check
from checks.results import Finding, failed, few, passed, warned
from gpu_knowledge import capacity, labels
from fleetspec import serving
from fleetspec.model import DriverOwner, FleetSpec, Model, NodePool, Stage
from vocabulary.check_ids import CheckId


def _replicas(deployment: Obj) -> int:
    value = spec_of(deployment).get("replicas")
    return 1 if value is None else int(value)


def pdb_min_available(pdb: Obj, replicas: int) -> int:
    """Pods a live PDB keeps available out of ``replicas``, as the disruption controller computes it.

    ``capacity.pdb_disruptions_allowed`` does the arithmetic (``maxUnavailable`` or ``minAvailable``,
    percentages rounded UP; neither protects nothing); this is ``replicas`` minus what it allows.
    """
    budget = spec_of(pdb)
    max_unavailable = budget.get("maxUnavailable")
    # The API refuses a PDB with both; should one come through, maxUnavailable wins, as in the controller.
    min_available = budget.get("minAvailable") if max_unavailable is None else None
    return replicas - capacity.pdb_disruptions_allowed(min_available, max_unavailable, replicas)


def workload_min_available(inv: Inventory, deployment: Obj) -> int:
    """The strictest minimum any PDB selecting the Deployment's pods enforces (0 without a PDB)."""
    replicas = _replicas(deployment)
    return max((pdb_min_available(p, replicas) for p in inv.pdbs_for(deployment)), default=0)


@check(CheckId.SPARE_CAPACITY, CAPACITY)
def check_spare_capacity(inv: Inventory) -> list[Finding]:
    results = []
    gpu_deployments = inv.gpu_deployments()
    spec = inv.spec
    found = {pool.name: inv.nodes_of_pool(pool.name) for pool in spec.nodePools}
    for pool in spec.nodePools:
        nodes = found[pool.name]
        measured = capacity.spare_capacity(
            capacity.NodeGpus(
                name_of(n),
                int((status_of(n).get("allocatable") or {}).get(labels.GPU_RESOURCE, 0) or 0),
                sum(gpu_request(pod_containers(p)) for p in inv.pods_on(name_of(n))),
            )
            for n in nodes
        )
        # While a node upgrades, the validation job may hold every GPU of the node upgraded before it: the same
        # arithmetic as the capacity policy (capacity.gpus_out_of_service), with what the job requests here.
        validating = min(spec.validation_gpus(pool), measured.largest_node)
        shape = capacity.PoolShape(pool.name, len(nodes), measured.largest_node)
        out, policy = _nodes_out(spec, pool, found)
        out = min(out, len(nodes))
        needed = capacity.gpus_out_of_service(shape, out, validating) if nodes else 0
        held = f" + {validating} held by the validation job" if validating and needed > out * measured.largest_node else ""
        at_once = f" x {out} at once ({policy})" if out > 1 else ""
        text = (f"{measured.allocatable} GPUs allocatable, {measured.requested} requested, spare {measured.spare} "
                f"vs largest node {measured.largest_node}{at_once}{held}")
        if not nodes:
            results.append(failed(pool.name, "no nodes found for the pool"))
        elif measured.largest_node > 0 and measured.spare >= needed:
            results.append(passed(pool.name, text))
        else:
            workloads = _workloads_on(inv, gpu_deployments, {name_of(n) for n in nodes})
            # GPU pods outside the Deployments (jobs, bare pods) use capacity too; no PDB protects them.
            other = measured.requested - capacity.requested_gpus(workloads)
            if other > 0:
                workloads.append(capacity.Workload("other GPU pods", other, 1, 0))
            loss = capacity.take_nodes_out(shape, workloads, max(out, 1), validating)
            if loss.below_min:
                what = "one node" if out <= 1 else f"{out} nodes"
                results.append(failed(pool.name, f"{text}: taking {what} out can drop "
                                      f"{', '.join(loss.below_min)} below minAvailable"))
            else:
                results.append(warned(pool.name, f"{text}: evicted pods stay Pending until the "
                                      "node returns (PDBs still hold); add a node or surge"))
    return results


@check(CheckId.SURGE_QUOTA, CAPACITY)
def check_surge_quota(inv: Inventory) -> list[Finding]:
    """Where a pool relies on surge, the region's GPU quota must hold the nodes that arrive (checks.quota); a quota
    not read is a warning that says why, never a pass."""
    found = inv.surge_quota or quota.read_surge_quota(inv.spec, inv.pool_nodes, None)
    if not found.needs and found.not_read is None:
        return [passed("cluster", "no pool relies on surge: no new generation's nodes arrive beside the old ones, and "
                       "no pool's nodes move to another Kubernetes version (the driver itself upgrades in place)")]
    if found.not_read is not None:
        return [warned("cluster", f"quota not read: {found.not_read}; surge needs: "
                       f"{quota.vcpus_needed(found.needs) or 'unknown'} (optional: docs/runbook.md, quota)")]
    return [(passed if j.ok else failed)(j.subject, j.message) for j in found.judged]


def _nodes_out(spec: FleetSpec, pool: NodePool, found: dict[str, list[Obj]]) -> tuple[int, str]:
    """Nodes of ``pool`` the operator may upgrade at once by the policy that rolls it (``FleetSpec.upgrade_policy``:
    its NVIDIADriver's in per-pool mode, else the ClusterPolicy's over every pool's nodes), the same arithmetic as
    policy parallelism-within-spare-capacity (``capacity.policy_nodes_out``); at least one. Where the node image
    owns the driver no operator policy rolls it: one node, as a node image upgrade takes it."""
    if spec.driver.owner != DriverOwner.OPERATOR:
        return 1, ""
    policy = spec.upgrade_policy(pool)
    rolled = (len(found[pool.name]) if spec.per_pool_upgrade_policies
              else sum(len(nodes) for nodes in found.values()))
    own = "nodePools[].upgradePolicy" if pool.upgradePolicy is not None else "gpuOperator.upgradePolicy"
    words = f"{own}: maxParallelUpgrades {policy.maxParallelUpgrades}, maxUnavailable {policy.maxUnavailable}"
    return max(1, capacity.policy_nodes_out(policy.maxParallelUpgrades, policy.maxUnavailable, rolled,
                                            len(found[pool.name]))), words


def _workloads_on(inv: Inventory, deployments: list[Obj], node_names: set[str]) -> list[capacity.Workload]:
    workloads = []
    for deployment in deployments:
        if not any(spec_of(p).get("nodeName") in node_names for p in inv.pods_of(deployment)):
            continue
        # No PDB: nothing stops an eviction, but losing every replica still takes the model down;
        # judge it as if all replicas had to stay (the model-pdb check fails it on its own).
        minimum = workload_min_available(inv, deployment) if inv.pdbs_for(deployment) else _replicas(deployment)
        workloads.append(capacity.Workload(namespaced_name(deployment), _replicas(deployment), max(1, gpu_request(
            template_containers(deployment))), minimum))
    return workloads


@check(CheckId.MODEL_REPLICAS, CAPACITY)
def check_model_replicas(inv: Inventory) -> list[Finding]:
    results = []
    by_key = {namespaced_name(d): d for d in inv.deployments}
    declared = set()
    for model in inv.spec.models:
        key = f"{model.namespace}/{model.name}"
        declared.add(key)
        deployment = by_key.get(key)
        if deployment is None:
            results.append(_replicas_from_pods(inv, model, key))
        elif _replicas(deployment) < 2:
            results.append(failed(key, f"{_replicas(deployment)} replica: gone the moment its node "
                                  "drains; run at least 2"))
        else:
            results.append(passed(key, f"{_replicas(deployment)} replicas (stack declares {model.replicas})"))
    for deployment in inv.gpu_deployments():
        key = namespaced_name(deployment)
        if key not in declared and _replicas(deployment) < 2:
            results.append(failed(key, f"GPU Deployment not in the stack with {_replicas(deployment)} replica"))
    return results


def _replicas_from_pods(inv: Inventory, model: Model, key: str) -> Finding:
    """A model that is no Deployment named after itself (StatefulSet, LeaderWorkerSet, KServe, bare pods):
    its replicas are the pods matching its matchLabels in its namespace, whatever owns them."""
    pods = [p for p in inv.pods if namespace_of(p) == model.namespace
            and selector_matches({"matchLabels": model.matchLabels}, labels_of(p))]
    if not pods:
        return failed(key, "declared in the stack but neither a Deployment of that name nor a pod "
                      "matching its matchLabels in its namespace")
    owners = sorted({f"{ref.get('kind')} {ref.get('name')}" for p in pods
                     for ref in meta(p).get("ownerReferences") or [] if ref.get("controller")}) or ["no controller"]
    if len(pods) < 2:
        return failed(key, f"1 pod ({', '.join(owners)}): gone the moment its node drains; run at least 2")
    return passed(key, f"{len(pods)} pods ({', '.join(owners)}; stack declares {model.replicas})")


@check(CheckId.MODEL_PDB, CAPACITY)
def check_model_pdb(inv: Inventory) -> list[Finding]:
    results = []
    for deployment in inv.gpu_deployments():
        pdbs = inv.pdbs_for(deployment)
        if pdbs:
            results.append(passed(namespaced_name(deployment), f"PDB {', '.join(name_of(p) for p in pdbs)}"))
        else:
            results.append(failed(namespaced_name(deployment), "no PodDisruptionBudget selects its pods"))
    return results


@check(CheckId.PDB_BLOCKS_DRAIN, CAPACITY)
def check_pdb_blocks_drain(inv: Inventory) -> list[Finding]:
    results = []
    for deployment in inv.gpu_deployments():
        replicas = _replicas(deployment)
        for pdb in inv.pdbs_for(deployment):
            budget = spec_of(pdb)
            subject = namespaced_name(pdb)
            allowed = status_of(pdb).get("disruptionsAllowed")
            minimum = pdb_min_available(pdb, replicas)
            blocks = []
            if replicas > 0 and minimum >= replicas:
                rule = (f"maxUnavailable {budget['maxUnavailable']}" if budget.get("maxUnavailable") is not None
                        else f"minAvailable {budget.get('minAvailable')}")
                blocks.append(f"{rule} keeps all {replicas} replicas ({minimum}) available: no eviction is allowed")
            if allowed == 0:
                blocks.append("0 disruptions allowed now (unhealthy pods?)")
            if blocks:
                results.append(failed(subject, "blocks every drain, so the upgrade would stall on "
                                      "the first node: " + "; ".join(blocks)))
            else:
                results.append(passed(subject, f"{allowed} disruption(s) allowed now, keeps {minimum} of {replicas}"))
    return results


def _declared_engines(inv: Inventory) -> dict[str, str]:
    """namespace/name -> serving engine, for the models the stack declares (``serving.engine`` or the image)."""
    return {f"{m.namespace}/{m.name}": engine for m in inv.spec.models if (engine := serving.engine_of_model(m))}


def _probe_verdict(container: Obj, engine: str | None) -> tuple[str, str]:
    """("pass" | "warn" | "fail", why) for one GPU container. A model server must prove its model is loaded: an
    HTTP readiness or startup probe on the engine's own health route (or a gRPC one where the engine serves the
    health service); a TCP probe passes as soon as the port is open, which vLLM opens before loading weights."""
    probes = {kind: container[kind] for kind in ("readinessProbe", "startupProbe") if container.get(kind)}
    name = container.get("name", "?")
    if engine is None:
        if "readinessProbe" not in probes:
            return "fail", f"container {name} has no readinessProbe: traffic would reach pods still loading weights"
        return "pass", f"container {name} has a readinessProbe"
    routes = " or ".join(serving.HEALTH_ROUTES[engine])
    if not probes:
        return "fail", (f"{engine} container {name} has no readinessProbe: traffic would reach pods still loading "
                        f"weights; probe GET {routes}")
    for kind, probe in probes.items():
        http = probe.get("httpGet") or {}
        if http and serving.answers_when_loaded(engine, str(http.get("path") or "/")):
            return "pass", f"{engine} container {name}: {kind} GET {http.get('path')} answers once the model is loaded"
        if probe.get("grpc") is not None and engine in serving.GRPC_HEALTH:
            return "pass", f"{engine} container {name}: {kind} on the gRPC health service"
    if all("tcpSocket" in p for p in probes.values()):
        return "fail", (f"{engine} container {name} has only a TCP probe: it passes once the port is open, before "
                        f"the model is loaded; probe GET {routes}")
    shown = "; ".join(f"{kind} {_probe_text(p)}" for kind, p in probes.items())
    return "warn", (f"{engine} container {name}: {shown} is not {engine}'s own health route: make sure it answers only "
                    f"once the model is loaded, or probe GET {routes}")


def _probe_text(probe: Obj) -> str:
    if probe.get("httpGet"):
        return f"GET {probe['httpGet'].get('path') or '/'}"
    if probe.get("exec"):
        return "exec"
    if probe.get("grpc") is not None:
        return "gRPC"
    return "TCP" if probe.get("tcpSocket") else "of no known kind"


@check(CheckId.READINESS_PROBE, CAPACITY)
def check_readiness_probe(inv: Inventory) -> list[Finding]:
    results = []
    declared = _declared_engines(inv)
    for deployment in inv.gpu_deployments():
        key = namespaced_name(deployment)
        verdicts = [
            _probe_verdict(c, declared.get(key) or serving.engine_of_image(c.get("image", "")))
            for c in template_containers(deployment) if gpu_request([c]) > 0
        ]
        worst = next((v for level in ("fail", "warn") for v in verdicts if v[0] == level), None)
        if worst is None:
            results.append(passed(key, "; ".join(why for _, why in verdicts)))
        elif worst[0] == "fail":
            results.append(failed(key, worst[1]))
        else:
            results.append(warned(key, worst[1]))
    return results


def caches_weights(pod: Obj) -> bool:
    """The pod loads its weights from a cache: baked into its image (annotated), a PVC or a host path."""
    if annotations_of(pod).get(labels.ANNOTATION_WEIGHTS_IN_IMAGE) == "true":
        return True
    # A generic ephemeral volume is a PVC created and deleted with the pod: empty on every reschedule.
    return any("persistentVolumeClaim" in v or "hostPath" in v for v in spec_of(pod).get("volumes") or [])


@check(CheckId.WEIGHTS_CACHE, CAPACITY)
def check_weights_cache(inv: Inventory) -> list[Finding]:
    results = []
    for deployment in inv.gpu_deployments():
        pods = inv.pods_of(deployment)
        uncached = [name_of(p) for p in pods if not caches_weights(p)]
        if uncached:
            results.append(warned(namespaced_name(deployment), f"{len(uncached)} pod(s) load weights without a "
                                  f"PVC, host path or pre-pulled image ({labels.ANNOTATION_WEIGHTS_IN_IMAGE}=true): "
                                  "rescheduled pods take 20+ minutes"))
        else:
            results.append(passed(namespaced_name(deployment), f"{len(pods)} pod(s) load weights from a cache"))
    return results



@check(CheckId.BATCH_JOBS, CAPACITY)
def check_batch_jobs(inv: Inventory) -> list[Finding]:
    """The runbook's "wait for batch jobs", seen on the nodes: every GPU pod a Job owns (or that
    ``gpuOperator.batchJobSelectors`` matches) on a node this change upgrades must be matched by its pool's
    ``waitForCompletion.podSelector``, else the operator evicts it mid-run. The pack checks the declared selectors
    against the policy; only the cluster shows the jobs nobody declared. A failure in prod, a warning elsewhere."""
    spec = inv.spec
    if spec.driver.owner == DriverOwner.IMAGE:
        return [passed("stack", "the node image carries the driver: pools move by generations, whose drain "
                                "waits for no pod selector (keep batch jobs off a pool while it is replaced)")]
    declared = [(text, equality_selector(text)) for text in spec.gpuOperator.batchJobSelectors]
    results = []
    for pool in spec.nodePools:
        if spec.pool_held(pool):
            results.append(passed(pool.name, "held: this change upgrades none of its nodes"))
            continue
        wait = spec.upgrade_policy(pool).waitForCompletion.podSelector
        waits_for = equality_selector(wait) if wait else {}
        batch: list[tuple[Obj, str]] = []
        for node in inv.nodes_of_pool(pool.name):
            for pod in inv.pods_on(name_of(node)):
                if status_of(pod).get("phase") not in ("Running", "Pending") or not gpu_request(pod_containers(pod)):
                    continue
                job = owned_by(pod, "Job")
                matched = next((text for text, terms in declared
                                if terms and selector_matches({"matchLabels": terms}, labels_of(pod))), None)
                if job is not None or matched is not None:
                    batch.append((pod, f"Job {job}" if job is not None else f"batchJobSelectors '{matched}'"))
        if not batch:
            results.append(passed(pool.name, "no GPU pod of a Job or of gpuOperator.batchJobSelectors on its nodes"))
            continue
        if waits_for is None:
            results.append(warned(pool.name, f"{len(batch)} batch GPU pod(s) on its nodes, and its "
                                             f"waitForCompletion.podSelector '{wait}' uses set syntax, which this "
                                             "check does not judge: confirm it matches them"))
            continue
        evicted = [(pod, why) for pod, why in batch
                   if not waits_for or not selector_matches({"matchLabels": waits_for}, labels_of(pod))]
        if not evicted:
            results.append(passed(pool.name, f"{len(batch)} batch GPU pod(s) on its nodes, each matched by "
                                             f"waitForCompletion.podSelector '{wait}': the upgrade waits for them"))
            continue
        named = few([f"{namespaced_name(pod)} ({why})" for pod, why in evicted], 3)
        message = (f"{len(evicted)} batch GPU pod(s) the upgrade would evict mid-run: {named}; "
                   + (f"waitForCompletion.podSelector '{wait}' does not match them" if wait else
                      "no waitForCompletion.podSelector is set")
                   + ": set it (gpuOperator.upgradePolicy, or this pool's nodePools[].upgradePolicy) to a selector "
                   "they carry, and the same in gpuOperator.batchJobSelectors")
        results.append((failed if spec.stage == Stage.PROD else warned)(pool.name, message))
    return results


# SGLang exports its Prometheus metrics only when started with this flag.
SGLANG_METRICS_FLAG = "--enable-metrics"


def _model_pods(inv: Inventory, model: Model) -> list[Obj]:
    return [p for p in inv.pods if namespace_of(p) == model.namespace
            and selector_matches({"matchLabels": model.matchLabels}, labels_of(p))]


def _metrics_missing(inv: Inventory, model: Model, engine: str | None) -> list[str]:
    """What to configure before `watch` can read the model's error rate and p95 (runbook section 6)."""
    missing = []
    if engine is None:
        missing.append(f"models[{model.name}].serving.engine (vllm, tgi, triton or sglang): the engine of image "
                       f"{model.image} is not known, so neither are its metrics")
    if inv.spec.validation is None or inv.spec.validation.prometheus is None:
        missing.append("validation.prometheus: where `watch` reads the model's error rate and p95")
    if engine == serving.SGLANG:
        bare = [name_of(p) for p in _model_pods(inv, model)
                if not any(SGLANG_METRICS_FLAG in [*(c.get("command") or []), *(c.get("args") or [])]
                           for c in pod_containers(p))]
        if bare:
            missing.append(f"{SGLANG_METRICS_FLAG} on its SGLang server ({few(bare)} run(s) without it: SGLang "
                           "exports no metrics then)")
    return missing


@check(CheckId.MODEL_METRICS, CAPACITY)
def check_model_metrics(inv: Inventory) -> list[Finding]:
    """Runbook section 6: "keep watching error rate and p95 latency for each model during every pool". `watch`
    reads both for every model (its ``slo``, else relative to its own baseline): a model whose metrics cannot be
    read is watched blind, a failure in prod."""
    results = []
    for model in inv.spec.models:
        key = f"{model.namespace}/{model.name}"
        engine = serving.engine_of_model(model)
        missing = _metrics_missing(inv, model, engine)
        if missing:
            message = "its error rate and p95 cannot be read during the rollout; set " + "; ".join(missing)
            results.append(failed(key, message) if inv.spec.stage == Stage.PROD else warned(key, message))
            continue
        objective = "models[].slo" if model.slo is not None else "relative to its own baseline (no models[].slo)"
        results.append(passed(key, f"{engine} metrics, read from validation.prometheus; objective: {objective}"))
    return results
