"""One loader for the FleetSpec, used by the Pulumi program and by the command line alike.

Both start from the same thing the Pulumi engine hands a program: a flat map of config strings keyed
``gpu-driver-upgrade:<key>``, where structured values are JSON. The program reads that map from the
runtime; the CLI builds it from ``Pulumi.<stack>.yaml`` exactly as the Pulumi CLI would.
"""

from __future__ import annotations

import difflib
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fleetspec import yaml_files
from fleetspec.base import Cloud, LocatedError
from fleetspec.model import PROJECT, FleetSpec, foreign_pool_block
from fleetspec.notifications import plain_webhook_url

TOP_LEVEL_KEYS = tuple(FleetSpec.model_fields)
SCALAR_KEYS = frozenset({"stage", "changeTicket"})  # plain strings; every other key is an object or a list


# What a stack file may cost to read (fleetspec/yaml_files.py bounds aliasing and nesting too): `plan` runs on
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
    path: str  # e.g. "gpu-driver-upgrade:nodePools[1].name", as `pulumi config set --path` spells it
    message: str
    item: str = ""  # the names of the list items on the path ("gpua100"), so a reader need not count

    def __str__(self) -> str:
        return f"{self.path}{f' ({self.item})' if self.item else ''}: {self.message}"

    def one_line(self) -> str:
        """As printed, whatever line breaks the message carries (a YAML parser's quotes the offending line)."""
        return str(replace(self, message=" ".join(self.message.split())))


class SpecError(ValueError):
    """The stack config is invalid. Carries every problem, each with its key path."""

    def __init__(self, problems: list[SpecProblem], source: str = "") -> None:
        self.problems = problems
        self.source = source
        # A refused flag or environment variable is not a config problem: say input, not config.
        what = "input" if problems and all(p.path.startswith(("--", "$")) for p in problems) else "config"
        head = f"invalid {what}{f' in {source}' if source else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in problems))


def _format_path(loc: tuple[object, ...]) -> str:
    out = PROJECT
    for index, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += (":" if index == 0 else ".") + str(part)
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds, through Optional, unions, lists, tuples and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _keys_at(root: type[BaseModel], loc: tuple[object, ...]) -> list[str]:
    """The keys ``root`` allows at ``loc`` (a pydantic location without its last part)."""
    models: list[type[BaseModel]] = [root]
    for part in loc:
        if isinstance(part, int):
            continue  # a list item: its models are the list's
        fields = [f for m in models for name, f in m.model_fields.items() if part in (name, f.alias)]
        models = [m for f in fields for m in _models_in(f.annotation)]
    return sorted({f.alias or name for m in models for name, f in m.model_fields.items()})


def unknown_key(key: str, allowed: list[str], docs: str = "docs/config.md") -> str:
    """The message for a key no model has, with the nearest allowed key when one is near."""
    near = [k for k in allowed if k.lower() == key.lower()] or difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return f"unknown key ({hint}see {docs} for the keys there are)"


def _item_names(values: Any, loc: tuple[object, ...]) -> str:
    """"gpua100" for a problem under nodePools[0] named gpua100; "gpua100, generation 2" deeper down."""
    names, node = [], values
    for index, part in enumerate(loc):
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            node = node[part]
            if isinstance(node, Mapping) and loc[index + 1:] not in (("name",), ("id",)):  # not the bad name itself
                name, ident = node.get("name"), node.get("id")
                if isinstance(name, str) and name:
                    names.append(name[:63])
                elif isinstance(ident, int) and not isinstance(ident, bool):
                    names.append(f"generation {ident}")
        elif isinstance(part, str) and isinstance(node, Mapping):
            node = node.get(part)
        else:
            break
    return ", ".join(names)


def _shown(value: object) -> str:
    """The bad value, short enough for one line of an error."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Located:
    """One pydantic error in the project's words: the real key path, the message, the named items on it."""

    loc: tuple[object, ...]
    message: str
    item: str
    own_words: bool  # a validator of the project's wrote the message (it may name its own key path)


