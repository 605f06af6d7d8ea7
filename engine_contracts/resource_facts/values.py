"""Reading facts as resources state them: tolerant lookups and the spellings of ints, flags and stages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetspec.base import Stage


def prop(mapping: Any, *path: str, default: Any = None) -> Any:
    """The value at ``path`` of nested mappings, or ``default`` where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(mapping, Mapping) or key not in mapping:
            return default
        mapping = mapping[key]
    return mapping


def as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def flag(value: Any) -> bool | None:
    """A "true"/"false" fact: None when it is absent or says neither."""
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else None


def flag_text(value: bool) -> str:
    return "true" if value else "false"


def read_stage(value: Any) -> Stage | None:
    """A stated stage, or None when it is absent or not one of the stages."""
    return Stage(value) if isinstance(value, str) and value in Stage._value2member_map_ else None
