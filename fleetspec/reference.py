"""The config reference, generated from the model: docs/config.md and the JSON Schema of a stack file.

Every key's description, examples, type and default live on the pydantic field (``Field(description=...,
examples=[...])``) and each block's introduction on its model's docstring, so the page cannot miss a key or
say something the loader does not do. What is not about one key (the rules that hold everywhere, what is
checked against the last deployment) is written here. ``make docs`` writes both files (scripts/config_docs.py);
tests/fleetspec/test_config_reference.py fails when a committed copy is stale.
"""

from __future__ import annotations

from datetime import date

import inspect
import json
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from fleetspec.base import PROJECT, IntOrPercent, Percent, PositiveIntOrPercent, SurgeCount
from fleetspec.model import FleetSpec
from fleetspec.observability import DecimalPercent, Duration
from gpu_knowledge.versions import ChartVersion, CudaVersion, DriverVersion, ImageRelease

CONFIG_DOC = "docs/config.md"
STACK_SCHEMA = "docs/schemas/stack-config.schema.json"

# The placeholder for the key of a map of objects (validation.baselines, promotion.waivers: both keyed by pool).
MAP_KEY = "<pool>"

# Types named by what they mean rather than by their Python spelling.
_NAMED_TYPES: dict[object, str] = {
    DriverVersion: "driver version",
    CudaVersion: "CUDA version",
    ChartVersion: "operator release",
    ImageRelease: "node image release",
    IntOrPercent: 'int >= 0 or `"N%"`',
    PositiveIntOrPercent: 'int >= 1 or `"N%"`',
    SurgeCount: 'int >= 1 or `"N%"`',
    Percent: "percentage",
    DecimalPercent: "percentage, decimals allowed",
    Duration: "duration (`90s`, `10m`, `2h`)",
}


@dataclass(frozen=True)
class Key:
    """One key of the stack config: its path from the top (``nodePools[].aks.vmSize``) and its field."""

    path: str
    field: FieldInfo

    @property
    def section(self) -> str:
        """The top-level key it sits under."""
        return re.split(r"[.\[]", self.path, maxsplit=1)[0]


def _members(annotation: object) -> list[object]:
    """The alternatives of a union (``X | None`` -> [X]; a tagged union's members unwrapped), or the annotation
    itself."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for a in get_args(annotation) if a is not type(None) for m in _members(a)]
    return [annotation]


def _nested(annotation: object) -> tuple[str, type[BaseModel]] | None:
    """The model a field's value holds, with the path step to reach its keys: ``""`` for an object, ``[]`` for a
    list of objects, ``.<pool>`` for a map of objects; None for a plain value."""
    for member in _members(annotation):
        origin, args = get_origin(member), get_args(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            return "", member
        if origin is list and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return "[]", args[0]
        if origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            return f".{MAP_KEY}", args[1]
    return None


def _alias(name: str, field: FieldInfo) -> str:
    return field.alias or name


def walk(model: type[BaseModel] = FleetSpec, prefix: str = "") -> Iterator[Key]:
    """Every key reachable from ``model``, depth first in declaration order, spelled as a stack file spells it."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{_alias(name, field)}"
        yield Key(path, field)
        nested = _nested(field.annotation)
        if nested is not None:
            step, inner = nested
            yield from walk(inner, f"{path}{step}.")


# ---------------------------------------------------------------- cells of a row


def _bounds(kind: str, metadata: list[object]) -> str:
    low = high = ""
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            low = f"> {item.gt}"
        elif isinstance(item, annotated_types.Ge):
            low = f">= {item.ge}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {item.lt}"
        elif isinstance(item, annotated_types.Le):
            high = f"<= {item.le}"
    if low.startswith(">=") and high.startswith("<="):
        return f"{kind} {low[3:]} to {high[3:]}"
    return " ".join(filter(None, [kind, ", ".join(filter(None, [low, high]))]))


