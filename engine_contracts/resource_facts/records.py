"""The cluster-identity record (a ConfigMap): which cluster this is and what this deployment runs; and the
stack-wide facts any resource may state (stage, change ticket, batch selectors). What the last deployment
ran is not here: the pack reads it from the program's StackReference to itself (``previous``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu_knowledge import labels
from fleetspec.base import Stage
from engine_contracts.resource_facts.drivers import read_batch_selectors
from engine_contracts.resource_facts.values import flag, flag_text, prop, read_stage


@dataclass(frozen=True)
class IdentityFacts:
    """Which cluster this is and what this deployment runs (the record's data)."""

    cluster: str | None
    cloud: str | None
    stage: Stage | None
    operator_version: str | None
    per_pool_drivers: bool | None  # the operator's driver owned per pool by NVIDIADrivers
    aks_resource_group: str | None = None
    aks_cluster_name: str | None = None
    eks_cluster_name: str | None = None
    eks_region: str | None = None
    # ClusterPolicy mode: why held pools may be held by the skip label alone (gpuOperator.unpinnedHoldReason)
    unpinned_hold_reason: str | None = None
    # The version of the facts the program wrote (engine_contracts.resource_facts.version); None: not stated or malformed
    facts_version: int | None = None
    # The rollout's discipline as the stack declares it (fleetspec.discipline.RolloutSettings): hours and reasons,
    # and the maintenance window as its JSON (None where the stack declares none).
    wave_dwell_hours: float | None = None
    early_release_reason: str | None = None
    serving_before_batch_reason: str | None = None
    keep_generation_hours: float | None = None
    early_retire_reason: str | None = None
    maintenance_window: str | None = None
    validation_job: bool | None = None  # the stack declares the post-upgrade validation job


_IDENTITY_DATA = (
    ("cluster", "cluster"), ("cloud", "cloud"), ("stage", "stage"), ("operatorVersion", "operator_version"),
    ("perPoolDrivers", "per_pool_drivers"), ("aksResourceGroup", "aks_resource_group"),
    ("aksClusterName", "aks_cluster_name"), ("eksClusterName", "eks_cluster_name"), ("eksRegion", "eks_region"),
    ("unpinnedHoldReason", "unpinned_hold_reason"), ("factsVersion", "facts_version"),
    ("waveDwellHours", "wave_dwell_hours"), ("earlyReleaseReason", "early_release_reason"),
    ("servingBeforeBatchReason", "serving_before_batch_reason"), ("keepGenerationHours", "keep_generation_hours"),
    ("earlyRetireReason", "early_retire_reason"), ("maintenanceWindow", "maintenance_window"),
    ("validationJob", "validation_job"),
)


def identity_labels() -> dict[str, str]:
    return {labels.RECORD: labels.RECORD_CLUSTER_IDENTITY}


def identity_annotations(stage: Stage) -> dict[str, str]:
    return {labels.ANNOTATION_STAGE: stage.value}


def identity_data(facts: IdentityFacts) -> dict[str, str]:
    """The record's data, in a fixed order; a cloud's names only on that cloud."""
    out = {}
    for key, field in _IDENTITY_DATA:
        value = getattr(facts, field)
        if isinstance(value, bool):
            out[key] = flag_text(value)
        elif isinstance(value, float):
            out[key] = f"{value:g}"
        elif value is not None:
            out[key] = str(value)
    return out


def read_identity(props: Mapping[str, Any]) -> IdentityFacts:
    data = props.get("data") or {}
    values: dict[str, Any] = {field: data.get(key) for key, field in _IDENTITY_DATA}
    return IdentityFacts(**{
        **values,
        "stage": read_stage(values["stage"]),
        "per_pool_drivers": flag(values["per_pool_drivers"]),
        "facts_version": _version(values["facts_version"]),
        "wave_dwell_hours": _hours(values["wave_dwell_hours"]),
        "keep_generation_hours": _hours(values["keep_generation_hours"]),
        "validation_job": flag(values["validation_job"]),
    })


def _hours(value: Any) -> float | None:
    """Stated hours: a non-negative number written as text, else None (not stated or malformed)."""
    try:
        hours = float(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return hours if hours is not None and hours >= 0 and hours == hours and hours != float("inf") else None


def _version(value: Any) -> int | None:
    """A stated facts version: a positive whole number written as digits, else None (malformed)."""
    return int(value) if isinstance(value, str) and value.isdigit() and int(value) > 0 else None


# ---------------------------------------------------------------- stack-wide statements

def stated_values(props: Mapping[str, Any], annotation: str, tag: str) -> set[str]:
    """A stack-wide fact as one resource states it: as an annotation (Kubernetes objects) or a tag (cloud pools)."""
    note = prop(props, "metadata", "annotations", annotation)
    tagged = prop(props, "tags", tag)
    return {v for v in (note, tagged) if isinstance(v, str) and v}


def stated_stages(props: Mapping[str, Any]) -> set[str]:
    return stated_values(props, labels.ANNOTATION_STAGE, labels.TAG_STAGE)


def stated_change_tickets(props: Mapping[str, Any]) -> set[str]:
    return stated_values(props, labels.ANNOTATION_CHANGE_TICKET, labels.TAG_CHANGE_TICKET)


def stated_batch_selectors(props: Mapping[str, Any]) -> tuple[str, ...]:
    """The batch selectors a Kubernetes object states (PDBs, the ClusterPolicy patch, NVIDIADrivers)."""
    return read_batch_selectors(prop(props, "metadata", "annotations"))
