"""One loader for the FleetSpec, used by the Pulumi program and by the command line alike.

Both start from the same thing the Pulumi engine hands a program: a flat map of config strings keyed
``gpu-driver-upgrade:<key>``, where structured values are JSON. The program reads that map from the
runtime; the CLI builds it from ``Pulumi.<stack>.yaml`` exactly as the Pulumi CLI would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spec import yaml_files
from spec.base import LocatedError
from spec.model import PROJECT, FleetSpec

TOP_LEVEL_KEYS = tuple(FleetSpec.model_fields)
SCALAR_KEYS = frozenset({"stage", "changeTicket"})  # plain strings; every other key is an object or a list


# What a stack file may cost to read (spec/yaml_files.py bounds aliasing and nesting too): `plan` runs on
# contributed changes in PR workflows.
MAX_STACK_FILE_BYTES = 4 * 1024 * 1024


class _StackFileLoader(yaml_files.StrictLoader):
    """YAML as Pulumi's CLI reads it for config: a mapping key given twice is an error (not last-one-wins),
    and a date such as 2026-12-09 stays the string it was written as."""


_StackFileLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml_files.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class SpecProblem:
    path: str  # e.g. "gpu-driver-upgrade:nodePools[1].name"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SpecError(ValueError):
    """The stack config is invalid. Carries every problem, each with its key path."""

    def __init__(self, problems: list[SpecProblem], source: str = "") -> None:
        self.problems = problems
        self.source = source
        head = f"invalid config{f' in {source}' if source else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in problems))


def _format_path(loc: tuple[object, ...]) -> str:
    out = PROJECT
    for index, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += (":" if index == 0 else ".") + str(part)
    return out


def _problems(error: ValidationError) -> list[SpecProblem]:
    problems = []
    for line in error.errors(include_url=False):
        loc: tuple[object, ...] = tuple(line["loc"])
        message = line["msg"]
        cause = (line.get("ctx") or {}).get("error")
        if isinstance(cause, LocatedError):
            loc, message = loc + cause.path, cause.message
        elif line["type"] == "extra_forbidden":
            message = "unknown key (check its spelling against docs/config.md)"
        elif line["type"] == "missing":
            message = "required key is missing"
        elif message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        # pydantic adds the member name of a union or a tagged choice to loc; keep only real keys.
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in ("int", "str"))))
        problems.append(SpecProblem(_format_path(loc), message))
    return problems


def _decode(key: str, raw: str) -> Any:
    """Config strings as the engine passes them: objects and lists are JSON, scalars are plain."""
    text = raw.strip()
    if key not in SCALAR_KEYS and text[:1] in "{[":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError([SpecProblem(f"{PROJECT}:{key}", f"is not valid JSON: {exc}")]) from exc
    return raw


def spec_from_config(config: Mapping[str, str], source: str = "") -> FleetSpec:
    """Build the FleetSpec from engine-style config strings; raise SpecError naming every bad key."""
    prefix = f"{PROJECT}:"
    values: dict[str, Any] = {}
    unknown = []
    for full_key, raw in config.items():
        if not full_key.startswith(prefix):
            continue  # other namespaces (azure-native:location, kubernetes:context) are not ours
        key = full_key.removeprefix(prefix)
        if key not in TOP_LEVEL_KEYS:
            unknown.append(SpecProblem(full_key, "unknown key (check its spelling against docs/config.md)"))
            continue
        values[key] = _decode(key, raw)
    try:
        spec = FleetSpec.model_validate(values)
    except ValidationError as exc:
        raise SpecError(unknown + _problems(exc), source) from None
    if unknown:
        raise SpecError(unknown, source)
    return spec


# ---------------------------------------------------------------- stack files


def config_strings(stack_yaml: Mapping[str, Any]) -> dict[str, str]:
    """Turn the ``config:`` block of a stack file into engine-style strings, as the Pulumi CLI does."""
    config = stack_yaml.get("config") or {}
    if not isinstance(config, Mapping):
        raise SpecError([SpecProblem("config", "must be a mapping of config keys")])
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            continue  # secrets are never needed to plan; the engine decrypts them for real runs
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, (Mapping, list)):
            # As the Pulumi CLI writes structured config for a program: Go's json.Marshal (compact, keys sorted).
            out[str(key)] = json.dumps(value, separators=(",", ":"), sort_keys=True)
        elif isinstance(value, bool):
            out[str(key)] = "true" if value else "false"
        else:
            out[str(key)] = json.dumps(value)
    return out


def read_stack_file(path: Path) -> dict[str, str]:
    """Config strings of one ``Pulumi.<stack>.yaml``; any file that is not one is a SpecError (exit 2)."""
    try:
        document = yaml_files.read(path, MAX_STACK_FILE_BYTES, _StackFileLoader) or {}
    except yaml_files.YamlFileError as exc:
        why = str(exc) + ("; Pulumi refuses duplicate keys, keep one" if "is given twice" in str(exc) else "")
        raise SpecError([SpecProblem(str(path), f"is {why}" if not why.startswith("key ") else why)]) from None
    if not isinstance(document, Mapping):
        raise SpecError([SpecProblem(str(path), "must be a YAML mapping with a config: block")])
    return config_strings(document)


def load_stack_file(path: Path) -> FleetSpec:
    return spec_from_config(read_stack_file(path), source=str(path))


def stack_file(project_dir: Path, stack: str) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"
