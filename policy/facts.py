"""The policy-side views of what the program registered, read through ``engine_contracts.resource_facts``.

Rules never see the stack config: every fact comes from resource properties, as the engine shows them
(camelCase). ``engine_contracts.resource_facts`` owns how each fact is written and read back; this module adds what
only the pack needs: the engine's property shapes (``EngineProps``, EKS ``updateConfig`` as outputs carry
it), the operator's per-kind defaults, and views that keep the decoded facts beside the resource they were
read from, so a finding can name it. A view's own properties add behaviour (combine a pool's cloud pools,
apply a default, answer a question); a plain fact is read from the view's ``facts`` (``driver.facts.version``,
``pool.facts.gpu_product``, ``model.facts.replicas``), never through a second name. ``StackFacts`` holds
every fact of a stack, decoded once per evaluation and handed to every stack rule. The same code serves the
CrossGuard pack (``PolicyResource``) and ``gpu-rollout plan`` (``RegisteredResource``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from gpu_knowledge import labels
from fleetspec import operator
from engine_contracts import resource_facts as rf
from fleetspec.base import Stage
from fleetspec.discipline import utc_now

prop = rf.prop


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


# ---------------------------------------------------------------- pools


def node_labels(res: Resource) -> Mapping[str, Any]:
    """The labels a pool resource's nodes carry, as the stack declares them (``rf.pool_node_labels``)."""
    return rf.pool_node_labels(res.type, res.props)


@dataclass
class Pool:
    """A node pool and its cloud pools (one per live generation for image-owned pools)."""

    name: str
    resources: list[Resource] = field(default_factory=list)

    @property
    def labels(self) -> Mapping[str, Any]:
        if not self.resources:  # a pool named by a model but not rendered (cloud: existing)
            return {labels.POOL: self.name}
        return node_labels(self.resources[0])

    @property
    def facts(self) -> rf.PoolFacts:
        return rf.read_pool_labels(self.labels)

    @property
    def nodes(self) -> int | None:
        """Nodes of the newest cloud pool (every generation is a full pool of the same size), except on a
        Capacity Block, whose live generations share one reservation: then all of them together."""
        if not self.resources:
            return None
        if any(prop(r.props, "capacityType") == "CAPACITY_BLOCK" for r in self.resources):
            counts = [rf.node_count(r.type, r.props) for r in self.resources]
            return None if None in counts else sum(c for c in counts if c is not None)
        newest = self.resources[-1]
        return rf.node_count(newest.type, newest.props)

    @property
    def can_grow(self) -> bool | None:
        """Whether the cloud may add nodes to any of the pool's cloud pools (``rf.can_grow``): True if one
        can, False if none can, None if that cannot be told for one (and none is known to grow)."""
        answers = [rf.can_grow(r.type, r.props) for r in self.resources]
        if True in answers:
            return True
        return None if None in answers or not answers else False

    @property
    def image_drivers(self) -> list[tuple[str, Resource]]:
        """Drivers the node images of the pool's generations ship."""
        out = []
        for res in self.resources:
            shipped = rf.read_pool_labels(node_labels(res)).image_driver
            if shipped is not None:
                out.append((shipped, res))
        return out

    @property
    def moves_by_generations(self) -> bool:
        """Blue/green: a new generation is a whole new cloud pool beside the old one (built-in surge)."""
        return any(rf.states_generation(node_labels(r)) for r in self.resources)


def pools(resources: Iterable[Resource]) -> dict[str, Pool]:
    """GPU pools by pool name, from AKS agent pools, EKS node groups and pool records carrying the pool label;
    in pool-name order, each pool's cloud pools oldest generation first (the newest last)."""
    found: dict[str, Pool] = {}
    for res in sorted(resources, key=rf.canonical_order):
        if not rf.is_pool_resource(res.type, res.props):
            continue
        name = node_labels(res).get(labels.POOL)
        if name:
            found.setdefault(name, Pool(name)).resources.append(res)
    for pool in found.values():
        pool.resources.sort(key=_generation_order)
    return dict(sorted(found.items()))


