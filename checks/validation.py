"""Runbook section 5 ("Validate the canary"), run by `gpu-rollout verify` on the stack's upgraded nodes:
``driver-version``, ``gpu-count``, ``operator-validator``, ``model-answers``, ``latency-throughput``,
``model-restarts``, ``no-new-xid``, ``dcgm-metrics``, ``validation-job``.

Pure functions over what :func:`checks.verify_read.gather` read (:class:`checks.verify_facts.VerifyFacts`), each
giving ``pass``, ``fail`` or ``inconclusive`` per subject with the evidence it read. The soak is judged as a
window, from its start to now: every Xid it logged, every bucket of its traffic, every restart. Missing evidence
(an empty query, a counter the exporter does not export, no result from the validation job yet, no Prometheus)
is ``inconclusive``, never a pass; a bucket with too few requests is reported as such, never judged. Too little
of the soak judged fails: DCGM samples per GPU under ``validation.minJudgedFraction``, buckets with requests enough
or restart counts under ``validation.minServingJudgedFraction``, requests under ``validation.minRequests``.
"""

from __future__ import annotations

from typing import Any

from checks.hold import read_hold
from checks.metadata import VALIDATION, check
from checks.nodestate import node_driver_version, upgrade_state
from checks.objects import Obj, labels_of, name_of, namespaced_name, spec_of, status_of
from checks.progress import pod_ready
from checks import sharing
from checks.results import Finding, failed, few, inconclusive, passed
from checks.serving import METRICS, Figures
from checks.verify_facts import (KSM_RESTARTS, DCGM_DRIVER_LABEL, DCGM_SERIES, DCGM_XID, DCGM_XID_COUNT, NO_PROMETHEUS,
                                 VALIDATOR_LABEL, Bucket, BucketFigures, Comparison, UpgradedNode, VerifyFacts, XidEvent,
                                 stamp,
                                 validation_result)
from gpu_knowledge import labels
from gpu_knowledge.capacity import percent_of
from fleetspec.model import DriverOwner
from fleetspec.observability import decimal_percent
from workload import result as job_result
from vocabulary.check_ids import CheckId

VERB = "verify"
# Xids logged when processes are killed, as the upgrade's pod deletion does: expected, not a driver fault.
# Source: NVIDIA's Xid catalog (Ampere and newer), via shared/reference/gpu-operator.md section 7: 45
# PREEMPTIVE_REMOVAL ("logged on app abort (Ctrl-C, reset, kill)"), 43 RESETCHANNEL_VERIF_ERROR (an app
# fault; "the GPU stays healthy").
EXPECTED_XIDS = {43: "RESETCHANNEL_VERIF_ERROR: a killed process's channel", 45: "PREEMPTIVE_REMOVAL: a killed process"}
# They are expected only in the node's own upgrade window: until this long after its upgrade finished (the
# validation job's server and the model pods coming back still kill processes). Outside it the gauge's 43/45 could
# hide a later Xid, so that GPU's bucket is not judged (the exporter's count shows every Xid: nothing hides there).
UPGRADE_SETTLE = 3600.0
SHOWN = 5  # buckets, events or restarts a message names before "and N more"


# ---------------------------------------------------------------- the checks (runbook section 5, in its order)


def _driver_pods(facts: VerifyFacts, node: str) -> list[Obj]:
    return [p for p in facts.operator_pods.get(node, [])
            if any(labels_of(p).get(key) == value for key, value in labels.DRIVER_POD_LABELS)]


def _image_tag(pod: Obj) -> str:
    containers = spec_of(pod).get("containers") or []
    images = [c.get("image", "") for c in containers if isinstance(c, dict)]
    driver = next((i for i in images if "/driver:" in i or i.startswith("driver:")), images[0] if images else "")
    return driver.rsplit(":", 1)[-1] if ":" in driver.rsplit("/", 1)[-1] else ""