def located(line: Any, root: type[BaseModel], values: Any, docs: str) -> Located:
    """What one line of ``ValidationError.errors()`` says, for a document validated as ``root``: unknown keys
    get the nearest allowed key, missing ones say so, and pydantic's type errors echo the bad value."""
    message: str = line["msg"]
    cause = (line.get("ctx") or {}).get("error")
    # pydantic adds the member name of a union or a tagged choice to loc; keep only real keys.
    loc = tuple(p for p in line["loc"] if not (isinstance(p, str) and ("[" in p or p in ("int", "str", "object"))))
    own = False
    if isinstance(cause, LocatedError):
        loc, message, own = loc + cause.path, cause.message, True
    elif line["type"] == "extra_forbidden":
        message = unknown_key(str(loc[-1]), _keys_at(root, loc[:-1]), docs)
    elif line["type"] == "missing":
        message = "required key is missing"
    elif message.startswith("Value error, "):
        message, own = message.removeprefix("Value error, "), True  # the project's words quote the value
    else:
        message = f"{message} (got {_shown(line.get('input'))})"  # pydantic's type errors name no value
    return Located(loc, message, _item_names(values, loc), own)


def _problems(error: ValidationError, values: Mapping[str, Any]) -> list[SpecProblem]:
    problems = []
    for line in error.errors(include_url=False):
        where = located(line, FleetSpec, values, "docs/config.md")
        problems.append(SpecProblem(_format_path(where.loc), where.message, where.item))
    return problems


def _foreign_blocks(problems: list[SpecProblem], values: Mapping[str, Any]) -> list[SpecProblem]:
    """A pool block of another cloud than the cluster's (``eks:`` on an AKS stack) fails on every key inside it
    before the model can say what is wrong; say that once instead of listing its keys."""
    cluster, pools = values.get("cluster"), values.get("nodePools")
    declared = cluster.get("cloud") if isinstance(cluster, Mapping) else None
    if not isinstance(declared, str) or declared not in Cloud._value2member_map_ or not isinstance(pools, list):
        return problems
    cloud, out = Cloud(declared), list(problems)
    for index, pool in enumerate(pools):
        for block in Cloud:
            if block == cloud or not isinstance(pool, Mapping) or block not in pool:
                continue
            at = f"{PROJECT}:nodePools[{index}].{block}"
            out = [p for p in out if not (p.path == at or p.path.startswith((at + ".", at + "[")))]
            name = pool.get("name")
            out.append(SpecProblem(at, foreign_pool_block(block, cloud), name if isinstance(name, str) else ""))
    return out


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
            namespace = full_key.partition(":")[0]
            if difflib.get_close_matches(namespace, [PROJECT], n=1, cutoff=0.85):  # gpu-driver-upgrad:driver
                unknown.append(SpecProblem(full_key, f"unknown namespace '{namespace}' (did you mean "
                                                     f"'{prefix}{full_key.partition(':')[2]}'?)"))
            continue  # other namespaces (azure-native:location, kubernetes:context) are not ours
        key = full_key.removeprefix(prefix)
        if key not in TOP_LEVEL_KEYS:
            unknown.append(SpecProblem(full_key, unknown_key(key, list(TOP_LEVEL_KEYS))))
            continue
        values[key] = _decode(key, raw)
    try:
        spec = FleetSpec.model_validate(values)
    except ValidationError as exc:
        raise SpecError(unknown + _foreign_blocks(_problems(exc, values), values), source) from None
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
    if isinstance(document.get("config"), Mapping) and plain_webhook_url(document["config"], PROJECT):
        raise SpecError([SpecProblem(f"{PROJECT}:notifications.webhook.url", "is a credential, in plain text in a "
                                     "stack file: set it as a Pulumi secret (pulumi config set --secret --path "
                                     f"'{PROJECT}:notifications.webhook.url' <url>)")], str(path))
    return config_strings(document)


def load_stack_file(path: Path) -> FleetSpec:
    return spec_from_config(read_stack_file(path), source=str(path))


def stack_file(project_dir: Path, stack: str) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"