def _generation_order(res: Resource) -> tuple[int, tuple[str, str, str]]:
    """Generation id first (a pool without generations has one cloud pool), then the canonical order."""
    generation = rf.read_pool_labels(node_labels(res)).generation
    return (generation if generation is not None else -1, rf.canonical_order(res))


def node_image_owns_driver(res: Resource) -> bool:
    """An AKS pool whose GPU driver AKS installs, or an EKS node group on an NVIDIA AMI."""
    return rf.image_owns_driver(res.type, res.props)


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
    if res.type != rf.EKS_NODE_GROUP:
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
    """A place that pins the operator's containerized driver (ClusterPolicy, Helm values or NVIDIADriver),
    with the resource it was read from."""

    resource: Resource
    facts: rf.OperatorDriverFacts

    @property
    def held(self) -> bool:
        """The held annotation as a yes or no: only an NVIDIADriver carries it, so unset means not held."""
        return self.facts.notes.held is True

    @property
    def cluster_wide(self) -> bool:
        return self.resource.type != rf.NVIDIA_DRIVER

    @property
    def sent_policy(self) -> Mapping[str, Any]:
        """The upgradePolicy keys sent ({} when none, or not a mapping)."""
        policy = self.facts.upgrade_policy
        return policy if isinstance(policy, Mapping) else {}

    @property
    def rolling_policy(self) -> Mapping[str, Any] | None:
        """The upgradePolicy of an enabled driver, when it sends one as a mapping: what the rules of the
        operator's upgrade controller read."""
        policy = self.facts.upgrade_policy
        return policy if self.facts.enabled and isinstance(policy, Mapping) else None

    def policy_setting(self, key: str) -> Any:
        """An ``upgradePolicy`` setting as the operator will see it: the value sent, else the default of
        this kind of resource (``POLICY_DEFAULTS``). Values are returned as sent, malformed or not."""
        policy = self.sent_policy
        if key in policy and policy[key] is not None:
            return policy[key]
        return POLICY_DEFAULTS[self.resource.type].get(key)

    def selects(self, pool_labels: Mapping[str, Any]) -> bool:
        if self.cluster_wide:
            return self.facts.enabled and not self.facts.use_crd
        if self.facts.default:
            return False  # the fallback CR only takes nodes no other CR selects
        return all(pool_labels.get(k) == v for k, v in (self.facts.selector or {}).items())


# What an unset upgradePolicy key becomes, per resource kind (fleetspec.operator has the defaults and their source).
POLICY_DEFAULTS: dict[str, dict[str, Any]] = {
    rf.HELM_RELEASE: operator.HELM_POLICY_DEFAULTS,
    rf.CLUSTER_POLICY_PATCH: operator.CLUSTER_POLICY_DEFAULTS,
    rf.CLUSTER_POLICY_CR: operator.CLUSTER_POLICY_DEFAULTS,
    rf.NVIDIA_DRIVER: operator.NVIDIA_DRIVER_POLICY_DEFAULTS,
}


def operator_driver(res: Resource) -> OperatorDriver | None:
    decoded = rf.read_operator_driver(res.type, res.props)
    return OperatorDriver(res, decoded) if decoded is not None else None


def operator_drivers(resources: Iterable[Resource]) -> list[OperatorDriver]:
    return [d for d in (operator_driver(r) for r in resources if r.type in rf.DRIVER_TYPES) if d is not None]


def drivers_for_pool(pool: Pool, drivers: Sequence[OperatorDriver]) -> list[OperatorDriver]:
    """The operator drivers that install on the pool's nodes."""
    return [d for d in drivers if d.facts.enabled and d.selects(pool.labels)]


# ---------------------------------------------------------------- models (their PDBs)


@dataclass(frozen=True)
class ModelBudget:
    """A model server as its PDB states it (``rf.ModelFacts``), with the PDB."""

    resource: Resource
    facts: rf.ModelFacts

    @property
    def name(self) -> str:
        """The model's name as findings print it (``read_model`` falls back to the PDB's name)."""
        return str(self.facts.name)