@check(CheckId.DRIVER_VERSION, VALIDATION)
def check_driver_version(facts: VerifyFacts) -> list[Finding]:
    """GFD's driver label and, where the operator owns the driver, the node's driver pod agree with the target."""
    findings = []
    operator_owned = facts.spec.driver.owner == DriverOwner.OPERATOR
    for node in facts.nodes:
        reported = node_driver_version(node.node)
        state = upgrade_state(node.node)
        evidence: dict[str, Any] = {"target": node.target, "gfd": reported, "upgradeState": state or None}
        problems = []
        if reported is None:
            problems.append(f"GFD reports no driver version ({labels.GFD_DRIVER_VERSION})")
        elif not job_result.driver_matches(node.target, reported):
            problems.append(f"GFD reports {reported}")
        if operator_owned:
            if state != labels.UPGRADE_DONE:
                problems.append(f"upgrade state is {state or 'unset'}, not {labels.UPGRADE_DONE}")
            pods = _driver_pods(facts, node.name)
            evidence["driverPods"] = [{"pod": namespaced_name(p), "tag": _image_tag(p), "ready": pod_ready(p)}
                                      for p in pods]
            if not pods:
                problems.append("no driver pod runs on it")
            for pod in pods:
                tag = _image_tag(pod)
                if not job_result.driver_matches(node.target, tag.split("-", 1)[0]):
                    problems.append(f"driver pod {name_of(pod)} runs image tag {tag or 'unknown'}")
                elif not pod_ready(pod):
                    problems.append(f"driver pod {name_of(pod)} is not Ready")
        if problems:
            findings.append(failed(node.name, f"target {node.target}: " + "; ".join(problems), evidence))
        else:
            how = " (GFD label and driver pod)" if operator_owned else " (GFD label)"
            findings.append(passed(node.name, f"runs {node.target}{how}", evidence))
    return findings


@check(CheckId.GPU_COUNT, VALIDATION)
def check_gpu_count(facts: VerifyFacts) -> list[Finding]:
    """The GPU resources the node advertises, whole or sliced (:mod:`checks.sharing`), against its pool's declaration
    (``gpusPerNode`` times ``gpuReplicas``, the time-slicing replicas; ``migConfig`` applied) and against the
    pool's nodes not yet upgraded: no GPU, slice or MIG device lost in the upgrade."""
    findings = []
    for node in facts.nodes:
        seen = sharing.advertised(node.node)
        peers = [p for p in facts.old_nodes.get(node.pool.name, []) if name_of(p) != node.name]
        problems = sharing.against_declaration(node.pool, seen)
        changes, compared = sharing.against_peers(seen, peers)
        evidence = {"advertised": seen.as_json(), "gfdCount": labels_of(node.node).get(labels.GPU_COUNT),
                    "declared": {"gpusPerNode": node.pool.gpusPerNode, "gpuReplicas": node.pool.gpuReplicas,
                                 "migConfig": node.pool.migConfig},
                    "comparedWith": compared or "no node of the pool left on the old driver"}
        if changes:
            problems.append(f"changed from {compared}: {'; '.join(changes)}")
        if problems:
            findings.append(failed(node.name, "; ".join(problems), evidence))
            continue
        if sharing.uses_mig(node.pool, seen):
            # The single strategy advertises the slices as nvidia.com/gpu, the mixed one by profile.
            devices = ", ".join(f"{k}={v}" for k, v in seen.mig.items()) or f"{labels.GPU_RESOURCE}={seen.gpus}"
            what = f"MIG layout {seen.mig_config} applied ({devices})"
        elif seen.replicas > 1:
            what = f"{node.pool.gpusPerNode} GPU(s) x {seen.replicas} replicas ({seen.strategy or 'shared'})"
        else:
            what = f"{seen.gpus} allocatable GPU(s)"
        findings.append(passed(node.name, f"{what}, as pool {node.pool.name} declares"
                               + (f" and {compared}" if compared else "; no node of the pool left on the old driver "
                                  "to compare with"), evidence))
    return findings


@check(CheckId.OPERATOR_VALIDATOR, VALIDATION)
def check_operator_validator(facts: VerifyFacts) -> list[Finding]:
    """The operator's validator pod (app=nvidia-operator-validator) is Running and Ready on the node."""
    findings = []
    key, value = VALIDATOR_LABEL
    for node in facts.nodes:
        pods = [p for p in facts.operator_pods.get(node.name, []) if labels_of(p).get(key) == value]
        evidence = {"pods": [{"pod": namespaced_name(p), "phase": status_of(p).get("phase"), "ready": pod_ready(p)}
                             for p in pods]}
        if not pods:
            findings.append(failed(node.name, f"no {key}={value} pod in namespace {facts.spec.gpuOperator.namespace}",
                                   evidence))
        elif not all(pod_ready(p) for p in pods):
            waiting = [name_of(p) for p in pods if not pod_ready(p)]
            findings.append(failed(node.name, f"validator not Ready: {few(waiting)}", evidence))
        else:
            findings.append(passed(node.name, f"validator Ready: {few([name_of(p) for p in pods])}", evidence))
    return findings


