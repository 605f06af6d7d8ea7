"""The guard's ``/metrics``, in the Prometheus text format (version 0.0.4), from its last look
(:class:`checks.guard.Assessment`) and its counters. Every series carries ``stack``. Each trigger and drift kind is
always there (0 when none stands), so a board's panels and the alerts have a series to read before anything happens.

A handful of gauges and counters written by hand: the text format is simple and the series are few, so no client
library earns its place (docs/guard.md lists them; docs/grafana/gpu-rollout-guard.json draws them).
"""

from __future__ import annotations

from collections.abc import Iterable

from checks.guard import Guard
from vocabulary.triggers import DriftKind, TriggerKind

PREFIX = "gpu_rollout_guard_"

# name -> (type, help)
FAMILIES: dict[str, tuple[str, str]] = {
    "up": ("gauge", "1 while every watch stream is live and the Lease current (as /healthz answers 200)"),
    "leader": ("gauge", "1 on the replica that leads (the only one that pauses and writes)"),
    "silenced": ("gauge", "1 while a person's silence on the guard's Lease holds (planned work: nothing is paused)"),
    "watch_live": ("gauge", "1 while the watch stream of this kind is live"),
    "relists_total": ("counter", "LISTs of this kind: the first, then one per 410 Gone"),
    "nodes": ("gauge", "the stack's nodes per pool per upgrade state (none: no upgrade-state label)"),
    "triggers": ("gauge", "triggers standing now, by kind"),
    "triggers_acted_total": ("counter", "triggers the leader acted on (paused and recorded), by kind"),
    "paused": ("gauge", "1 while nodes of the stack carry its pause"),
    "paused_nodes": ("gauge", "nodes of the stack paused by it (skip label and its claim)"),
    "drift": ("gauge", "drift standing now, by kind (an alert, never a pause)"),
    "validation_nodes": ("gauge", "the stack's nodes per pool by their last validation verdict (none: no result)"),
    "validation_age_seconds": ("gauge", "age of the pool's newest validation result"),
    "last_look_timestamp_seconds": ("gauge", "when the guard last judged the cluster (unix seconds)"),
    "look_duration_seconds": ("gauge", "how long the last look took to judge"),
    "pauses_total": ("counter", "pauses written"),
    "pause_failures_total": ("counter", "pauses that failed (tried again at the next look)"),
    "evictions_total": ("counter", "model pods evicted from nodes a failed validation holds"),
    "events_total": ("counter", "Events written"),
    "look_failures_total": ("counter", "looks that failed (said on stderr; /healthz fails while none succeeds)"),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{key}="{_escape(str(val))}"' for key, val in labels.items())
    return f"{PREFIX}{name}{{{inner}}} {value:g}"


def _samples(guard: Guard) -> Iterable[tuple[str, dict[str, str], float]]:
    stack = {"stack": guard.stack}
    yield "up", stack, float(guard.healthy())
    yield "leader", stack, float(guard.leadership.leader)
    yield "silenced", stack, float(guard.leadership.silenced(guard.clock()))
    for kind, informer in sorted(guard.informers.items()):
        yield "watch_live", {**stack, "kind": kind}, float(informer.live)
        yield "relists_total", {**stack, "kind": kind}, float(informer.lists)
    counters = guard.counters
    for kind in TriggerKind:
        yield "triggers_acted_total", {**stack, "kind": kind.value}, float(counters.triggers[kind.value])
    yield "pauses_total", stack, float(counters.pauses)
    yield "pause_failures_total", stack, float(counters.pause_failures)
    yield "evictions_total", stack, float(counters.evictions)
    yield "events_total", stack, float(counters.events)
    yield "look_failures_total", stack, float(counters.look_failures)
    found = guard.last
    if found is None:
        return
    for (pool, state), count in sorted(found.states.items()):
        yield "nodes", {**stack, "pool": pool, "state": state}, float(count)
    standing = [t.kind for t in found.triggers]
    for kind in TriggerKind:
        yield "triggers", {**stack, "kind": kind.value}, float(standing.count(kind))
    paused = guard.paused_nodes(found)
    yield "paused", stack, float(paused > 0)
    yield "paused_nodes", stack, float(paused)
    drifting = [d.kind for d in found.drift]
    for drift_kind in DriftKind:
        yield "drift", {**stack, "kind": drift_kind.value}, float(drifting.count(drift_kind))
    for pool, (verdicts, age) in sorted(found.validation.items()):
        for verdict in ("passed", "failed", "none"):
            yield "validation_nodes", {**stack, "pool": pool, "verdict": verdict}, float(verdicts[verdict])
        if age is not None:
            yield "validation_age_seconds", {**stack, "pool": pool}, age
    yield "last_look_timestamp_seconds", stack, found.at
    yield "look_duration_seconds", stack, found.seconds


def render(guard: Guard) -> str:
    """The exposition text: each family's HELP and TYPE, then its samples."""
    by_family: dict[str, list[str]] = {name: [] for name in FAMILIES}
    for name, labels, value in _samples(guard):
        by_family[name].append(_line(name, labels, value))
    out = []
    for name, lines in by_family.items():
        if not lines:
            continue
        kind, text = FAMILIES[name]
        out += [f"# HELP {PREFIX}{name} {text}", f"# TYPE {PREFIX}{name} {kind}", *lines]
    return "\n".join(out) + "\n"
