"""Pool facts: node labels of AKS agent pools and EKS node groups, the records of a pool of an existing
cluster, node counts, and the tags on cloud pools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu_knowledge import labels
from fleetspec.base import Stage
from engine_contracts.resource_facts.tokens import AKS_POOL, CONFIG_MAP, POOL_TYPES
from engine_contracts.resource_facts.values import as_int, flag, flag_text, prop, read_stage

# ---------------------------------------------------------------- node labels

@dataclass(frozen=True)
class PoolFacts:
    """What every node of a pool carries as labels: the pool, its rollout, its declared hardware and, for a
    generation of an image-owned pool, which generation and the driver its image ships."""

    pool: str | None
    role: str | None
    wave: int | None
    held: bool  # carries the operator's skip label
    gpu_product: str | None
    gpus_per_node: int | None
    nvswitch: bool | None
    os: str | None = None  # declared where no cloud field says it (custom AMI, existing pool)
    fabric_manager: str | None = None  # NVSwitch pools: driver-container | image | host
    fabric_manager_version: str | None = None  # a host-installed Fabric Manager's pin
    generation: int | None = None
    image_driver: str | None = None
    mig_config: str = labels.MIG_CONFIG_DISABLED  # the declared MIG layout; whole GPUs unless stated


CANARY_ROLE = "canary"  # the pool role (NodePool.role) that upgrades first; a canary pool is never held


def pool_labels(facts: PoolFacts) -> dict[str, str]:
    """The node labels stating ``facts`` (what is unset is left out; the skip label only on a held pool)."""
    out: dict[str, str] = {}
    for key, value in (
        (labels.POOL, facts.pool), (labels.ROLE, facts.role), (labels.WAVE, facts.wave),
        (labels.GENERATION, facts.generation), (labels.POOL_IMAGE_DRIVER, facts.image_driver),
        (labels.SKIP_UPGRADE, "true" if facts.held else None),
        (labels.POOL_GPU_PRODUCT, facts.gpu_product), (labels.POOL_GPUS_PER_NODE, facts.gpus_per_node),
        (labels.POOL_NVSWITCH, None if facts.nvswitch is None else flag_text(facts.nvswitch)),
        (labels.POOL_OS, facts.os),
        (labels.POOL_FABRIC_MANAGER, facts.fabric_manager),
        (labels.POOL_FABRIC_MANAGER_VERSION, facts.fabric_manager_version),
        # Only a MIG layout is stated: whole GPUs are what a pool without the label runs.
        (labels.POOL_MIG_CONFIG, facts.mig_config if facts.mig_config != labels.MIG_CONFIG_DISABLED else None),
    ):
        if value is not None:
            out[key] = str(value)
    return out


def pool_driver_labels(facts: PoolFacts) -> dict[str, str]:
    """Labels of a pool's NVIDIADriver: the pool, its role and wave."""
    return {labels.POOL: str(facts.pool), labels.ROLE: str(facts.role), labels.WAVE: str(facts.wave)}


def read_pool_labels(node_labels: Mapping[str, Any]) -> PoolFacts:
    def get(key: str) -> Any:
        return node_labels.get(key)

    return PoolFacts(
        pool=get(labels.POOL), role=get(labels.ROLE), wave=as_int(get(labels.WAVE)),
        held=get(labels.SKIP_UPGRADE) == "true",
        gpu_product=get(labels.POOL_GPU_PRODUCT), gpus_per_node=as_int(get(labels.POOL_GPUS_PER_NODE)),
        nvswitch=flag(get(labels.POOL_NVSWITCH)), os=get(labels.POOL_OS),
        fabric_manager=get(labels.POOL_FABRIC_MANAGER), fabric_manager_version=get(labels.POOL_FABRIC_MANAGER_VERSION),
        generation=as_int(get(labels.GENERATION)), image_driver=get(labels.POOL_IMAGE_DRIVER),
        mig_config=get(labels.POOL_MIG_CONFIG) or labels.MIG_CONFIG_DISABLED,
    )


def states_generation(node_labels: Mapping[str, Any]) -> bool:
    """Nodes labelled with a generation: their pool moves blue/green, by whole new cloud pools."""
    return labels.GENERATION in node_labels


def record_kind(props: Mapping[str, Any]) -> Any:
    """Which record a ConfigMap is (``labels.RECORD_*``), or None for any other object."""
    return prop(props, "metadata", "labels", labels.RECORD)


def is_pool_resource(type_token: str, props: Mapping[str, Any]) -> bool:
    """An AKS agent pool, an EKS node group, or the record of a pool of an existing cluster."""
    if type_token == CONFIG_MAP:
        return bool(record_kind(props) == labels.RECORD_POOL)
    return type_token in POOL_TYPES