@check(CheckId.MODEL_ANSWERS, VALIDATION)
def check_model_answers(facts: VerifyFacts) -> list[Finding]:
    """Each model pod on an upgraded node is Ready and answers a test request through the pod proxy."""
    if not facts.probes:
        models = [f"{m.namespace}/{m.name}" for m in facts.spec.models]
        return [inconclusive("models", "no pod of a declared model runs on an upgraded node, so none could be asked"
                             + (f" (declared: {few(models)})" if models else " (the stack declares no model)"),
                             {"models": models})]
    findings = []
    for probe in facts.probes:
        evidence = {"model": probe.model, "node": probe.node, **probe.evidence}
        subject = probe.pod
        if probe.outcome == "answered":
            findings.append(passed(subject, f"on {probe.node}: {probe.detail}", evidence))
        elif probe.outcome in ("denied", "unknown-engine"):
            findings.append(inconclusive(subject, f"on {probe.node}: could not ask: {probe.detail}", evidence))
        else:
            findings.append(failed(subject, f"on {probe.node}: {probe.detail}", evidence))
    return findings


def _fraction(percent: str) -> float:
    value = percent_of(percent)
    return 0.0 if value is None else value / 100


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _tolerances(facts: VerifyFacts) -> dict[str, float]:
    tolerance = facts.spec.validation.tolerance if facts.spec.validation else None
    return {"p95LatencySeconds": _fraction(tolerance.p95Latency if tolerance else "20%"),
            "tokensPerSecond": _fraction(tolerance.tokensPerSecond if tolerance else "10%"),
            "errorRate": decimal_percent(tolerance.errorRate if tolerance else "1%")}


def _out_of_tolerance(new: Figures, old: Figures, tolerance: dict[str, float], where: str) -> list[str]:
    """What of ``new`` is out of tolerance against ``old`` (each metric both sides show)."""
    problems = []
    p95_new, p95_old = new.p95LatencySeconds, old.p95LatencySeconds
    if p95_new is not None and p95_old is not None and p95_new > p95_old * (1 + tolerance["p95LatencySeconds"]):
        problems.append(f"p95 latency {p95_new:.3g}s vs {p95_old:.3g}s {where} "
                        f"(more than {tolerance['p95LatencySeconds']:.0%} higher)")
    tps_new, tps_old = new.tokensPerSecond, old.tokensPerSecond
    if tps_new is not None and tps_old is not None and tps_new < tps_old * (1 - tolerance["tokensPerSecond"]):
        problems.append(f"tokens/s {tps_new:.3g} vs {tps_old:.3g} {where} "
                        f"(more than {tolerance['tokensPerSecond']:.0%} lower)")
    err_new, err_old = new.errorRate, old.errorRate
    if err_new is not None and err_old is not None and err_new > err_old + tolerance["errorRate"]:
        problems.append(f"error rate {err_new:.2%} vs {err_old:.2%} {where} "
                        f"(more than {tolerance['errorRate'] * 100:g} points higher)")
    return problems


def judged_buckets(comparison: Comparison, minimum: int) -> tuple[int, list[str]]:
    """(buckets of the comparison with ``minimum`` requests on each side, the others named with why): what
    ``latency-throughput`` judges, and what the attestation records as the share of the soak judged."""
    before = comparison.baseline is not None and comparison.baseline.kind == "before the upgrade"
    judged, too_few = 0, []
    for bucket in comparison.buckets:
        why = _too_few(bucket, minimum, before)
        if why is None:
            judged += 1
        else:
            too_few.append(f"{bucket.bucket.name()}: {why}")
    return judged, too_few


def _serving_floors(facts: VerifyFacts) -> tuple[int, float, int]:
    """(validation.minBucketRequests, minServingJudgedFraction, minRequests), defaults without a validation block."""
    declared = facts.spec.validation
    if declared is None:
        return 100, 0.9, 1000
    return declared.minBucketRequests, declared.minServingJudgedFraction, declared.minRequests


def _too_few(bucket: BucketFigures, minimum: int, before: bool) -> str | None:
    """Why the bucket has too few requests to judge, or None."""
    new, old = bucket.new.requests or 0.0, bucket.baseline.requests or 0.0
    if new < minimum:
        return f"{new:.0f} requests on new-driver pods"
    if old < minimum:
        return f"{old:.0f} requests {'before the upgrade' if before else 'on old-driver pods'}"
    return None


