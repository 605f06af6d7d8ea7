"""The ValidatingAdmissionPolicy that narrows one ServiceAccount's node patches: the frame the validation job's
and the guard's policies share (a node UPDATE, its status subresource included, by that account only; the old and
new labels and annotations as variables), and the CEL of "a map unchanged but for the keys a predicate allows".
Each caller brings its own validations."""

from __future__ import annotations

from typing import Any

from gpu_knowledge import kinds


def unchanged_except(new: str, old: str, allowed_key: str) -> str:
    """CEL: maps ``new`` and ``old`` hold the same keys and values, except keys ``k`` for which ``allowed_key``
    holds (those may be added, changed or removed)."""
    return (f"{new}.all(k, {allowed_key} || (k in {old} && {old}[k] == {new}[k])) && "
            f"{old}.all(k, {allowed_key} || k in {new})")


def node_patch_policy(condition: str, user: str, validations: list[dict[str, Any]]) -> dict[str, Any]:
    """The policy's spec: ``validations`` judge every node UPDATE (status included) that ``user`` makes, with
    ``variables.newLabels``/``oldLabels``/``newAnnotations``/``oldAnnotations`` (empty maps where absent)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [kinds.NODE.group], "apiVersions": ["*"], "operations": ["UPDATE"],
                               "resources": [kinds.NODE.plural, f"{kinds.NODE.plural}/status"]}],
        },
        "matchConditions": [{"name": condition, "expression": f"request.userInfo.username == '{user}'"}],
        "variables": [
            {"name": "newLabels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
            {"name": "oldLabels", "expression": "has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
            {"name": "newAnnotations",
             "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
            {"name": "oldAnnotations",
             "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
        ],
        "validations": validations,
    }


__all__ = ["node_patch_policy", "unchanged_except"]
