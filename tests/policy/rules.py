"""Helpers for calling rules directly on rendered resources: pick resources, edit their props, build the
stack's facts a stack rule takes."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from policy.evaluate import from_registered
from policy.facts import Resource, StackFacts


def resources(run) -> list[Resource]:
    return from_registered(run.resources)


def of_type(items: list[Resource], type_token: str) -> list[Resource]:
    return [r for r in items if r.type == type_token]


def stack(items: Iterable[Resource]) -> StackFacts:
    """The facts a stack rule reads, as evaluate and the pack build them."""
    return StackFacts(items)


def spec_edit(res: Resource, path: tuple[str, ...], **changes) -> Resource:
    """``res`` with the mapping at ``path`` of its props updated (a key set to None is removed)."""
    props = copy.deepcopy(dict(res.props))
    target = props
    for key in path:
        target = target[key]
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return Resource(res.type, res.name, props, res.urn)


def edit_named(items: list[Resource], name: str, **props) -> list[Resource]:
    """``items`` with the named resource's props changed (a value of None removes the key)."""
    out = []
    for res in items:
        if res.name == name:
            edited_props = {k: v for k, v in {**res.props, **props}.items() if v is not None}
            res = Resource(res.type, res.name, edited_props, res.urn)
        out.append(res)
    return out