def _comparison_evidence(comparison: Comparison, facts: VerifyFacts, tolerance: dict[str, float]) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "engine": comparison.engine.value if comparison.engine else None, "gpuProduct": comparison.product,
        "gpusPerPod": comparison.gpus_per_pod, "newPods": comparison.new_pods,
        "oldPods": comparison.baseline.pods if comparison.baseline and comparison.baseline.kind == "old-driver pods"
        else [],
        "baseline": comparison.baseline.as_json() if comparison.baseline else None,
        "window": facts.window.as_json() if facts.window else None,
        "tolerance": {"p95Latency": tolerance["p95LatencySeconds"], "tokensPerSecond": tolerance["tokensPerSecond"],
                      "errorRate": tolerance["errorRate"]},
        "queries": {key: {"query": expr} for key, expr in sorted(comparison.queries.items())},
    }
    if comparison.excluded:
        evidence["notLikeForLike"] = comparison.excluded
    if comparison.whole is not None:
        evidence["whole"] = {"new": comparison.whole[0].as_json(), "baseline": comparison.whole[1].as_json()}
    return evidence


@check(CheckId.LATENCY_THROUGHPUT, VALIDATION)
def check_latency_throughput(facts: VerifyFacts) -> list[Finding]:
    """p95 latency, tokens per second and error rate of each model's new-driver pods against a like-for-like
    baseline (old-driver pods of the same GPU product and GPUs per pod, else its own pods before the upgrade),
    bucket by bucket across the whole soak, within validation.tolerance; any bucket out of tolerance fails."""
    tolerance = _tolerances(facts)
    minimum, floor, min_requests = _serving_floors(facts)
    if not facts.comparisons:
        return [inconclusive("models", "no declared model runs on a released pool: nothing to compare")]
    findings = []
    for comparison in facts.comparisons:
        subject = comparison.subject
        if sum(c.subject == subject for c in facts.comparisons) > 1:
            subject += f" ({comparison.product}, {comparison.gpus_per_pod} GPU(s) per pod)"
        evidence = _comparison_evidence(comparison, facts, tolerance)
        if comparison.reason:
            findings.append(inconclusive(subject, comparison.reason, evidence))
            continue
        if comparison.errors:
            findings.append(inconclusive(subject, "no data: " + "; ".join(comparison.errors), evidence))
            continue
        before = comparison.baseline is not None and comparison.baseline.kind == "before the upgrade"
        missing = [f"{metric} {side}: empty result for {comparison.queries.get(f'{metric} {side}', metric)}"
                   for side, pick in (("new", 0), ("old", 1)) for metric in METRICS
                   if all((b.new, b.baseline)[pick].get(metric) is None for b in comparison.buckets)]
        if missing:
            findings.append(inconclusive(subject, "no data: " + "; ".join(missing), evidence))
            continue
        where = "before the upgrade" if before else "on old-driver pods"
        judged, too_few = judged_buckets(comparison, minimum)
        failing = []
        for bucket in comparison.buckets:
            if _too_few(bucket, minimum, before) is None:
                problems = _out_of_tolerance(bucket.new, bucket.baseline, tolerance, where)
                if problems:
                    failing.append(f"{bucket.bucket.name()}: {'; '.join(problems)}")
        share = judged / len(comparison.buckets) if comparison.buckets else 0.0
        served = (comparison.whole[0].requests if comparison.whole else None) or 0.0
        evidence["buckets"] = {"count": len(comparison.buckets), "judged": judged, "judgedFraction": round(share, 4),
                               "minJudgedFraction": floor, "tooFewRequests": too_few, "outOfTolerance": failing}
        evidence["requests"] = {"newDriver": round(served), "minRequests": min_requests}
        short = []
        if share < floor:
            short.append(f"{judged} of {len(comparison.buckets)} bucket(s) judged ({share:.0%}), less than "
                         f"validation.minServingJudgedFraction ({floor:.0%}); with fewer than {minimum} requests on "
                         f"a side: {_listed(too_few)}")
        if served < min_requests:
            short.append(f"{served:.0f} request(s) on new-driver pods over the soak, fewer than validation.minRequests "
                         f"({min_requests})")
        if failing:
            findings.append(failed(subject, f"{len(failing)} of {judged} judged bucket(s) out of tolerance: "
                                   + _listed(failing) + "".join(f"; {s_}" for s_ in short), evidence))
        elif short:
            findings.append(failed(subject, "not enough of the soak judged: " + "; ".join(short), evidence))
        else:
            new, old = comparison.whole or (Figures(), Figures())
            summary = (f"{judged} bucket(s) within tolerance over {facts.window.as_json()['hours'] if facts.window else 0}"
                       f" h; whole soak: p95 {_num(new.p95LatencySeconds)}s vs {_num(old.p95LatencySeconds)}s, "
                       f"tokens/s {_num(new.tokensPerSecond)} vs {_num(old.tokensPerSecond)}, error rate "
                       f"{_pct(new.errorRate)} vs {_pct(old.errorRate)} (new driver vs {where.removeprefix('on ')})")
            if too_few:
                summary += f"; {len(too_few)} bucket(s) with too few requests to judge"
            findings.append(passed(subject, summary, evidence))
    return findings


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.2%}"