def model_budget(res: Resource) -> ModelBudget | None:
    if not rf.is_model_budget(res.type, res.props):  # the in-cluster guard's own budget guards no model
        return None
    return ModelBudget(res, rf.read_model(res.props, res.name))


def model_budgets(resources: Iterable[Resource]) -> list[ModelBudget]:
    return [b for b in (model_budget(r) for r in resources) if b is not None]


# ---------------------------------------------------------------- the cluster-identity record


@dataclass(frozen=True)
class IdentityRecord:
    resource: Resource
    facts: rf.IdentityFacts


def identity_records(resources: Iterable[Resource]) -> list[IdentityRecord]:
    return [
        IdentityRecord(r, rf.read_identity(r.props))
        for r in resources
        if rf.record_kind(r.props) == labels.RECORD_CLUSTER_IDENTITY
    ]


# ---------------------------------------------------------------- every fact of a stack


class StackFacts:
    """Every fact the stack rules read, from one stack's resources: built once per evaluation and handed to
    every stack rule. Each fact is decoded when a rule first asks for it and kept for the rules after it,
    so in the engine a value unknown during preview still fails only the rules that read it."""

    def __init__(self, resources: Iterable[Resource], now: datetime | None = None) -> None:
        # The engine hands resources in the order they registered, which is the SDK's, not the program's:
        # rules read them in one canonical order, so the pack and `gpu-rollout plan` agree on every run.
        self.resources: tuple[Resource, ...] = tuple(sorted(resources, key=rf.canonical_order))
        # The moment the rules judge against (dwell times, a generation's age, the maintenance window): the
        # clock, unless the caller fixes it (`gpu-rollout plan` as of a moment, the tests).
        self.now: datetime = now if now is not None else utc_now()

    @cached_property
    def pools(self) -> dict[str, Pool]:
        """GPU pools by name (``pools``)."""
        return pools(self.resources)

    def pool(self, name: str) -> Pool:
        """A pool by name; a pool no resource renders (named by a model) has no resources."""
        return self.pools.get(name, Pool(name))

    @cached_property
    def promotion_records(self) -> list[Resource]:
        """The prod gate's promotion records (one per stack; ConfigMaps labelled as the record)."""
        return [r for r in self.resources if r.type == rf.CONFIG_MAP and rf.is_promotion_record(r.props)]

    @cached_property
    def promotion(self) -> rf.PromotionFacts | None:
        """The first promotion record, decoded once for every rule (and every pool a rule asks about)."""
        records = self.promotion_records
        return rf.read_promotion(records[0].props) if records else None

    @cached_property
    def drivers(self) -> list[OperatorDriver]:
        """The operator's driver objects, in canonical order (type, then name)."""
        return operator_drivers(self.resources)

    @cached_property
    def _pools_by_label(self) -> dict[tuple[str, str], set[str]]:
        """Pool names by each label and value their nodes carry (a selector's pools: the sets of its pairs, met)."""
        index: dict[tuple[str, str], set[str]] = {}
        for pool in self.pools.values():
            for key, value in pool.labels.items():
                if isinstance(value, str):
                    index.setdefault((key, value), set()).add(pool.name)
        return index

    def pools_selected_by(self, driver: OperatorDriver) -> list[Pool]:
        """The pools whose nodes ``driver`` selects (``OperatorDriver.selects``), in pool order, found through the
        label index rather than by matching every pool: rules ask it of every driver, so matching would grow with
        pools times drivers (22,500 matches per rule at 150 pools)."""
        if driver.cluster_wide or driver.facts.default or not isinstance(driver.facts.selector, Mapping) or \
                not all(isinstance(v, str) for v in driver.facts.selector.values()):
            return [p for p in self.pools.values() if driver.selects(p.labels)]
        names = set(self.pools)
        for pair in driver.facts.selector.items():
            names &= self._pools_by_label.get(pair, set())
        return [p for p in self.pools.values() if p.name in names]

    @cached_property
    def _drivers_by_pool(self) -> dict[str, list[OperatorDriver]]:
        found: dict[str, list[OperatorDriver]] = {name: [] for name in self.pools}
        for driver in self.drivers:
            if driver.facts.enabled:
                for pool in self.pools_selected_by(driver):
                    found[pool.name].append(driver)
        return found

    def drivers_of(self, pool: Pool) -> list[OperatorDriver]:
        """The operator drivers that install on the pool's nodes (``drivers_for_pool``), in driver order, found
        once for every pool and rule: each rule asking per pool and model would otherwise match every driver
        again."""
        found = self._drivers_by_pool.get(pool.name)
        return list(found) if found is not None else drivers_for_pool(pool, self.drivers)

    def driver_versions_of(self, pool: Pool) -> list[tuple[str, Resource]]:
        """Every driver version the pool's nodes run, with the resource that pins it: its operator drivers' and the
        drivers its node images ship."""
        versions = [(d.facts.version, d.resource) for d in self.drivers_of(pool) if d.facts.version]
        return versions + pool.image_drivers

    @cached_property
    def _drivers_by_resource(self) -> dict[int, OperatorDriver]:
        return {id(d.resource): d for d in self.drivers}

    def operator_driver(self, res: Resource) -> OperatorDriver | None:
        """The operator driver ``res`` pins, if it pins one."""
        if res.type not in rf.DRIVER_TYPES:
            return None
        known = self._drivers_by_resource.get(id(res))
        return known if known is not None else operator_driver(res)

    @cached_property
    def node_groups(self) -> list[NodeGroupUpdate]:
        """How each EKS node group updates, in canonical order (by name)."""
        return [g for g in map(node_group_update, self.resources) if g is not None]

    @cached_property
    def models(self) -> list[ModelBudget]:
        return model_budgets(self.resources)

    @cached_property
    def _stated_stages(self) -> set[str]:
        return {value for res in self.resources for value in rf.stated_stages(res.props)}

    @property
    def stage_stated(self) -> bool:
        """The resources state exactly one stage (PDB and driver annotations, pool tags)."""
        return len(self._stated_stages) == 1

    @property
    def stage(self) -> Stage | None:
        """The stack's stage as its resources state it; None when they state none, several or another."""
        return rf.read_stage(next(iter(self._stated_stages))) if self.stage_stated else None

    @cached_property
    def change_ticket(self) -> str | None:
        values = {value for res in self.resources for value in rf.stated_change_tickets(res.props)}
        return sorted(values)[0] if values else None

    @cached_property
    def batch_selectors(self) -> list[str]:
        """Declared batch or fine-tuning pod selectors (``gpuOperator.batchJobSelectors``), from the
        annotation the program puts on every PDB and on the ClusterPolicy patch and NVIDIADrivers (a Helm
        Release has no metadata, so in Helm mode the PDBs carry it)."""
        found: list[str] = []
        for res in self.resources:
            found.extend(s for s in rf.stated_batch_selectors(res.props) if s not in found)
        return found

    @cached_property
    def identities(self) -> list[IdentityRecord]:
        return identity_records(self.resources)

    @property
    def identity(self) -> rf.IdentityFacts | None:
        """The stack's own identity record's facts (one per stack); None where none is visible."""
        return self.identities[0].facts if len(self.identities) == 1 else None

    @cached_property
    def validation_gpus(self) -> dict[str, int]:
        """Pool -> GPUs one validation pod requests on a node of it, for the pools the validation job validates
        (its DaemonSets); a pool it does not validate is absent."""
        found = {}
        for res in self.resources:
            read = rf.read_validation_gpus(res.type, res.props)
            if read is not None:
                found[read[0]] = read[1]
        return found

    @cached_property
    def previous(self) -> rf.PreviousDeployment:
        """The stack's last deployment: the outputs of the program's StackReference to its own stack, as
        the component holding it registers them (the engine shows stack policies components' outputs,
        never a StackReference; `gpu-rollout plan` records the same). Empty before a first deployment, and
        where the component is not visible (resource policies)."""
        for res in self.resources:
            if res.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT:
                return rf.read_previous_deployment(rf.previous_deployment_outputs(res.props))
        return rf.PreviousDeployment()

    def has(self, *type_tokens: str) -> bool:
        """The stack registers a resource of one of these types."""
        return any(r.type in type_tokens for r in self.resources)
