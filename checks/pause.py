"""Pause and resume a rollout with the operator's skip label, remembering which labels were ours.

Pause puts ``nvidia.com/gpu-driver-upgrade.skip=true`` on every node of the stack's pools that is not
``upgrade-done`` and records itself in the annotation ``gpu-driver-upgrade.io/paused-by`` (the stack
name) in the same merge patch, so each node is either fully paused by us or untouched. Resume removes
the label and the annotation from exactly the nodes carrying our annotation; a skip label someone else
set (a held pool, an operator's manual hold) has no annotation of ours and is never removed. Both are
idempotent: re-running after an interruption finishes the nodes that were not done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from checks import kube as k
from checks.inventory import labels_of, meta, name_of, pool_selector
from spec import labels
from spec.model import FleetSpec

PAUSED_BY = f"{labels.DOMAIN}/paused-by"
PAUSED_REASON = f"{labels.DOMAIN}/paused-reason"
DONE = "upgrade-done"


@dataclass
class PauseReport:
    changed: list[str] = field(default_factory=list)  # nodes this run labelled (pause) or released (resume)
    unchanged: list[str] = field(default_factory=list)  # already paused by this stack (pause)
    foreign: list[str] = field(default_factory=list)  # skip label set by someone else: left alone
    done: list[str] = field(default_factory=list)  # already upgrade-done: nothing to hold back

    def as_json(self) -> dict[str, list[str]]:
        return {"changed": self.changed, "unchanged": self.unchanged, "foreign": self.foreign, "done": self.done}


def pause(kube: k.Kube, spec: FleetSpec, stack: str, reason: str = "paused by gpu-rollout") -> PauseReport:
    report = PauseReport()
    for node in sorted(kube.list(k.NODES, label_selector=pool_selector(spec)), key=name_of):
        name, node_labels = name_of(node), labels_of(node)
        ours = (meta(node).get("annotations") or {}).get(PAUSED_BY) == stack
        if node_labels.get(labels.SKIP_UPGRADE) == "true":
            (report.unchanged if ours else report.foreign).append(name)
            continue
        if node_labels.get(labels.UPGRADE_STATE) == DONE and not ours:
            report.done.append(name)
            continue
        # One merge patch: the label and our claim on it land together or not at all.
        kube.patch(k.NODES, name, {"metadata": {"labels": {labels.SKIP_UPGRADE: "true"},
                                                "annotations": {PAUSED_BY: stack, PAUSED_REASON: reason[:500]}}})
        report.changed.append(name)
    return report


def resume(kube: k.Kube, spec: FleetSpec, stack: str) -> PauseReport:
    report = PauseReport()
    for node in sorted(kube.list(k.NODES, label_selector=pool_selector(spec)), key=name_of):
        name = name_of(node)
        annotations = meta(node).get("annotations") or {}
        if annotations.get(PAUSED_BY) != stack:
            if labels_of(node).get(labels.SKIP_UPGRADE) == "true":
                report.foreign.append(name)
            continue
        kube.patch(k.NODES, name, {"metadata": {"labels": {labels.SKIP_UPGRADE: None},
                                                "annotations": {PAUSED_BY: None, PAUSED_REASON: None}}})
        report.changed.append(name)
    return report