@check(CheckId.MODEL_RESTARTS, VALIDATION)
def check_model_restarts(facts: VerifyFacts) -> list[Finding]:
    """Container restarts and OOM kills of each model's pods on upgraded nodes during the soak (kube-state-metrics,
    else the pods' own status): an OOM kill, or more restarts than validation.maxModelRestarts, fails."""
    allowed = facts.spec.validation.maxModelRestarts if facts.spec.validation else 0
    _, floor, _ = _serving_floors(facts)
    if not facts.restarts:
        return [inconclusive("models", "no declared model runs on a released pool: no model pod to look at")]
    findings = []
    for reading in facts.restarts:
        subject = f"{reading.model.namespace}/{reading.model.name}"
        evidence: dict[str, Any] = {"source": reading.source, "pods": reading.pods, "allowed": allowed,
                                    "missing": reading.missing,
                                    "restarts": [{"pod": r.pod, "container": r.container, "node": r.node,
                                                  "bucket": r.bucket.as_json() if r.bucket else None,
                                                  "restarts": r.restarts, "oomKilled": r.oom_killed}
                                                 for r in reading.restarts]}
        if reading.error:
            findings.append(inconclusive(subject, f"{reading.source}: {reading.error}", evidence))
            continue
        if not reading.pods:
            findings.append(inconclusive(subject, "no pod of the model ran on an upgraded node", evidence))
            continue
        unjudged = [b.name() for b in reading.buckets if b.index not in reading.judged]
        share = 1 - len(unjudged) / len(reading.buckets) if reading.buckets else 0.0
        evidence["buckets"] = {"count": len(reading.buckets), "judged": len(reading.buckets) - len(unjudged),
                               "judgedFraction": round(share, 4), "minJudgedFraction": floor,
                               "notJudged": unjudged[:50]}
        total = sum(r.restarts for r in reading.restarts)
        oom_killed = any(r.oom_killed for r in reading.restarts)
        note = f" ({'; '.join(reading.missing)})" if reading.missing else ""
        named = [f"{r.bucket.name() if r.bucket else 'since it started'}: {r.restarts} restart(s) of {r.pod}/"
                 f"{r.container} on {r.node}" + (" (OOM-killed)" if r.oom_killed else "") for r in reading.restarts]
        if oom_killed or total > allowed:
            why = f"{total} container restart(s) on upgraded nodes during the soak"
            why += (", OOM kills among them" if oom_killed
                    else f", more than the {allowed} validation.maxModelRestarts allows")
            findings.append(failed(subject, f"{why} ({reading.source}): {_listed(named)}{note}", evidence))
        elif not reading.buckets or facts.prometheus is None:
            why = "the soak has no bucket to judge yet" if reading.buckets == [] else NO_PROMETHEUS
            findings.append(inconclusive(subject, f"{what_of(total, allowed)}, but {why} ({reading.source}){note}",
                                         evidence))
        elif share < floor:
            findings.append(failed(subject, f"restarts known in {len(reading.buckets) - len(unjudged)} of "
                                   f"{len(reading.buckets)} bucket(s) of the soak ({share:.0%}), less than "
                                   f"validation.minServingJudgedFraction ({floor:.0%}): kube-state-metrics "
                                   f"({KSM_RESTARTS}) shows the model's pods in none of {_listed(unjudged)}{note}",
                                   evidence))
        else:
            what = what_of(total, allowed)
            findings.append(passed(subject, f"{what} of its {len(reading.pods)} pod(s) on upgraded nodes during the "
                                   f"soak ({reading.source}){note}", evidence))
    return findings


