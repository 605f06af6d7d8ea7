"""Read the facts policy rules need from resource properties, as the engine shows them (camelCase).

Rules never see the stack config: everything here comes from what the program registered (pool node
labels and tags, driver objects and their annotations, PDB annotations). The same functions serve the
CrossGuard pack (``PolicyResource``) and ``gpu-rollout plan`` (``RegisteredResource``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec import labels

AKS_POOL = "azure-native:containerservice:AgentPool"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CLUSTER_POLICY = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
CLUSTER_POLICY_CR = "kubernetes:nvidia.com/v1:ClusterPolicy"
NVIDIA_DRIVER = "kubernetes:nvidia.com/v1alpha1:NVIDIADriver"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"  # a pool record on a cluster: existing (labelled record=pool)
POOL_TYPES = (AKS_POOL, EKS_NODE_GROUP, CONFIG_MAP)
DRIVER_TYPES = (CLUSTER_POLICY, CLUSTER_POLICY_CR, NVIDIA_DRIVER, HELM_RELEASE)


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it: its type token, logical name and input properties."""

    type: str
    name: str
    props: Mapping[str, Any]
    urn: str = ""


class EngineProps(Mapping):
    """Resource properties as the engine hands them to a policy pack, read the way the rules expect.

    The wire format carries every number as a double, so the pack would see ``minAvailable: 1.0`` where
    `gpu-rollout plan` (and the program) has ``1``. Integral doubles read back as ints, at any depth.
    ``pulumi_policy`` hands maps and lists as its unknown-checking proxies (``_DictProxy`` is a Mapping,
    ``_ListProxy`` a Sequence, neither a dict nor a list): maps read as ``EngineProps``, lists as lists.
    Map values convert as they are read, so an unknown value during preview raises only if a rule
    actually touches it (a list converts when it is read, touching each of its items).
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> Any:
        return engine_value(self._raw[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def engine_value(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return EngineProps(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [engine_value(item) for item in value]
    return value


def prop(mapping: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping) or key not in mapping:
            return default
        mapping = mapping[key]
    return mapping


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- pools


@dataclass
class Pool:
    """A node pool and its cloud pools (one per live generation for image-owned pools)."""

    name: str
    resources: list[Resource] = field(default_factory=list)

    @property
    def labels(self) -> Mapping[str, str]:
        if not self.resources:  # a pool named by a model but not rendered (cloud: existing)
            return {labels.POOL: self.name}
        return self._labels_of(self.resources[0])

    def label(self, key: str) -> str | None:
        return self.labels.get(key)

    @property
    def product(self) -> str | None:
        return self.label(labels.POOL_GPU_PRODUCT)

    @property
    def gpus_per_node(self) -> int | None:
        return _int(self.label(labels.POOL_GPUS_PER_NODE))

    @property
    def nodes(self) -> int | None:
        """Nodes of the newest cloud pool (every generation is a full pool of the same size), except on a
        Capacity Block, whose live generations share one reservation: then all of them together."""
        if not self.resources:
            return None
        if any(prop(r.props, "capacityType") == "CAPACITY_BLOCK" for r in self.resources):
            counts = [_int(prop(r.props, "scalingConfig", "desiredSize")) for r in self.resources]
            return None if None in counts else sum(c for c in counts if c is not None)
        return self._node_count(self.resources[-1])

    @staticmethod
    def _node_count(res: Resource) -> int | None:
        if res.type == AKS_POOL:
            return _int(res.props.get("count"))
        if res.type == CONFIG_MAP:
            return _int(prop(res.props, "data", "nodeCount"))
        return _int(prop(res.props, "scalingConfig", "desiredSize"))

    @property
    def held(self) -> bool:
        return self.label(labels.SKIP_UPGRADE) == "true"

    @property
    def role(self) -> str | None:
        return self.label(labels.ROLE)

    @property
    def image_drivers(self) -> list[tuple[str, Resource]]:
        """Drivers the node images of the pool's generations ship."""
        out = []
        for res in self.resources:
            node_labels = self._labels_of(res)
            if labels.POOL_IMAGE_DRIVER in node_labels:
                out.append((node_labels[labels.POOL_IMAGE_DRIVER], res))
        return out

    @property
    def moves_by_generations(self) -> bool:
        """Blue/green: a new generation is a whole new cloud pool beside the old one (built-in surge)."""
        return any(labels.GENERATION in self._labels_of(r) for r in self.resources)

    @staticmethod
    def _labels_of(res: Resource) -> Mapping[str, str]:
        """The labels the pool's nodes carry, as the stack declares them."""
        if res.type == AKS_POOL:
            return res.props.get("nodeLabels") or {}
        if res.type == CONFIG_MAP:
            # A pool record: the nodes carry the declared selector (the record's labels state the pool's
            # facts, which the nodes of a cluster this stack does not own may not carry).
            record = prop(res.props, "metadata", "labels") or {}
            return {**record, **_node_selector(res)}
        return res.props.get("labels") or {}


