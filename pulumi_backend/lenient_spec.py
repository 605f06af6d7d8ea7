"""A config read by the FleetSpec's own field names and defaults, without validating it.

Rollback reads configs the spec may refuse today: an update of an older release of this project, a key
whose secret could not be read. So they are read here, and only a config rollback would set goes through
:func:`fleetspec.load.spec_from_config`. :class:`LenientView` reads a value the way the spec would where it can: a field is named as the model names it (a name the model lacks is an error, not an absent value), a
field the config leaves out reads as the model's default (None where the model has none), a block as a
view of its own model, a list of blocks as a list of views. Nothing is converted or checked: a value of
the wrong type reads as it is written.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pulumi_backend.pulumi_config import Config
from fleetspec.model import PROJECT, FleetSpec

_PREFIX = f"{PROJECT}:"


def _block(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """(model, is a list) for a field that holds a block (``Model``, ``list[Model]``, either ``| None``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) != 1:
            return None
        annotation = options[0]
    many = typing.get_origin(annotation) is list
    inner = typing.get_args(annotation)[0] if many else annotation
    return (inner, many) if isinstance(inner, type) and issubclass(inner, BaseModel) else None


class LenientView:
    """One value of a config (a block, or what stands where the config has none) read by a model's fields:
    ``view.driver.version``. Its own state is in underscored slots, which no field name can shadow; read it
    with :func:`is_present` and :func:`value_of`."""

    __slots__ = ("_model", "_raw")

    def __init__(self, model: type[BaseModel], raw: Any) -> None:
        self._model = model
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # no field's name; and its own slots, before they are set (copy, pickle)
            raise AttributeError(name)
        field = _field(self._model, name)
        if isinstance(self._raw, dict) and name in self._raw:
            value = self._raw[name]
        elif field.is_required():
            value = None
        else:
            default = field.get_default(call_default_factory=True)
            value = default.model_dump(mode="json") if isinstance(default, BaseModel) else default
        block = _block(field.annotation)
        if block is None:
            return value
        model, many = block
        if many:
            return [LenientView(model, item) for item in value] if isinstance(value, list) else []
        return LenientView(model, value)

    def __repr__(self) -> str:
        return f"LenientView({self._model.__name__}, {self._raw!r})"


def _field(model: type[BaseModel], name: str) -> FieldInfo:
    field = model.model_fields.get(name)
    if field is None:
        raise AttributeError(f"{model.__name__} has no field {name!r}")
    return field


def is_present(view: LenientView) -> bool:
    """Whether an object stands where ``view`` does: the config's, or a block the model defaults to."""
    return isinstance(view._raw, dict)


def value_of(view: LenientView) -> Any:
    """What stands where ``view`` does: the config's value as written, else the model's default (None where
    the model has none)."""
    return view._raw


def with_fields(view: LenientView, **fields: Any) -> dict[str, Any]:
    """The object where ``view`` stands with these fields set (by the model's names); it is left as it was."""
    for name in fields:
        _field(view._model, name)
    return {**view._raw, **fields}


_ABSENT = object()


def _walk(model: type[BaseModel], path: tuple[str, ...]) -> None:
    """Every name of ``path`` is a field of the model it is read in (a block's model for the next name)."""
    for index, name in enumerate(path):
        field = _field(model, name)
        if index + 1 < len(path):
            block = _block(field.annotation)
            if block is None or block[1]:
                raise AttributeError(f"{model.__name__}.{name} is not a block with fields")
            model = block[0]


def _get(raw: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(raw, dict) or name not in raw:
            return _ABSENT
        raw = raw[name]
    return raw


def taken(now: LenientView, then: LenientView, *paths: tuple[str, ...]) -> Any:
    """The object where ``now`` stands with the value ``then`` has at each path (a field, or a field of a
    block, by the model's names), or without it where ``then`` has none. Blocks on the way are created only
    to hold a value; everything else of ``now`` stays as written. Both must stand where an object is."""
    result = copy.deepcopy(now._raw)
    for path in paths:
        _walk(now._model, path)
        value = _get(then._raw, path)
        parent = _get(result, path[:-1])
        if value is _ABSENT:
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            continue
        node = result
        for name in path[:-1]:
            if not isinstance(node.get(name), dict):
                node[name] = {}
            node = node[name]
        node[path[-1]] = copy.deepcopy(value)
    return result


def config_key(name: str) -> str:
    """The config key of a FleetSpec field, as the engine names it: ``gpu-driver-upgrade:nodePools``."""
    _field(FleetSpec, name)
    return _PREFIX + name


def fleet(config: Config) -> LenientView:
    """The project's keys of a config as a FleetSpec, leniently; a secret is never read (it stands absent)."""
    return LenientView(FleetSpec, {key.removeprefix(_PREFIX): entry.value for key, entry in config.items()
                                   if key.startswith(_PREFIX) and not entry.secret})
