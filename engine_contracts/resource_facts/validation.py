"""The validation job's DaemonSets (components/validation.py): which pool each validates, and the GPUs its pod
requests on a node of that pool while it runs, which the capacity rules count (``FleetSpec.validation_gpus``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_knowledge import labels
from engine_contracts.resource_facts.tokens import DAEMON_SET
from engine_contracts.resource_facts.values import as_int, prop


def validation_daemonset_labels(pool: str) -> dict[str, str]:
    """The metadata labels that name the pool a validation DaemonSet validates (not its selector: the pool's
    Kubernetes name there may differ from its name)."""
    return {labels.POOL: pool}


def read_validation_gpus(type_token: str, props: Mapping[str, Any]) -> tuple[str, int] | None:
    """(pool, GPUs one validation pod requests) of a validation DaemonSet; None for anything else, or a
    DaemonSet that names no pool."""
    if type_token != DAEMON_SET:
        return None
    pool = prop(props, "metadata", "labels", labels.POOL)
    if not isinstance(pool, str) or not pool:
        return None
    containers = prop(props, "spec", "template", "spec", "containers")
    gpus = 0
    for container in containers if isinstance(containers, list) else []:
        requested = prop(container, "resources", "requests", labels.GPU_RESOURCE) if isinstance(container, Mapping) else None
        gpus += as_int(requested) or 0
    return pool, gpus
