"""What a rendering changes against the last deployment's, resource by resource, as `pulumi preview --diff` marks
it: create, adopt (created no, imported: Pulumi's ``import``), update, replace (a field the cloud cannot change in
place: :mod:`gpu_knowledge.replacement`), delete, same; and the fields a reviewer checks (``preview.summary``), old →
new. The last deployment's rendering is the stack file at the base revision rendered offline (kept by
:mod:`preview.renderings`); its resources are compared by type and name, their inputs whole."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine_contracts import resource_facts as rf
from gpu_knowledge.replacement import AKS_REPLACE_ONLY, EKS_REPLACE_ONLY
from preview.summary import review_fields
from vocabulary.verdicts import ChangeMarker


Marker = ChangeMarker

SIGN = {Marker.CREATE: "+", Marker.ADOPT: "=>", Marker.UPDATE: "~", Marker.REPLACE: "+-", Marker.DELETE: "-",
        Marker.SAME: " "}


@dataclass(frozen=True)
class Rendered:
    """A custom resource as a rendering registers it: what the comparison reads."""

    type: str
    name: str
    inputs: Mapping[str, Any]
    adopt: str = ""


@dataclass(frozen=True)
class Change:
    marker: Marker
    type: str
    name: str
    fields: tuple[tuple[str, str, str], ...] = field(default=())  # (field, old, new), what a reviewer checks
    replaced_by: tuple[str, ...] = ()  # the replace-only fields that differ


def _get(inputs: Mapping[str, Any], path: str) -> Any:
    value: Any = inputs
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _replace_only(type_token: str) -> tuple[str, ...]:
    return AKS_REPLACE_ONLY if type_token == rf.AKS_POOL else EKS_REPLACE_ONLY if type_token == rf.EKS_NODE_GROUP else ()


def _fields(type_token: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    before: dict[str, str] = {}
    for key, value in review_fields(type_token, dict(old)):
        before[key] = f"{before[key]}; {value}" if key in before else value
    after: dict[str, str] = {}
    for key, value in review_fields(type_token, dict(new)):
        after[key] = f"{after[key]}; {value}" if key in after else value
    return tuple((key, before.get(key, "-"), after.get(key, "-")) for key in dict.fromkeys([*before, *after])
                 if before.get(key) != after.get(key))


MAX_LEAVES = 6  # changed values listed where the reviewer's fields show none, or only long ones
LONG = 160  # a reviewer's field longer than this is compared by its changed values instead


def _leaves(old: Any, new: Any, path: str = "") -> list[tuple[str, str, str]]:
    """The changed values of two input trees, by path (``tags.gpu-driver-upgrade:change-ticket``)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        found = []
        for key in sorted(set(old) | set(new)):
            found += _leaves(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return found
    if old == new:
        return []

    def shown(value: Any) -> str:
        text = "-" if value is None else value if isinstance(value, str) else repr(value)
        return text if len(text) <= 80 else f"{text[:77]}..."

    return [(path or "inputs", shown(old), shown(new))]


def _changed(type_token: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    fields = _fields(type_token, old, new)
    if fields and all(len(a) <= LONG and len(b) <= LONG for _, a, b in fields):
        return fields
    leaves = _leaves(old, new)
    more = [("...", f"{len(leaves) - MAX_LEAVES} more", "(--json has the inputs whole)")] if len(leaves) > MAX_LEAVES else []
    return (*leaves[:MAX_LEAVES], *more)


def compare(current: Iterable[Rendered], last: Iterable[Rendered]) -> list[Change]:
    """Each resource of ``current`` marked against ``last`` (the last deployment's), then each of ``last`` that is
    gone (delete); in type and name order within each."""
    before = {(r.type, r.name): r for r in last}
    found = []
    for resource in sorted(current, key=lambda r: (r.type, r.name)):
        old = before.pop((resource.type, resource.name), None)
        if old is None:
            found.append(Change(Marker.ADOPT if resource.adopt else Marker.CREATE, resource.type, resource.name))
            continue
        if old.inputs == resource.inputs:
            found.append(Change(Marker.SAME, resource.type, resource.name))
            continue
        replaced = tuple(f for f in _replace_only(resource.type) if _get(old.inputs, f) != _get(resource.inputs, f))
        found.append(Change(Marker.REPLACE if replaced else Marker.UPDATE, resource.type, resource.name,
                            _changed(resource.type, old.inputs, resource.inputs), replaced))
    found += [Change(Marker.DELETE, r.type, r.name) for r in sorted(before.values(), key=lambda r: (r.type, r.name))]
    return found


def counts(changes: Iterable[Change]) -> dict[Marker, int]:
    """How many of each marker, in the markers' order, those with none left out."""
    tally = {marker: 0 for marker in Marker}
    for change in changes:
        tally[change.marker] += 1
    return {marker: n for marker, n in tally.items() if n}
