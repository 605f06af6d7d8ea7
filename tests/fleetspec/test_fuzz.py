"""Hypothesis fuzzes the FleetSpec: any value at any key gives a clean SpecError or a valid spec, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import FleetSpec
from tests.conftest import stack_config

BASE = stack_config("prod")
PREFIX = "gpu-driver-upgrade:"
STRUCTURED = {k: json.loads(v) if v[:1] in "{[" else v for k, v in BASE.items() if k.startswith(PREFIX)}


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, (*path, k))] + [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, (*path, i))] + [path]
    return [path]


PATHS = [p for key, value in STRUCTURED.items() for p in _leaf_paths(value, (key,)) if len(p) > 0]

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _replace(path: tuple[Any, ...], value: Any) -> dict[str, str]:
    data = json.loads(json.dumps(STRUCTURED))
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    out = dict(BASE)
    for key, val in data.items():
        out[key] = val if isinstance(val, str) else json.dumps(val)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=junk)
def test_any_value_anywhere_gives_a_spec_or_a_clean_error(path: tuple[Any, ...], value: Any) -> None:
    config = _replace(path, value)
    try:
        spec = spec_from_config(config)
    except SpecError as error:  # either outcome is fine here, so not pytest.raises
        assert error.problems, "a SpecError must carry at least one problem"  # noqa: PT017
        for problem in error.problems:
            assert problem.path.startswith(PREFIX), problem
            assert problem.message.strip(), problem
    else:
        assert isinstance(spec, FleetSpec)


VERSION_PATHS = [
    ("gpu-driver-upgrade:driver", "version"),
    ("gpu-driver-upgrade:driver", "previousVersion"),
    ("gpu-driver-upgrade:gpuOperator", "chartVersion"),
    ("gpu-driver-upgrade:models", 0, "cudaVersion"),
]


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(VERSION_PATHS), number=st.integers(0, 999) | st.floats(0, 999, allow_nan=False))
def test_numbers_in_version_fields_are_refused(path: tuple[Any, ...], number: float) -> None:
    config = _replace(path, number)
    with pytest.raises(SpecError) as raised:
        spec_from_config(config)
    expected = str(path[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    assert any(p.path == expected and "quoted" in p.message for p in raised.value.problems), raised.value.problems
