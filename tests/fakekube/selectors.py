"""Label and field selectors as the API server reads them (the subset our checks and tests use)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, str]], bool]

_SET_OP = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses ("a in (x,y),b" has two terms)."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _term(term: str) -> Predicate:
    match = _SET_OP.match(term)
    if match:
        _, key, op, values = match.groups()
        allowed = {v.strip() for v in values.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    key = term
    if not re.match(r"^[A-Za-z0-9_./-]+$", key):
        raise ValueError(f"unable to parse requirement: {term!r}")
    return lambda labels: key in labels


def label_selector(text: str | None) -> Predicate:
    """A predicate over a label map; raises ValueError on a selector the server would refuse."""
    terms = [_term(t) for t in _split_top(text or "")]
    return lambda labels: all(t(labels) for t in terms)


def matches_selector_object(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions); an empty one matches everything."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        present = key in labels
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and present and labels.get(key) in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str | None:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return None if value is None else str(value)


def field_selector(text: str | None, supported: set[str], paths: Mapping[str, str] | None = None,
                   defaults: Mapping[str, str] | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate over an object; a field the kind does not support is refused, as the server does (400).

    ``paths`` maps a selectable field to where it lives (events' ``source`` is ``source.component``);
    ``defaults`` gives the value of a field the object leaves unset (``spec.unschedulable`` is "false").
    """
    paths, defaults = paths or {}, defaults or {}
    checks = []
    for term in _split_top(text or ""):
        op = "!=" if "!=" in term else ("==" if "==" in term else "=")
        if op not in term:
            raise ValueError(f"invalid selector: {term!r}; expected key=value or key!=value")
        path, value = (s.strip() for s in term.split(op, 1))
        if path not in supported:
            raise ValueError(f'field label not supported: "{path}"')
        checks.append((paths.get(path, path), defaults.get(path, ""), op, value))

    def predicate(obj: Mapping[str, Any]) -> bool:
        for path, default, op, value in checks:
            actual = _field(obj, path)
            actual = default if actual is None else actual.lower() if actual in ("True", "False") else actual
            if (actual == value) != (op != "!="):
                return False
        return True

    return predicate