def _node_selector(res: Resource) -> dict[str, str]:
    note = prop(res.props, "metadata", "annotations", labels.ANNOTATION_NODE_SELECTOR)
    try:
        selector = json.loads(note) if isinstance(note, str) else {}
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {}


def _is_pool(res: Resource) -> bool:
    if res.type == CONFIG_MAP:
        return prop(res.props, "metadata", "labels", labels.RECORD) == labels.RECORD_POOL
    return res.type in POOL_TYPES


def pools(resources: Iterable[Resource]) -> dict[str, Pool]:
    """GPU pools by pool name, from AKS agent pools, EKS node groups and pool records carrying the pool label."""
    found: dict[str, Pool] = {}
    for res in resources:
        if not _is_pool(res):
            continue
        name = Pool._labels_of(res).get(labels.POOL)
        if name:
            found.setdefault(name, Pool(name)).resources.append(res)
    return found


def node_image_owns_driver(res: Resource) -> bool:
    """An AKS pool whose GPU driver AKS installs, or an EKS node group on an NVIDIA AMI."""
    if res.type == AKS_POOL:
        return prop(res.props, "gpuProfile", "driver") != "None"
    if res.type == EKS_NODE_GROUP:
        return str(res.props.get("amiType") or "").endswith("_NVIDIA")
    return False


@dataclass(frozen=True)
class NodeGroupUpdate:
    """How an EKS managed node group updates its nodes, as sent (values unvalidated; rules check them)."""

    resource: Resource
    update_config: Any  # a mapping when well formed; None when unset (EKS defaults)
    desired_size: Any
    capacity_type: Any

    def setting(self, key: str) -> Any:
        return self.update_config.get(key) if isinstance(self.update_config, Mapping) else None


def node_group_update(res: Resource) -> NodeGroupUpdate | None:
    if res.type != EKS_NODE_GROUP:
        return None
    desired = prop(res.props, "scalingConfig", "desiredSize")
    return NodeGroupUpdate(res, _update_config(res.props.get("updateConfig")), desired, res.props.get("capacityType"))


_EKS_LIMITS = ("maxUnavailable", "maxUnavailablePercentage")


def _update_config(value: Any) -> Any:
    """``updateConfig`` as EKS means it, from inputs or from the outputs the engine hands stack policies.

    EKS keeps exactly one of ``maxUnavailable`` and ``maxUnavailablePercentage`` (each 1-100; the API
    returns ``maxUnavailable: 1`` when none was sent). The AWS bridge's outputs are the terraform
    ``aws_eks_node_group`` state: ``flattenNodeGroupUpdateConfig`` sets only the limit EKS returned and the
    SDKv2 state holds the other as its zero value, so outputs read e.g. ``{maxUnavailable: 1,
    maxUnavailablePercentage: 0}``. A 0 beside a set limit is therefore the unset one and is dropped; a 0
    alone, or both set, stays for the rules to report. An empty ``updateStrategy`` (a string the API did
    not return, in the same state) is unset too: EKS then applies DEFAULT."""
    if not isinstance(value, Mapping):
        return value
    config = dict(value)
    for key, other in (_EKS_LIMITS, _EKS_LIMITS[::-1]):
        if _is_zero(config.get(key)) and config.get(other) is not None and not _is_zero(config.get(other)):
            del config[key]
    if config.get("updateStrategy") == "":
        del config["updateStrategy"]
    return config


def _is_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


# ---------------------------------------------------------------- operator driver objects