def type_text(annotation: object) -> str:
    """The type column: a closed set as its values, constraints as bounds, models as objects."""
    for named, text in _NAMED_TYPES.items():
        if annotation == named:
            return text
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        # A Field() inside Annotated (PositiveInt) carries its constraints as metadata of its own.
        base = args[0]
        metadata = [m for item in args[1:] for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
        text = type_text(base)
        if text in ("int", "number"):
            return _bounds(text, metadata)
        not_empty = any(isinstance(m, annotated_types.MinLen) and m.min_length > 0 for m in metadata)
        return f"{text}, not empty" if not_empty and text != "string" else text
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return " or ".join(type_text(m) for m in members)
    if origin is Literal:
        return " | ".join(f"`{v}`" for v in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        value = type_text(args[1])
        return "label map" if value == "string" else f"map of pool name to {value}"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " | ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    names: dict[object, str] = {bool: "bool", int: "int", float: "number", str: "string",
                                date: "date (YYYY-MM-DD)"}
    return names.get(annotation, str(annotation))


def field_type(field: FieldInfo) -> str:
    return type_text(field.rebuild_annotation())


def flow(value: object, nested: bool = False) -> str:
    """A value as YAML writes it on one line (flow style). Strings are quoted where YAML would misread them, where
    they start with a digit (versions are quoted strings) and, inside a list or map, where they hold a space."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{flow(k, True)}: {flow(v, True)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v, True) for v in value) + "]"
    if isinstance(value, str):
        try:
            plain = value != "" and yaml.safe_load(value) == value
        except yaml.YAMLError:
            plain = False
        plain = plain and not value[0].isdigit() and not re.search(r"[,\[\]{}#]|: ", value)
        return value if plain and not (nested and " " in value) else json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n").removesuffix("\n...")


def default_text(field: FieldInfo) -> str:
    """The default column: required, none, the value, or "all defaults" for a block whose keys all have one."""
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "all defaults"
    return f"`{flow(value)}`"


def example_text(field: FieldInfo) -> str:
    return ", ".join(f"`{flow(e)}`" for e in field.examples or [])


# A page of docs/ named in a description (docs/validation.md#anchor) becomes a link from docs/config.md.
_DOC_PAGE = re.compile(r"(?<![\w/\[])docs/([a-z-]+\.md)(#[a-z0-9-]+)?")


def _links(text: str) -> str:
    return _DOC_PAGE.sub(lambda m: f"[{m.group(1)}]({m.group(1)}{m.group(2) or ''})", text)


def _cell(text: str) -> str:
    return _links(" ".join(text.split()).replace("|", "\\|"))


def _markdown(docstring: str) -> str:
    """A docstring as Markdown: reStructuredText's ``literal`` becomes `literal`."""
    return _links(inspect.cleandoc(docstring).replace("``", "`"))


# ---------------------------------------------------------------- the page

INTRO = """\
Every key lives in the Pulumi project namespace `gpu-driver-upgrade` of a stack file
(`Pulumi.<stack>.yaml`), as `gpu-driver-upgrade:<key>` under `config:`; objects and lists are written as YAML
structures. One loader (`fleetspec/load.py`) reads it for both `pulumi up` and `gpu-rollout`; an invalid stack fails
before anything is sent, with every problem listed by key path (as `pulumi config set --path` takes it, with the
name of the list item it is in):

```
invalid config in Pulumi.prod.yaml:
  gpu-driver-upgrade:nodePools[1].nodeCount (gpua100): Input should be a valid integer (got '3')
  gpu-driver-upgrade:driver.version: 'latest' is a moving target; pin an exact release such as 580.173.02
  gpu-driver-upgrade:gpuOperator.upgradePolicy.podDeleton: unknown key (did you mean 'podDeletion'? ...)
```

Rules that hold everywhere:

- **Unknown keys are errors**, at every level (a typo such as `gpuPodDeletion` is not ignored); the nearest
  key of the same block is suggested.
- **Versions are quoted strings.** YAML reads `12.10` as the number 12.1 and `570.26` as a float, so
  every version field (driver, CUDA, chart, AMI release, node image) refuses a number and asks for quotes.
  Floating names (`latest`, `stable`, ...) are refused.
- **Counts are integers**, never strings or booleans (`nodeCount: "4"` is refused).
- **Names are checked against the cloud's rules** whole (a trailing newline is not a name), and names
  derived from them must not collide (two pools mapping to one NVIDIADriver name, two models to one
  PDB resource name).
- A YAML date (`changeTicket: 2026-12-09`) stays the string it was written as.
- Keys from other namespaces (`azure-native:location`, `aws:region`) belong to their providers.

**In an editor.** `docs/schemas/stack-config.schema.json` is the JSON Schema of a stack file, generated from the
same model: types, closed sets, required keys and these descriptions. The YAML language server (VS Code's YAML
extension, and editors that embed it) uses it when the stack file's first line names it:

```yaml
# yaml-language-server: $schema=docs/schemas/stack-config.schema.json
```

(a path relative to the stack file; it is a comment, so Pulumi ignores it). The schema checks each key on its
own; what spans keys (a pool's cloud block matching `cluster.cloud`, pool names that models name, ...) is checked
by the loader, so run `gpu-rollout plan` too.

In the tables, a key path such as `aks.vmSize` is relative to its section, `[]` marks a list of objects and
`<pool>` the key of a map keyed by pool name. *Default*: `required` (no default), `none` (unset), the value,
or `all defaults` (a block every key of which has a default).
"""

# Prose that belongs after a section's table: about several keys at once, or about what the program records.
AFTER_SECTION: dict[str, str] = {
    "nodePools": """\
### Changes checked against the last deployment

Some changes cannot be made in one step. The program reads the stack's last deployment (its own outputs,
through a StackReference to itself) and puts what it needs on the resources, so the policy pack refuses
such a change in `pulumi preview` before anything reaches the cloud:

- **Replace-only fields of a cloud pool** (policy `cloud-pool-not-replaced`). EKS node groups:
  `amiType`, `capacityType`, `diskSize`, `instanceTypes`, the launch template id, the node role and the
  subnets; AKS agent pools: `vmSize`, the GPU driver setting (`driver.owner`) and the GPU instance profile.
  Each cloud pool carries the tag `gpu-driver-upgrade:deployed-with` with the values it was last deployed
  with. A pool keeps its explicit name for life, so a replacement would clash with itself (EKS) or go
  through a pool the cloud will not change (AKS): add a new generation or pool instead.
- **Per-pool driver mode together with an operator upgrade** (policy `per-pool-mode-own-change`).

`gpu-rollout plan` answers that reference offline: `--previous-outputs FILE` takes what
`pulumi stack output --json` prints; without it, plan sees a first deployment.
""",
    "rollout": """\
### What a deployment records (the stack output `timeline`)

`wavesReleased` (wave -> when a deployment first released it) and `generationsDeployed` (pool -> generation
id -> when first deployed), ISO 8601 in UTC. An update (`pulumi up`) records its own moment for a wave it
releases or a generation it deploys first, and copies every earlier record unchanged (so a second `up` with no
change changes nothing); a preview records nothing (it deploys nothing); a wave or generation the last
deployment ran without a record (an older release of the program) keeps none, and the rules give advice for it.
`gpu-rollout plan --previous-outputs` reads the record offline, and `--at` judges it at a given moment.
""",
}

_HEADER = "| key | type | default | example | meaning |\n|---|---|---|---|---|\n"


def _row(key: str, field: FieldInfo) -> str:
    cells = [f"`{key}`", field_type(field), default_text(field), example_text(field), field.description or ""]
    return "| " + " | ".join(_cell(c) for c in cells) + " |\n"


def config_markdown() -> str:
    """docs/config.md as the model describes it."""
    out = [
        "*Generated by `make docs` from the model (fleetspec/model.py and the modules it uses; fleetspec/reference.py). "
        "Do not edit: change a field's description or a model's docstring and run `make docs`.*\n\n",
        "# Config reference\n\n",
        INTRO,
        "\n## Top level\n\n",
        _markdown(FleetSpec.__doc__ or ""),
        "\n\n",
        _HEADER,
    ]
    out += [_row(k.path, k.field) for k in walk() if "." not in k.path and "[" not in k.path]
    for name, field in FleetSpec.model_fields.items():
        nested = _nested(field.annotation)
        if nested is None:
            continue
        step, model = nested
        heading = f"{name}{step}"
        out += [f"\n## `{heading}`\n\n"]
        if model.__doc__:
            out += [_markdown(model.__doc__), "\n\n"]
        out += [_HEADER]
        out += [_row(k.path.removeprefix(f"{heading}."), k.field) for k in walk(model, f"{heading}.")]
        if name in AFTER_SECTION:
            out += ["\n", AFTER_SECTION[name]]
    return "".join(out)


# ---------------------------------------------------------------- the JSON Schema


class _NoTitles(GenerateJsonSchema):
    """Pydantic's schema without the titles it derives from field names ("Maxunavailable"): editors show the
    description instead."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


# The top-level keys of a stack file besides `config` (the Pulumi CLI's ProjectStack).
_STACK_FILE_KEYS: dict[str, dict[str, Any]] = {
    "secretsprovider": {"type": "string", "description": "Secrets provider of the stack (Pulumi)."},
    "encryptedkey": {"type": "string", "description": "Data key of a cloud secrets provider (Pulumi)."},
    "encryptionsalt": {"type": "string", "description": "Salt of the passphrase secrets provider (Pulumi)."},
    "environment": {"description": "Pulumi ESC environments the stack imports (Pulumi)."},
}

# A value `pulumi config set --secret` wrote: the loader leaves it to the engine, which decrypts it.
_SECRET = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


def stack_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a ``Pulumi.<stack>.yaml`` of this project."""
    fleet = FleetSpec.model_json_schema(by_alias=True, mode="validation", schema_generator=_NoTitles)
    defs = fleet.pop("$defs")
    defs["PulumiSecret"] = _SECRET
    config = {
        "type": "object",
        "description": "Stack config: this project's keys (gpu-driver-upgrade:<key>) and other namespaces' keys.",
        "properties": {
            f"{PROJECT}:{key}": _or_secret(value) for key, value in fleet["properties"].items()
        },
        "required": [f"{PROJECT}:{key}" for key in fleet.get("required", [])],
        # Other namespaces (azure-native:location, aws:region) belong to their providers; any value.
        "patternProperties": {f"^(?!{re.escape(PROJECT)}:)[^:]+:.+$": {}},
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Pulumi.<stack>.yaml of {PROJECT}",
        "description": f"Generated by `make docs` from the model (fleetspec/reference.py); see {CONFIG_DOC}.",
        "type": "object",
        "properties": {"config": config, **_STACK_FILE_KEYS},
        "required": ["config"],
        "additionalProperties": False,
        "$defs": defs,
    }


def _or_secret(value: dict[str, Any]) -> dict[str, Any]:
    """The key's schema, or an encrypted value (``{secure: ...}``): the description stays on the outside for
    editors, and if/then/else (not anyOf) so that an error inside the key is reported at the bad key itself."""
    inner = {k: v for k, v in value.items() if k not in ("description", "default", "examples")}
    outer = {k: v for k, v in value.items() if k in ("description", "default", "examples")}
    return {**outer, "if": {"type": "object", "required": ["secure"]}, "then": {"$ref": "#/$defs/PulumiSecret"},
            "else": inner}


def stack_schema_json() -> str:
    return json.dumps(stack_schema(), indent=2, ensure_ascii=False) + "\n"
