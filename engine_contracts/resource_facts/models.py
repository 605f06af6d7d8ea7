"""Models: a model server's declared facts, riding along as annotations on its PodDisruptionBudget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu_knowledge import labels
from fleetspec.base import Stage
from engine_contracts.resource_facts.drivers import batch_selector_annotation, read_batch_selectors
from engine_contracts.resource_facts.values import as_int, flag_text, read_stage


@dataclass(frozen=True)
class ModelFacts:
    """A model server as its PDB states it: the budget itself and the model's declared facts."""

    name: str | None
    stage: Stage | None
    replicas: int | None
    gpus_per_replica: int | None
    cuda: str | None
    image: str | None
    pools: tuple[str, ...]
    forward_compat: bool
    min_available: int | str | None
    max_unavailable: int | str | None = None
    change_ticket: str | None = None
    batch_selectors: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()  # models[].owners: GitHub @org/team or @user, told when their pools move


def model_labels(facts: ModelFacts) -> dict[str, str]:
    return {labels.MODEL: str(facts.name)}


def model_annotations(facts: ModelFacts) -> dict[str, str]:
    """The model's declared facts, riding along on its PDB so the policy pack sees them."""
    return {
        labels.ANNOTATION_STAGE: str(facts.stage),
        labels.ANNOTATION_REPLICAS: str(facts.replicas),
        labels.ANNOTATION_GPUS_PER_REPLICA: str(facts.gpus_per_replica),
        labels.ANNOTATION_CUDA: str(facts.cuda),
        labels.ANNOTATION_IMAGE: str(facts.image),
        labels.ANNOTATION_POOLS: ",".join(facts.pools),
        labels.ANNOTATION_FORWARD_COMPAT: flag_text(facts.forward_compat),
        **({labels.ANNOTATION_CHANGE_TICKET: facts.change_ticket} if facts.change_ticket else {}),
        **({labels.ANNOTATION_OWNERS: ",".join(facts.owners)} if facts.owners else {}),
        # Stack-wide, so the pack sees the selectors in Helm mode too (a Release has no metadata).
        **batch_selector_annotation(facts.batch_selectors),
    }


def read_model(props: Mapping[str, Any], fallback_name: str | None = None) -> ModelFacts:
    """A PDB's model: named by its model label, else the PDB's own name, else ``fallback_name``."""
    meta = props.get("metadata") or {}
    notes = meta.get("annotations") or {}
    spec = props.get("spec") or {}
    pools_note = notes.get(labels.ANNOTATION_POOLS) or ""
    return ModelFacts(
        name=(meta.get("labels") or {}).get(labels.MODEL) or meta.get("name") or fallback_name,
        stage=read_stage(notes.get(labels.ANNOTATION_STAGE)),
        replicas=as_int(notes.get(labels.ANNOTATION_REPLICAS)),
        gpus_per_replica=as_int(notes.get(labels.ANNOTATION_GPUS_PER_REPLICA)),
        cuda=notes.get(labels.ANNOTATION_CUDA),
        image=notes.get(labels.ANNOTATION_IMAGE),
        pools=tuple(p for p in pools_note.split(",") if p),
        forward_compat=notes.get(labels.ANNOTATION_FORWARD_COMPAT) == "true",
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        change_ticket=notes.get(labels.ANNOTATION_CHANGE_TICKET),
        batch_selectors=read_batch_selectors(notes),
        owners=tuple(o for o in (notes.get(labels.ANNOTATION_OWNERS) or "").split(",") if o),
    )