@dataclass(frozen=True)
class OperatorDriver:
    """A place that pins the operator's containerized driver: ClusterPolicy, Helm values or NVIDIADriver."""

    resource: Resource
    enabled: bool
    version: str | None
    precompiled: bool
    selector: Mapping[str, str] | None  # None: every GPU node (cluster-wide driver)
    default: bool
    use_crd: bool  # cluster-wide driver hands pools to NVIDIADrivers
    upgrade_policy: Mapping[str, Any] | None  # CRD spelling (podDeletion)
    operator_version: str | None
    annotations: Mapping[str, str]

    @property
    def cluster_wide(self) -> bool:
        return self.resource.type != NVIDIA_DRIVER

    def policy_setting(self, key: str) -> Any:
        """An ``upgradePolicy`` setting as the operator will see it: the value sent, else the default of
        this kind of resource (``POLICY_DEFAULTS``). Values are returned as sent, malformed or not."""
        policy = self.upgrade_policy if isinstance(self.upgrade_policy, Mapping) else {}
        if key in policy and policy[key] is not None:
            return policy[key]
        return POLICY_DEFAULTS[self.resource.type].get(key)

    @property
    def held(self) -> bool:
        return self.annotations.get(labels.ANNOTATION_HELD) == "true"

    def selects(self, node_labels: Mapping[str, str]) -> bool:
        if self.cluster_wide:
            return self.enabled and not self.use_crd
        if self.default:
            return False  # the fallback CR only takes nodes no other CR selects
        return all(node_labels.get(k) == v for k, v in (self.selector or {}).items())


# What an unset upgradePolicy key becomes, per resource kind (reference gpu-operator.md 1.2):
# - Helm values: the chart template renders `autoUpgrade | default false` and
#   `maxParallelUpgrades | default 0` (0 = unlimited);
# - ClusterPolicy CRD: autoUpgrade false, maxParallelUpgrades 1, maxUnavailable 25%;
# - NVIDIADriver CRD (26.7.0+): autoUpgrade true (unlike ClusterPolicy), maxParallelUpgrades 1, 25%.
_CRD_DEFAULTS = {"autoUpgrade": False, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}
POLICY_DEFAULTS: dict[str, dict[str, Any]] = {
    HELM_RELEASE: {"autoUpgrade": False, "maxParallelUpgrades": 0, "maxUnavailable": "25%"},
    CLUSTER_POLICY: _CRD_DEFAULTS,
    CLUSTER_POLICY_CR: _CRD_DEFAULTS,
    NVIDIA_DRIVER: {**_CRD_DEFAULTS, "autoUpgrade": True},
}