def _spans(buckets: list[Bucket], missing: dict[int, list[str]]) -> list[str]:
    """The buckets of ``missing`` (index -> GPUs), runs of consecutive ones with the same GPUs written once:
    ``hour 2 to hour 166 (<start> to <end>): GPU 0, 1``."""
    by_index = {b.index: b for b in buckets}
    runs: list[tuple[Bucket, Bucket, list[str]]] = []
    for index in sorted(missing):
        gpus = sorted(missing[index], key=lambda g: (len(g), g))
        if runs and runs[-1][1].index == index - 1 and runs[-1][2] == gpus:
            runs[-1] = (runs[-1][0], by_index[index], gpus)
        else:
            runs.append((by_index[index], by_index[index], gpus))
    out = []
    for first, last, gpus in runs:
        unit = first.name().split(" ", 1)[0]
        where = first.name() if first is last else (f"{unit} {first.index} to {unit} {last.index} "
                                                     f"({stamp(first.start)} to {stamp(last.end)})")
        out.append(f"{where}: GPU {', '.join(gpus)}")
    return out


def _coverage(facts: VerifyFacts, node: str, what: str, unjudged: dict[int, list[str]] | None = None
              ) -> tuple[str | None, dict[str, Any]]:
    """(why too little of the node's soak is judged, or None; the evidence): its GPUs' buckets without DCGM samples,
    and ``unjudged`` ones (index -> GPUs), against validation.minJudgedFraction."""
    floor = facts.spec.validation.minJudgedFraction if facts.spec.validation else 0.95
    reading = facts.coverage.get(node)
    evidence: dict[str, Any] = {"query": facts.coverage_query, "minJudgedFraction": floor,
                                "exporterHistory": facts.exporter_history}
    if facts.coverage_error:
        return f"which buckets DCGM samples arrived in is not known: {facts.coverage_error}", evidence
    if reading is None or not reading.buckets:
        evidence["buckets"] = 0
        return None, evidence
    missing = reading.missing()
    for index, gpus in (unjudged or {}).items():
        missing[index] = sorted(set(missing.get(index, [])) | set(gpus))
    total = len(reading.gpus) * len(reading.buckets)
    lost = sum(len(g) for g in missing.values())
    share = 1 - lost / total
    spans = _spans(reading.buckets, missing)
    evidence.update(gpus=reading.gpus, buckets=len(reading.buckets), judged=total - lost,
                    judgedFraction=round(share, 4), notJudged=spans[:50])
    if share >= floor:
        return None, evidence
    gap = f" ({facts.exporter_history})" if facts.exporter_history and "no pod" in facts.exporter_history else ""
    return (f"{what} judged in {total - lost} of {total} GPU-bucket(s) of the soak ({share:.0%}), less than "
            f"validation.minJudgedFraction ({floor:.0%}); not judged: {_listed(spans)}{gap}"), evidence


def what_of(total: int, allowed: int) -> str:
    return "no container restart" if not total else f"{total} container restart(s), within {allowed}"


