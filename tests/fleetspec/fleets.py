"""A hypothesis strategy for fleets the spec accepts: an example stack with a few of its values changed.

test_fuzz.py puts any value at any key of the prod stack to find crashes; most of what it draws is refused.
This strategy draws what a reviewer would see in a real change: any of the six example stacks, with a few
leaves set to a value the examples use elsewhere for the same key (or a small number, or the other
flag), and optional keys switched on or off. Draws the spec refuses are rejected by the test.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from tests.conftest import EXAMPLE_STACKS, stack_config

PREFIX = "gpu-driver-upgrade:"


def structured(config: dict[str, str]) -> dict[str, Any]:
    """The project's keys of a stack's config, with objects and lists parsed."""
    return {k: json.loads(v) if v[:1] in "{[" else v for k, v in config.items() if k.startswith(PREFIX)}


def flat(base: dict[str, str], data: dict[str, Any]) -> dict[str, str]:
    """``base`` (a stack's config map) with the project's keys set from ``data``, as the engine hands them."""
    config = {k: v for k, v in base.items() if not k.startswith(PREFIX)}
    config.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()})
    return config


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the scalar leaves (lists of scalars count as one leaf)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaf_paths(v, (*path, k))]
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*path, i))]
    return [path]


def _key(path: tuple[Any, ...]) -> str:
    named = [p for p in path if isinstance(p, str)]
    return named[-1].removeprefix(PREFIX) if named else ""


EXAMPLES = {stack: stack_config(stack) for stack in EXAMPLE_STACKS}

# Every value the examples use for a key, by the key's name: what a leaf of that name may be changed to.
PLAUSIBLE: dict[str, list[Any]] = {}
for _config in EXAMPLES.values():
    _data = structured(_config)
    for _path in leaf_paths(_data):
        _value = _data
        for _part in _path:
            _value = _value[_part]
        if _value not in PLAUSIBLE.setdefault(_key(_path), []):
            PLAUSIBLE[_key(_path)].append(_value)
MORE: dict[str, list[Any]] = {
    "nodeCount": [1, 2, 3, 5, 10], "gpusPerNode": [1, 2, 4, 8], "replicas": [1, 2, 3, 5], "gpusPerReplica": [1, 2, 4],
    "minAvailable": [1, 2, "50%", "100%"], "wave": [0, 1, 2, 3], "maxParallelUpgrades": [0, 1, 2, 3],
    "maxUnavailable": [1, 2, "10%", "50%"], "chartVersion": ["v26.3.2", "v25.10.1"],
    "version": ["580.173.02", "570.195.03", "595.91.07"], "previousVersion": ["570.195.03", "580.105.08"],
    "cudaVersion": ["12.2", "12.9", "13.0"], "gpuProduct": ["Tesla-V100-SXM2-16GB", "NVIDIA-B200"],
}

# Optional keys: (where, key, values); None removes the key.
OPTIONAL: list[tuple[tuple[Any, ...], str, list[Any]]] = [
    ((), "changeTicket", [None, "CHG-1"]),
    (("gpuOperator",), "batchJobSelectors", [None, [], ["workload-class=batch"], ["a=b", "team=ml,a=b"]]),
    (("gpuOperator",), "useNvidiaDriverCrd", [True, False]),
    (("gpuOperator",), "clusterPolicy", ["patch", "helm", "external"]),
    (("gpuOperator",), "usePrecompiled", [False]),
    (("nodePools", "*"), "nvswitch", [None, True, False]),
    (("nodePools", "*"), "fabricManager", [None, "host", "image", "driver-container"]),
    (("nodePools", "*"), "fabricManagerVersion", [None, "580.173.02", "570.195.03"]),
    (("nodePools", "*"), "role", ["canary", "serving", "batch"]),
    (("nodePools", "*"), "upgradePolicy", [None, {"maxParallelUpgrades": 2}, {"maxUnavailable": 1,
                                                                              "podDeletion": {"timeoutSeconds": 600}}]),
    (("models", "*"), "cudaForwardCompat", [True, False]),
]


@st.composite
def fleets(draw: st.DrawFn, max_edits: int = 5) -> tuple[str, dict[str, str]]:
    """(stack, config): an example stack's config with up to ``max_edits`` changes."""
    stack = draw(st.sampled_from(EXAMPLE_STACKS))
    base = EXAMPLES[stack]
    data = copy.deepcopy(structured(base))
    for _ in range(draw(st.integers(0, max_edits))):
        if draw(st.booleans()):
            path = draw(st.sampled_from(leaf_paths(data)))
            key = _key(path)
            choices = PLAUSIBLE.get(key, []) + MORE.get(key, [])
            current = _at(data, path)
            if isinstance(current, bool):
                choices = [True, False]
            if choices:
                _set(data, path, draw(st.sampled_from(choices)))
        else:
            where, name, values = draw(st.sampled_from(OPTIONAL))
            container, key = _container(draw, data, where, name)
            if container is not None:
                value = draw(st.sampled_from(values))
                if value is None:
                    container.pop(key, None)
                else:
                    container[key] = copy.deepcopy(value)
    return stack, flat(base, data)


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    _at(data, path[:-1])[path[-1]] = copy.deepcopy(value)


def _container(draw: st.DrawFn, data: dict[str, Any], where: tuple[Any, ...], key: str) -> tuple[Any, str]:
    """The object at ``where`` and the key's name in it (top-level keys carry the project's prefix; '*'
    picks an item of a list); None when there is no such object."""
    if not where:
        return data, PREFIX + key
    target: Any = data.get(PREFIX + where[0])
    for part in where[1:]:
        if part == "*":
            if not isinstance(target, list) or not target:
                return None, key
            target = target[draw(st.integers(0, len(target) - 1))]
        else:
            target = target.get(part) if isinstance(target, dict) else None
    return (target if isinstance(target, dict) else None), key