def _helm_policy(policy: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Helm values spell podDeletion as gpuPodDeletion; rules read the CRD spelling."""
    if not isinstance(policy, Mapping):
        return None
    out = dict(policy)
    if "gpuPodDeletion" in out:
        out["podDeletion"] = out.pop("gpuPodDeletion")
    return out


def operator_driver(res: Resource) -> OperatorDriver | None:
    props = res.props
    annotations = prop(props, "metadata", "annotations", default={}) or {}
    if res.type in (CLUSTER_POLICY, CLUSTER_POLICY_CR):
        driver = prop(props, "spec", "driver", default={}) or {}
        return OperatorDriver(
            res, bool(driver.get("enabled", True)), driver.get("version"), bool(driver.get("usePrecompiled")),
            None, False, bool(driver.get("useNvidiaDriverCRD")), driver.get("upgradePolicy"),
            annotations.get(labels.ANNOTATION_OPERATOR_VERSION), annotations,
        )
    if res.type == HELM_RELEASE and props.get("chart") == "gpu-operator":
        driver = prop(props, "values", "driver", default={}) or {}
        return OperatorDriver(
            res, bool(driver.get("enabled", True)), driver.get("version"), bool(driver.get("usePrecompiled")),
            None, False, bool(prop(driver, "nvidiaDriverCRD", "enabled")), _helm_policy(driver.get("upgradePolicy")),
            props.get("version"), annotations,
        )
    if res.type == NVIDIA_DRIVER:
        spec = props.get("spec") or {}
        selector = spec.get("nodeSelector") or {}
        return OperatorDriver(
            res, True, spec.get("version"), bool(spec.get("usePrecompiled")), selector, bool(spec.get("default")),
            False, spec.get("upgradePolicy"), annotations.get(labels.ANNOTATION_OPERATOR_VERSION), annotations,
        )
    return None


def operator_drivers(resources: Iterable[Resource]) -> list[OperatorDriver]:
    return [d for d in (operator_driver(r) for r in resources if r.type in DRIVER_TYPES) if d is not None]


def drivers_for_pool(pool: Pool, drivers: list[OperatorDriver]) -> list[OperatorDriver]:
    """The operator drivers that install on the pool's nodes."""
    return [d for d in drivers if d.enabled and d.selects(pool.labels)]


def pool_driver_versions(pool: Pool, drivers: list[OperatorDriver]) -> list[tuple[str, Resource]]:
    """Every driver version the pool's nodes run, with the resource that pins it."""
    versions = [(d.version, d.resource) for d in drivers_for_pool(pool, drivers) if d.version]
    return versions + pool.image_drivers


# ---------------------------------------------------------------- models (their PDBs)


@dataclass(frozen=True)
class ModelBudget:
    resource: Resource
    name: str
    replicas: int | None
    gpus_per_replica: int | None
    min_available: int | str | None
    max_unavailable: int | str | None
    cuda: str | None
    pools: tuple[str, ...]
    forward_compat: bool


def model_budget(res: Resource) -> ModelBudget | None:
    if res.type != PDB:
        return None
    meta = res.props.get("metadata") or {}
    notes = meta.get("annotations") or {}
    spec = res.props.get("spec") or {}
    model = (meta.get("labels") or {}).get(labels.MODEL) or meta.get("name") or res.name
    pools_note = notes.get(labels.ANNOTATION_POOLS) or ""
    return ModelBudget(
        resource=res,
        name=model,
        replicas=_int(notes.get(labels.ANNOTATION_REPLICAS)),
        gpus_per_replica=_int(notes.get(labels.ANNOTATION_GPUS_PER_REPLICA)),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        cuda=notes.get(labels.ANNOTATION_CUDA),
        pools=tuple(p for p in pools_note.split(",") if p),
        forward_compat=notes.get(labels.ANNOTATION_FORWARD_COMPAT) == "true",
    )


def model_budgets(resources: Iterable[Resource]) -> list[ModelBudget]:
    return [b for b in (model_budget(r) for r in resources) if b is not None]


# ---------------------------------------------------------------- stack-wide facts


def _stack_values(resources: Iterable[Resource], annotation: str, tag: str) -> set[str]:
    found = set()
    for res in resources:
        note = prop(res.props, "metadata", "annotations", annotation)
        tagged = prop(res.props, "tags", tag)
        found.update(v for v in (note, tagged) if isinstance(v, str) and v)
    return found


def stage(resources: Iterable[Resource]) -> str | None:
    """The stack's stage as its resources state it (PDB and driver annotations, pool tags)."""
    values = _stack_values(resources, labels.ANNOTATION_STAGE, labels.TAG_STAGE)
    return values.pop() if len(values) == 1 else None


def batch_selectors(resources: Iterable[Resource]) -> list[str]:
    """Declared batch or fine-tuning pod selectors (``gpuOperator.batchJobSelectors``), from the
    annotation the program puts on every PDB and on the ClusterPolicy patch and NVIDIADrivers (a Helm
    Release has no metadata, so in Helm mode the PDBs carry it)."""
    found: list[str] = []
    for res in resources:
        note = prop(res.props, "metadata", "annotations", labels.ANNOTATION_BATCH_SELECTORS)
        if isinstance(note, str):
            found.extend(s for s in note.split("\n") if s.strip() and s not in found)
    return found


def change_ticket(resources: Iterable[Resource]) -> str | None:
    values = _stack_values(resources, labels.ANNOTATION_CHANGE_TICKET, labels.TAG_CHANGE_TICKET)
    return sorted(values)[0] if values else None


def drivers_ran(resources: Iterable[Resource]) -> frozenset[str]:
    """Driver versions the fleet ran as of the stack's last deployment (the cluster-identity record's
    annotation): going back to one of them is a rollback, which rules the fleet already broke must not block."""
    found: set[str] = set()
    for res in resources:
        if prop(res.props, "metadata", "labels", labels.RECORD) != labels.RECORD_CLUSTER_IDENTITY:
            continue
        note = prop(res.props, "metadata", "annotations", labels.ANNOTATION_DRIVERS_RAN)
        if isinstance(note, str):
            found.update(v.strip() for v in note.split(",") if v.strip())
    return frozenset(found)