@check(CheckId.NO_NEW_XID, VALIDATION)
def check_no_new_xid(facts: VerifyFacts) -> list[Finding]:
    """Every Xid each node's GPUs logged since its upgrade finished (DCGM_EXP_XID_ERRORS_COUNT where exported,
    else every change of DCGM_FI_DEV_XID_ERRORS), at scrape resolution: none but those pod deletion causes."""
    if facts.prometheus is None:
        return [inconclusive(n.name, NO_PROMETHEUS) for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        reading = facts.xids.get(node.name)
        since = facts.finished_at.get(node.name)
        if since is None or reading is None:
            findings.append(inconclusive(node.name, "when the upgrade finished is not known (no upgrade-done "
                                         "write, no validation result), so 'since the upgrade' has no start"))
            continue
        started = stamp(since)
        evidence: dict[str, Any] = {"queries": facts.xid_queries, "since": started, "source": reading.source,
                                    "series": reading.series, "ignored": sorted(EXPECTED_XIDS)}
        if facts.xid_error:
            findings.append(inconclusive(node.name, facts.xid_error, evidence))
            continue
        if not reading.series:
            findings.append(inconclusive(node.name, f"no {DCGM_XID} (nor {DCGM_XID_COUNT}) series for this node "
                                         f"since {started}: DCGM Exporter does not report it, or its series name no "
                                         "node (Hostname, kubernetes_node, node) nor a DCGM Exporter pod", evidence))
            continue
        events = reading.events
        settled = since + UPGRADE_SETTLE
        expected = [e for e in events if e.xid in EXPECTED_XIDS and e.at <= settled]
        outside = [e for e in events if e.xid in EXPECTED_XIDS and e.at > settled]
        evidence["xids"] = [{"xid": x, "first": stamp(min(e.at for e in events if e.xid == x)),
                             "expected": x in EXPECTED_XIDS} for x in sorted({e.xid for e in events})]
        evidence["events"] = [{"xid": e.xid, "gpu": e.gpu, "at": stamp(e.at)} for e in events[:50]]
        evidence["upgradeWindowEnds"] = stamp(settled)
        hidden = _hiding(facts, outside) if reading.source == DCGM_XID else {}
        short, evidence["coverage"] = _coverage(facts, node.name, "DCGM samples with no Xid 43/45 that could hide "
                                                "another", hidden)
        fatal = [e for e in events if e.xid not in EXPECTED_XIDS]
        if fatal:
            xids = ", ".join(str(x) for x in sorted({e.xid for e in fatal}))
            findings.append(failed(node.name, f"Xid {xids} since the upgrade finished ({started}): " + _listed(
                [f"Xid {e.xid} on GPU {e.gpu} of {e.node} at {stamp(e.at)}" for e in fatal])
                + f" ({reading.source})", evidence))
            continue
        if short:
            findings.append(failed(node.name, f"no new Xid seen since {started}, but too little of the soak was "
                                   f"seen: {short}", evidence))
            continue
        notes = []
        if expected:
            notes.append("ignored, expected in its upgrade window (until " + stamp(settled) + "): "
                         + ", ".join(str(x) for x in sorted({e.xid for e in expected})))
        if outside:
            how = ("its GPU's bucket not judged, a later Xid could hide behind it in the gauge"
                   if reading.source == DCGM_XID else f"{DCGM_XID_COUNT} shows every other Xid")
            notes.append("outside its upgrade window, " + how + ": " + _listed(
                [f"Xid {e.xid} on GPU {e.gpu} at {stamp(e.at)}" for e in outside]))
        note = f" ({'; '.join(notes)})" if notes else ""
        judged = evidence["coverage"].get("judgedFraction")
        seen_share = f", {judged:.0%} of the soak's GPU-buckets judged" if isinstance(judged, float) else ""
        findings.append(passed(node.name, f"no new Xid since {started}{note} ({reading.source}, every sample"
                               f"{seen_share})", evidence))
    return findings


def _hiding(facts: VerifyFacts, events: list[XidEvent]) -> dict[int, list[str]]:
    """Bucket index -> GPUs whose bucket an Xid 43/45 of the gauge leaves unjudged."""
    out: dict[int, list[str]] = {}
    for bucket in facts.window.buckets() if facts.window else []:
        gpus = sorted({e.gpu for e in events if bucket.start <= e.at < bucket.end})
        if gpus:
            out[bucket.index] = gpus
    return out


@check(CheckId.DCGM_METRICS, VALIDATION)
def check_dcgm_metrics(facts: VerifyFacts) -> list[Finding]:
    """DCGM Exporter series arrive for the node (last 5 minutes) with DCGM_FI_DRIVER_VERSION the target."""
    if facts.prometheus is None:
        return [inconclusive(n.name, NO_PROMETHEUS) for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        reading = facts.dcgm.get(node.name)
        evidence: dict[str, Any] = {"query": facts.dcgm_query}
        if facts.dcgm_error or reading is None:
            findings.append(inconclusive(node.name, facts.dcgm_error or "not read", evidence))
            continue
        drivers = dict(reading.drivers)
        evidence.update(seriesByDriver=drivers, matchedBy=reading.matched_by)
        unlabelled = drivers.pop("", 0)
        matching = {v: n for v, n in drivers.items() if job_result.driver_matches(node.target, v)}
        short, evidence["coverage"] = _coverage(facts, node.name, f"{DCGM_SERIES} samples")
        if matching and short:
            findings.append(failed(node.name, f"DCGM reports {node.target} now, but {short}", evidence))
        elif matching:
            judged = evidence["coverage"].get("judgedFraction")
            share = (f"; samples in {judged:.0%} of the soak's GPU-buckets" if isinstance(judged, float) else "")
            findings.append(passed(node.name, f"{sum(matching.values())} {DCGM_SERIES} series with "
                                   f"{DCGM_DRIVER_LABEL}={node.target}{share}", evidence))
        elif drivers:
            findings.append(failed(node.name, f"DCGM reports driver {', '.join(sorted(drivers))}, not {node.target}",
                                   evidence))
        elif unlabelled:
            findings.append(inconclusive(node.name, f"{unlabelled} {DCGM_SERIES} series for this node carry no "
                                         f"{DCGM_DRIVER_LABEL} label: the exporter's counters file does not collect "
                                         "it (dcgm-exporter's default-counters.csv leaves it out; the operator's "
                                         "dcp-metrics-included.csv has it): add it to the exporter's metrics "
                                         "ConfigMap", evidence))
        else:
            findings.append(inconclusive(node.name, f"no {DCGM_SERIES} series for this node in the last 5 minutes",
                                         evidence))
    return findings


def result_identity_problem(result: job_result.Result, node: UpgradedNode, cluster: str) -> str | None:
    """Why ``result`` is not this node's validation on its target, or None: it must name the node, the cluster
    and the target driver, and the driver its own ``driver-version`` check saw must be that driver."""
    named = []
    if result.node != node.name:
        named.append(f"node {result.node}")
    if result.cluster != cluster:
        named.append(f"cluster {result.cluster}")
    if not job_result.driver_matches(node.target, result.targetDriver):
        named.append(f"driver {result.targetDriver}")
    if named:
        return f"the result names {', '.join(named)}, not this node's validation on {node.target} in {cluster}"
    seen = result.check("driver-version")
    reported = seen.evidence.get("reported") if seen is not None else None
    if isinstance(reported, str) and reported and not job_result.driver_matches(node.target, reported):
        return f"the result's driver-version check saw driver {reported}, not {node.target}"
    return None


@check(CheckId.VALIDATION_JOB, VALIDATION)
def check_validation_job(facts: VerifyFacts) -> list[Finding]:
    """The validation job's result for the target driver passed on the node (workload.result, on the Node), it is
    that node's result on that driver, and no failed validation holds the node (checks/hold.py)."""
    if facts.spec.validation is None:
        return [failed(n.name, "the stack declares no validation job (the validation block)") for n in facts.nodes]
    findings = []
    for node in facts.nodes:
        parsed, error = validation_result(node.node, node.target)
        key = job_result.result_annotation(node.target)
        hold = _hold_of(node.node)
        if error:
            findings.append(failed(node.name, error, {"annotation": key}))
            continue
        if parsed is None:
            if hold is not None:
                findings.append(failed(node.name, hold["message"], {"annotation": key, "hold": hold}))
            else:
                findings.append(inconclusive(node.name, f"no result for {node.target} yet (annotation {key}): the "
                                             "job has not finished on this node", {"annotation": key}))
            continue
        evidence: dict[str, Any] = {
            "annotation": key, "outcome": parsed.outcome, "startedAt": parsed.startedAt,
            "finishedAt": parsed.finishedAt, "program": parsed.program,
            "measurements": {k_: v for k_, v in parsed.measurements.items()
                             if isinstance(v, (int, float, str)) and not isinstance(v, bool)}}
        if hold is not None:
            evidence["hold"] = hold
        bad = [c for c in parsed.checks if c.status == job_result.FAIL]
        problem = result_identity_problem(parsed, node, facts.spec.cluster.name)
        if problem:
            findings.append(failed(node.name, problem, evidence))
        elif bad:
            findings.append(failed(node.name, "the job failed: " + "; ".join(f"{c.id}: {c.message}" for c in bad),
                                   evidence))
        elif hold is not None:  # validated again and passed, but nobody released the node yet
            findings.append(failed(node.name, f"the job passed at {parsed.finishedAt}, but the node is still "
                                   + hold["message"], evidence))
        else:
            findings.append(passed(node.name, f"the job passed at {parsed.finishedAt} "
                                   f"({len(parsed.checks)} checks)", evidence))
    return findings


def _hold_of(node: Obj) -> dict[str, Any] | None:
    """The failed validation holding ``node``, as evidence with a message; None when none does."""
    read = read_hold(node)
    if read is None:
        return None
    hold, unreadable = read
    why = hold.describe() if hold is not None else f"its hold record cannot be read ({unreadable})"
    return {"annotation": job_result.HOLD_ANNOTATION, "driver": hold.driver if hold else None,
            "checks": list(hold.checks) if hold else [], "at": hold.at if hold else None,
            "message": f"held by a failed validation ({why}): cordoned until a person releases it "
                       "(`gpu-rollout release-node`)"}


