"""The in-cluster guard (components/guard.py): which objects are the guard's, and the image its Deployment runs,
which policy `guard-image-digest` judges in prod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine_contracts.resource_facts.tokens import DEPLOYMENT, NAMESPACE, PDB
from engine_contracts.resource_facts.values import prop
from fleetspec.base import PROJECT

GUARD_NAME = "gpu-rollout-guard"  # its Deployment, ServiceAccount, Service and Lease, and its app label
APP_NAME_LABEL = "app.kubernetes.io/name"
APP_PART_OF_LABEL = "app.kubernetes.io/part-of"


def guard_labels() -> dict[str, str]:
    """The labels of every object of the guard, and of its pods."""
    return {APP_NAME_LABEL: GUARD_NAME, APP_PART_OF_LABEL: PROJECT}


def is_guard(props: Mapping[str, Any]) -> bool:
    return bool(prop(props, "metadata", "labels", APP_NAME_LABEL) == GUARD_NAME)


def is_model_budget(type_token: str, props: Mapping[str, Any]) -> bool:
    """A PDB of a model server: every PDB the program registers but the guard's own."""
    return type_token == PDB and not is_guard(props)


def is_guard_namespace(type_token: str, props: Mapping[str, Any]) -> bool:
    """The guard's Namespace: declared wherever the guard is enabled, with or without an image."""
    return type_token == NAMESPACE and is_guard(props)


def read_guard_images(type_token: str, props: Mapping[str, Any]) -> list[str] | None:
    """The images the guard's Deployment runs; None for anything else."""
    if type_token != DEPLOYMENT or not is_guard(props):
        return None
    containers = prop(props, "spec", "template", "spec", "containers")
    return [str(c.get("image") or "") for c in containers if isinstance(c, Mapping)] \
        if isinstance(containers, list) else []
