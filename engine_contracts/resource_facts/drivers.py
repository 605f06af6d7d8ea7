"""The operator's driver objects: their annotations, and the driver settings a ClusterPolicy, the chart's
values or an NVIDIADriver pins, read the same way whichever it is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpu_knowledge import labels
from fleetspec.base import Stage
from gpu_knowledge.operator_chart import CRD_USE_DRIVER_CRD, HELM_DRIVER_CRD, crd_upgrade_policy
from engine_contracts.resource_facts.tokens import CLUSTER_POLICY_TYPES, HELM_RELEASE, NVIDIA_DRIVER, OPERATOR_CHART
from engine_contracts.resource_facts.values import flag, flag_text, prop, read_stage


@dataclass(frozen=True)
class DriverNotes:
    """Annotations on the operator's driver objects (the ClusterPolicy patch, each NVIDIADriver)."""

    stage: Stage | None
    operator_version: str | None  # the GPU Operator release the driver runs under
    target_driver: str | None  # the stack's driver.version
    held: bool | None = None  # NVIDIADrivers only: the pool is held on its previous driver
    batch_selectors: tuple[str, ...] = ()
    dcgm_exporter: str | None = None  # the DCGM Exporter image tag the stack declares (gpuOperator.dcgmExporterVersion)


def driver_annotations(notes: DriverNotes) -> dict[str, str]:
    out = {
        labels.ANNOTATION_STAGE: str(notes.stage),
        labels.ANNOTATION_OPERATOR_VERSION: str(notes.operator_version),
        labels.ANNOTATION_TARGET_DRIVER: str(notes.target_driver),
    }
    if notes.held is not None:
        out[labels.ANNOTATION_HELD] = flag_text(notes.held)
    out.update(batch_selector_annotation(notes.batch_selectors))
    if notes.dcgm_exporter is not None:
        out[labels.ANNOTATION_DCGM_EXPORTER] = notes.dcgm_exporter
    return out


def read_driver_annotations(annotations: Mapping[str, Any]) -> DriverNotes:
    return DriverNotes(
        stage=read_stage(annotations.get(labels.ANNOTATION_STAGE)),
        operator_version=annotations.get(labels.ANNOTATION_OPERATOR_VERSION),
        target_driver=annotations.get(labels.ANNOTATION_TARGET_DRIVER),
        held=flag(annotations.get(labels.ANNOTATION_HELD)),
        batch_selectors=read_batch_selectors(annotations),
        dcgm_exporter=annotations.get(labels.ANNOTATION_DCGM_EXPORTER),
    )


def batch_selector_annotation(selectors: Iterable[str]) -> dict[str, str]:
    """Declared batch or fine-tuning pod selectors, one per line; nothing when there are none."""
    selectors = list(selectors)
    return {labels.ANNOTATION_BATCH_SELECTORS: "\n".join(selectors)} if selectors else {}


def read_batch_selectors(annotations: Any) -> tuple[str, ...]:
    note = annotations.get(labels.ANNOTATION_BATCH_SELECTORS) if isinstance(annotations, Mapping) else None
    return tuple(s for s in note.split("\n") if s.strip()) if isinstance(note, str) else ()


@dataclass(frozen=True)
class OperatorDriverFacts:
    """Where the operator's containerized driver is pinned: a ClusterPolicy, the chart's values or an
    NVIDIADriver, read the same way whichever it is. Values are as sent, malformed or not."""

    kind: str  # the resource's type token
    enabled: bool
    version: Any
    precompiled: bool
    selector: Mapping[str, str] | None  # None: every GPU node (a cluster-wide driver)
    default: bool  # an NVIDIADriver that only takes nodes no other one selects
    use_crd: bool  # a cluster-wide driver that hands pools to NVIDIADrivers
    upgrade_policy: Any  # in the CRD's spelling (podDeletion); None when unset
    operator_version: str | None
    role: str | None  # the pool role an NVIDIADriver is labelled with
    notes: DriverNotes


def read_operator_driver(type_token: str, props: Mapping[str, Any]) -> OperatorDriverFacts | None:
    """The operator driver a resource pins, or None when it pins none (a Helm Release of another chart)."""
    annotations = prop(props, "metadata", "annotations", default={}) or {}
    notes = read_driver_annotations(annotations)
    role = prop(props, "metadata", "labels", labels.ROLE)
    if type_token in CLUSTER_POLICY_TYPES:
        driver = prop(props, "spec", "driver", default={}) or {}
        return OperatorDriverFacts(
            type_token, bool(driver.get("enabled", True)), driver.get("version"), bool(driver.get("usePrecompiled")),
            None, False, bool(driver.get(CRD_USE_DRIVER_CRD)), driver.get("upgradePolicy"),
            notes.operator_version, role, notes,
        )
    if type_token == HELM_RELEASE and props.get("chart") == OPERATOR_CHART:
        driver = prop(props, "values", "driver", default={}) or {}
        # A Release carries no annotations: the exporter the stack pins is the chart's own value.
        exporter = prop(props, "values", "dcgmExporter", "version")
        notes = replace(notes, dcgm_exporter=exporter if isinstance(exporter, str) else None)
        return OperatorDriverFacts(
            type_token, bool(driver.get("enabled", True)), driver.get("version"), bool(driver.get("usePrecompiled")),
            None, False, bool(prop(driver, HELM_DRIVER_CRD, "enabled")), crd_upgrade_policy(driver.get("upgradePolicy")),
            props.get("version"), role, notes,
        )
    if type_token == NVIDIA_DRIVER:
        spec = props.get("spec") or {}
        return OperatorDriverFacts(
            type_token, True, spec.get("version"), bool(spec.get("usePrecompiled")), spec.get("nodeSelector") or {},
            bool(spec.get("default")), False, spec.get("upgradePolicy"), notes.operator_version, role, notes,
        )
    return None
