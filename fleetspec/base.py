"""Shared pieces of the FleetSpec models: the strict base model, closed sets, name rules and errors."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, WithJsonSchema

from gpu_knowledge.capacity import PERCENT, percent_of

PROJECT = "gpu-driver-upgrade"

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]

LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
AKS_POOL = re.compile(r"^[a-z][a-z0-9]{0,11}$")
EKS_NODEGROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")

# Counts that may be percentages, read by field validators (int_or_percent); their JSON Schema says the same for
# editors (docs/schemas/stack-config.schema.json), which pydantic cannot infer from a `mode="before"` validator.
_PERCENT_FROM_1 = r"^(100|[1-9]\d?)%$"
IntOrPercent = Annotated[int | str, WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": PERCENT.pattern}]})]
PositiveIntOrPercent = Annotated[int | str, WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": _PERCENT_FROM_1}]})]
# AKS takes maxSurge as a string ("1", "33%"); a YAML integer is accepted and kept as its string.
SurgeCount = Annotated[str, WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": r"^([1-9]\d*|(100|[1-9]\d?)%)$"}]})]
# A percentage from 0% to 100% written as a string ("10%"), checked by a field validator (percent_of).
Percent = Annotated[str, WithJsonSchema({"type": "string", "pattern": PERCENT.pattern})]


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stage(StrEnum):
    CANARY = "canary"
    PROD = "prod"


class Cloud(StrEnum):
    AKS = "aks"
    EKS = "eks"
    EXISTING = "existing"


class DriverOwner(StrEnum):
    OPERATOR = "operator"  # the GPU Operator's containerized driver
    IMAGE = "image"  # the node image (AKS node image, EKS NVIDIA AMI) carries the driver


class ClusterPolicyMode(StrEnum):
    PATCH = "patch"  # patch the existing ClusterPolicy `cluster-policy` (operator installed elsewhere)
    HELM = "helm"  # this stack installs the pinned gpu-operator chart
    EXTERNAL = "external"  # another stack owns the ClusterPolicy; this one never touches it


def int_or_percent(value: object, what: str) -> int | str:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer or a percentage such as '25%', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        return value
    if isinstance(value, str) and percent_of(value) is not None:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        raise ValueError(f"{what} must be a percentage from 0% to 100%, got {value!r}")
    raise ValueError(f"{what} must be an integer or a percentage such as '25%', got {value!r}")


def check_label_map(value: dict[str, str], what: str = "label") -> dict[str, str]:
    """Keys and values of a Kubernetes label map (matchLabels, nodeSelector), checked as the API server does."""
    for key, val in value.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not LABEL_PREFIX.fullmatch(prefix)) or not LABEL_NAME.fullmatch(name):
            raise ValueError(f"'{key}' is not a valid {what} key")
        if not isinstance(val, str) or (val and not LABEL_NAME.fullmatch(val)):
            raise ValueError(f"'{val}' is not a valid {what} value for '{key}'")
    return value


def check_pinned_image(value: str) -> str:
    """An image with an explicit tag or a digest, never ``latest`` or no tag at all (which means latest)."""
    last = value.rsplit("/", 1)[-1]
    if "@sha256:" not in value and (":" not in last or last.endswith(":latest")):
        raise ValueError(f"image '{value}' must carry an explicit tag or digest, not latest")
    return value


def kubernetes_name(name: str) -> str:
    """A cloud pool name as a Kubernetes object name (EKS allows '_' and capitals, Kubernetes does not)."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")


class LocatedError(ValueError):
    """A validation error raised by a model validator that knows a more precise key path."""

    def __init__(self, path: tuple[object, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def at(path: tuple[object, ...], message: str) -> LocatedError:
    return LocatedError(path, message)