def pool_node_labels(type_token: str, props: Mapping[str, Any]) -> Mapping[str, Any]:
    """The labels a pool's nodes carry, as the stack declares them: an agent pool's ``nodeLabels``, a node
    group's ``labels``, or a pool record's labels with its declared node selector over them (the record's
    labels state the pool's facts, which the nodes of a cluster this stack does not own may not carry)."""
    if type_token == AKS_POOL:
        return props.get("nodeLabels") or {}
    if type_token == CONFIG_MAP:
        record = prop(props, "metadata", "labels") or {}
        return {**record, **read_node_selector(props)}
    return props.get("labels") or {}


def node_count(type_token: str, props: Mapping[str, Any]) -> int | None:
    """Nodes of one cloud pool (or of the pool a record describes), as sent."""
    if type_token == AKS_POOL:
        return as_int(props.get("count"))
    if type_token == CONFIG_MAP:
        return as_int(prop(props, "data", "nodeCount"))
    return as_int(prop(props, "scalingConfig", "desiredSize"))


def can_grow(type_token: str, props: Mapping[str, Any]) -> bool | None:
    """Whether the cloud may add nodes to a pool with no change of this stack: an AKS agent pool with the
    cluster autoscaler on and room below its maxCount, an EKS node group whose maxSize is above its desired
    size. None where it cannot be told: a pool record (someone else scales an existing cluster's pools) or
    sizes that are not visible."""
    if type_token == CONFIG_MAP:
        return None
    if type_token == AKS_POOL:
        if props.get("enableAutoScaling") is not True:
            return False
        count, most = as_int(props.get("count")), as_int(props.get("maxCount"))
        return None if count is None or most is None else most > count
    desired, most = as_int(prop(props, "scalingConfig", "desiredSize")), as_int(prop(props, "scalingConfig", "maxSize"))
    return None if desired is None or most is None else most > desired


# ---------------------------------------------------------------- pool records (cloud: existing)

def pool_record_labels(facts: PoolFacts) -> dict[str, str]:
    return {labels.RECORD: labels.RECORD_POOL, **pool_labels(facts)}


def pool_record_annotations(stage: Stage, node_selector: Mapping[str, str]) -> dict[str, str]:
    return {
        labels.ANNOTATION_STAGE: stage.value,
        labels.ANNOTATION_NODE_SELECTOR: json.dumps(dict(node_selector), sort_keys=True),
    }


def pool_record_data(nodes: int) -> dict[str, str]:
    return {"nodeCount": str(nodes)}


def read_node_selector(props: Mapping[str, Any]) -> dict[str, str]:
    """A pool record's declared node selector; empty when it is missing or not a JSON object."""
    note = prop(props, "metadata", "annotations", labels.ANNOTATION_NODE_SELECTOR)
    try:
        selector = json.loads(note) if isinstance(note, str) else {}
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {}


# ---------------------------------------------------------------- cloud pool tags

@dataclass(frozen=True)
class PoolTags:
    """Tags on every cloud pool, so a cloud console shows which stack and change own it."""

    pool: str | None
    stage: Stage | None
    driver_owner: str | None
    change_ticket: str | None = None
    # Replace-only fields as last deployed (``gpu_knowledge.replacement``): read back as text; the program writes the
    # record of its last deployment, an output of its StackReference.
    deployed_with: Any = None
    node_image: str | None = None  # AKS generations: the node image (AKS takes none as input)
    image_driver: str | None = None  # ... and the driver it ships


def pool_tags(tags: PoolTags) -> dict[str, Any]:
    out: dict[str, Any] = {
        labels.TAG_POOL: str(tags.pool), labels.TAG_STAGE: str(tags.stage), labels.TAG_DRIVER_OWNER: str(tags.driver_owner),
    }
    if tags.change_ticket:
        out[labels.TAG_CHANGE_TICKET] = tags.change_ticket
    if tags.deployed_with is not None:
        out[labels.TAG_DEPLOYED_WITH] = tags.deployed_with
    if tags.node_image:
        out[labels.TAG_NODE_IMAGE] = tags.node_image
        out[labels.TAG_IMAGE_DRIVER] = str(tags.image_driver)
    return out


def read_pool_tags(props: Mapping[str, Any]) -> PoolTags:
    tags = props.get("tags")
    tags = tags if isinstance(tags, Mapping) else {}
    record = tags.get(labels.TAG_DEPLOYED_WITH)
    return PoolTags(
        pool=tags.get(labels.TAG_POOL), stage=read_stage(tags.get(labels.TAG_STAGE)),
        driver_owner=tags.get(labels.TAG_DRIVER_OWNER), change_ticket=tags.get(labels.TAG_CHANGE_TICKET),
        deployed_with=record if isinstance(record, str) else None,
        node_image=tags.get(labels.TAG_NODE_IMAGE), image_driver=tags.get(labels.TAG_IMAGE_DRIVER),
    )
