"""The stack's outputs: one typed value, the names it is exported under, its encoding and its reading.

What `pulumi stack output --json` prints for a stack of this project. The program exports it
(``__main__.py``, one loop over :meth:`StackOutputs.as_outputs`; ``renderers.manifests.stack_outputs`` builds it
from the spec), and it is read back in four places: by the stack's next deployment (``components.previous``
and, for the pack, ``engine_contracts.resource_facts.previous``), by a prod stack's gate from its canary stack
(``components.promotion``), by `gpu-rollout plan` and `gpu-rollout diff` (``rollout.plan``,
``preview.diff``). Every output's name, and every key of a pool summary, is spelled here and nowhere else
(tests/engine_contracts/test_stack_outputs.py looks for a stray literal).

Reading is tolerant like the other readers: an output a stack lacks, or states malformed (an older
release's, a hand-edited ``--previous-outputs`` file), reads as None, empty or False.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetspec.base import Stage
from engine_contracts.resource_facts.values import flag, read_stage

# The stack outputs, in the order the program exports them.
STAGE = "stage"
CLUSTER = "cluster"  # cluster.name
DRIVER_VERSION = "driverVersion"  # the fleet's target driver (also a pool summary's and a generation's key)
POOLS = "pools"  # pool -> its summary (PoolSummary)
RELEASED_POOLS = "releasedPools"  # by wave, then name
HELD_POOLS = "heldPools"  # by wave, then name
CLOUD_POOLS = "cloudPools"  # cloud pool name -> replace-only fields it was deployed with (gpu_knowledge.replacement)
OPERATOR_VERSION = "operatorVersion"  # the GPU Operator chart release
PER_POOL_DRIVERS = "perPoolDrivers"  # true when NVIDIADrivers own the operator's driver per pool (a JSON boolean;
# stacks deployed before it was one hold the string "true"/"false", still read back)
PREVIOUS_DRIVER_VERSION = "previousDriverVersion"  # what held pools stay on; "" when none is declared
TIMELINE = "timeline"  # when each wave was released and each generation first deployed (Timeline)
IDENTITY = "identity"  # which stack and cluster this is (StackIdentity): a prod gate compares its canary's

OUTPUT_NAMES: tuple[str, ...] = (
    STAGE, CLUSTER, DRIVER_VERSION, POOLS, RELEASED_POOLS, HELD_POOLS,
    CLOUD_POOLS, OPERATOR_VERSION, PER_POOL_DRIVERS, PREVIOUS_DRIVER_VERSION, TIMELINE, IDENTITY,
)

# The keys of a pool summary (beside DRIVER_VERSION), and of one of its generations.
ROLE = "role"
WAVE = "wave"
HELD = "held"
IMAGE = "image"
GENERATIONS = "generations"
GENERATION_ID = "id"
RETIRED = "retired"
# The keys of the timeline.
WAVES_RELEASED = "wavesReleased"  # wave (as a string) -> when a deployment first released it
GENERATIONS_DEPLOYED = "generationsDeployed"  # pool -> generation id (as a string) -> when first deployed
DRIVERS_RUN = "driversRun"  # pool -> the drivers deployments released it to through the gate, oldest first (never a
# config pin: docs/validation.md, What "ran" means)
HELD_ON_DECLARED = "heldOnDeclared"  # pool -> the promotion.runningToday driver a deployment held it on (not a run)
DRIVERS_REMEMBERED = 8  # per pool: enough for any rollback, bounded however long the stack lives
# The keys of the identity record.
IDENTITY_STACK = "stack"  # org/project/stack, as the engine names the stack that exported it
IDENTITY_STAGE = "stage"
IDENTITY_CLUSTER = "cluster"  # cluster.name
IDENTITY_CLOUD_ID = "cloudId"  # the AKS resource ID / EKS cluster ARN as the stack declares them; null: existing
IDENTITY_KUBE_SYSTEM_UID = "kubeSystemUid"  # metadata.uid of the kube-system Namespace, as the engine read it
# Whether the program read the cluster for it: false under the offline preview, which reaches no cluster (a null
# would not survive the engine: the SDK sends no key whose value is None); absent: an older release's output.
IDENTITY_CLUSTER_READ = "clusterRead"


def timestamp(moment: datetime) -> str:
    """How a recorded time is written: ISO 8601 in UTC to the second (``2026-12-09T10:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_timestamp(value: Any) -> datetime | None:
    """A recorded time back; anything else (hand-edited, another format) reads as None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class Timeline:
    """What deployments recorded, each time by the deployment that did it and carried forward unchanged by the
    ones after it (``renderers.manifests.timeline``): when each released wave was first released, and when each
    live generation of an image-owned pool was first deployed. A wave or generation that predates the record,
    or came with a preview (which deploys nothing), has no entry."""

    waves_released: Mapping[int, datetime] = field(default_factory=dict)
    generations_deployed: Mapping[str, Mapping[int, datetime]] = field(default_factory=dict)
    # Per pool, the drivers deployments released it to up to the one these outputs are of (the prod gate admitted
    # each: by an attestation, or as one the pool ran before), oldest first: moving a pool back to one of them is a
    # rollback, not a promotion. A held pool's pin (previousVersion) and promotion.runningToday never add one.
    drivers_run: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Per pool, the driver promotion.runningToday declares, where a deployment held the pool pinned to it (admitted
    # on the declaration, which preflight checks against the nodes): never a run, but the driver a pool that then
    # moved away through the gate may go back to. Kept while the declaration names it.
    held_on_declared: Mapping[str, str] = field(default_factory=dict)

    def as_output(self) -> dict[str, Any]:
        return {
            WAVES_RELEASED: {str(w): timestamp(t) for w, t in sorted(self.waves_released.items())},
            GENERATIONS_DEPLOYED: {
                pool: {str(g): timestamp(t) for g, t in sorted(gens.items())}
                for pool, gens in sorted(self.generations_deployed.items())
            },
            DRIVERS_RUN: {pool: list(drivers) for pool, drivers in sorted(self.drivers_run.items())},
            HELD_ON_DECLARED: dict(sorted(self.held_on_declared.items())),
        }


@dataclass(frozen=True)
class GenerationSummary:
    """One generation of an image-owned pool, retired or live."""

    id: int | None = None
    driver_version: str | None = None
    image: str | None = None
    retired: bool = False

    def as_output(self) -> dict[str, Any]:
        return {GENERATION_ID: self.id, DRIVER_VERSION: self.driver_version, IMAGE: self.image, RETIRED: self.retired}


@dataclass(frozen=True)
class PoolSummary:
    """What a reviewer wants per pool: the driver it moves to (or stays pinned to), its node image, held."""

    role: str | None = None
    wave: int | None = None
    held: bool | None = None
    driver_version: str | None = None
    image: str | None = None
    generations: tuple[GenerationSummary, ...] = ()

    def as_output(self) -> dict[str, Any]:
        return {
            ROLE: self.role,
            WAVE: self.wave,
            HELD: self.held,
            DRIVER_VERSION: self.driver_version,
            IMAGE: self.image,
            GENERATIONS: [g.as_output() for g in self.generations],
        }


@dataclass(frozen=True)
class StackIdentity:
    """Which stack and cluster a stack is: its qualified name as the engine ran it, its stage, its cluster's
    name and cloud resource ID (``engine_contracts.attestation.aks_resource_id`` / ``eks_cluster_arn``), and the
    UID of its cluster's kube-system Namespace as the engine read it. A canary's attestation records the same;
    the prod gate compares the two (policy canary-attested).

    ``cluster_read`` says whether the program read its cluster for the UID: False under the offline preview
    (which reaches no cluster), None where the output does not say (a canary deployed by an older release)."""

    stack: str | None = None
    stage: str | None = None
    cluster: str | None = None
    cloud_id: str | None = None
    kube_system_uid: str | None = None
    cluster_read: bool | None = None

    def as_output(self) -> dict[str, Any]:
        output: dict[str, Any] = {IDENTITY_STACK: self.stack, IDENTITY_STAGE: self.stage,
                                  IDENTITY_CLUSTER: self.cluster, IDENTITY_CLOUD_ID: self.cloud_id}
        if self.kube_system_uid is not None:
            output[IDENTITY_KUBE_SYSTEM_UID] = self.kube_system_uid
        if self.cluster_read is not None:
            output[IDENTITY_CLUSTER_READ] = self.cluster_read
        return output


def read_stack_identity(value: Any) -> StackIdentity | None:
    """The identity output back; None where the stack states none (deployed before it was exported)."""
    if not isinstance(value, Mapping) or not isinstance(value.get(IDENTITY_STACK), str):
        return None
    return StackIdentity(_text(value.get(IDENTITY_STACK)), _text(value.get(IDENTITY_STAGE)),
                         _text(value.get(IDENTITY_CLUSTER)), _text(value.get(IDENTITY_CLOUD_ID)),
                         _text(value.get(IDENTITY_KUBE_SYSTEM_UID)),
                         read if isinstance(read := value.get(IDENTITY_CLUSTER_READ), bool) else None)


@dataclass(frozen=True)
class StackOutputs:
    """Everything the program exports; a stack that states nothing reads as the defaults."""

    stage: Stage | None = None
    cluster: str | None = None
    driver_version: str | None = None
    pools: Mapping[str, PoolSummary] = field(default_factory=dict)
    released_pools: tuple[str, ...] = ()
    held_pools: tuple[str, ...] = ()
    cloud_pools: Mapping[str, str] = field(default_factory=dict)
    operator_version: str | None = None
    per_pool_drivers: bool | None = None
    previous_driver_version: str | None = None
    timeline: Timeline = field(default_factory=Timeline)
    identity: StackIdentity | None = None

    def as_outputs(self) -> dict[str, Any]:
        """Output name -> JSON value, in export order."""
        return {
            STAGE: self.stage.value if self.stage is not None else None,
            CLUSTER: self.cluster,
            DRIVER_VERSION: self.driver_version,
            POOLS: {name: summary.as_output() for name, summary in self.pools.items()},
            RELEASED_POOLS: list(self.released_pools),
            HELD_POOLS: list(self.held_pools),
            CLOUD_POOLS: dict(self.cloud_pools),
            OPERATOR_VERSION: self.operator_version,
            PER_POOL_DRIVERS: self.per_pool_drivers,
            PREVIOUS_DRIVER_VERSION: self.previous_driver_version,
            TIMELINE: self.timeline.as_output(),
            IDENTITY: self.identity.as_output() if self.identity is not None else None,
        }


def outputs_json_schema() -> dict[str, Any]:
    """The JSON Schema of the outputs object the program exports (``StackOutputs.as_outputs``), for the verbs that
    print it (`plan --json`): every output and every key of its values named, none other admitted. No key is
    required: the engine sends no key whose value is null, and a stack deployed by an older release lacks the
    newer ones."""

    def maybe(kind: str) -> dict[str, Any]:
        return {"type": [kind, "null"]}

    def closed(properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "additionalProperties": False}

    def mapping(values: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": values}

    text, names = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
    generation = closed({GENERATION_ID: maybe("integer"), DRIVER_VERSION: maybe("string"), IMAGE: maybe("string"),
                         RETIRED: {"type": "boolean"}})
    pool = closed({ROLE: maybe("string"), WAVE: maybe("integer"), HELD: maybe("boolean"),
                   DRIVER_VERSION: maybe("string"), IMAGE: maybe("string"),
                   GENERATIONS: {"type": "array", "items": generation}})
    timeline = closed({WAVES_RELEASED: mapping(text), GENERATIONS_DEPLOYED: mapping(mapping(text)),
                       DRIVERS_RUN: mapping(names), HELD_ON_DECLARED: mapping(text)})
    identity = {**closed({IDENTITY_STACK: maybe("string"), IDENTITY_STAGE: maybe("string"),
                          IDENTITY_CLUSTER: maybe("string"), IDENTITY_CLOUD_ID: maybe("string"),
                          IDENTITY_KUBE_SYSTEM_UID: text, IDENTITY_CLUSTER_READ: {"type": "boolean"}}),
                "type": ["object", "null"]}
    properties = {
        STAGE: maybe("string"), CLUSTER: maybe("string"), DRIVER_VERSION: maybe("string"), POOLS: mapping(pool),
        RELEASED_POOLS: names, HELD_POOLS: names, CLOUD_POOLS: mapping(text), OPERATOR_VERSION: maybe("string"),
        PER_POOL_DRIVERS: maybe("boolean"), PREVIOUS_DRIVER_VERSION: maybe("string"), TIMELINE: timeline,
        IDENTITY: identity,
    }
    assert set(properties) == set(OUTPUT_NAMES)
    return closed(properties)


# ---------------------------------------------------------------- reading


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else flag(value)


def _names(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else ()


def read_generation(value: Any) -> GenerationSummary | None:
    if not isinstance(value, Mapping):
        return None
    return GenerationSummary(
        id=_int(value.get(GENERATION_ID)),
        driver_version=_text(value.get(DRIVER_VERSION)),
        image=_text(value.get(IMAGE)),
        retired=value.get(RETIRED) is True,
    )


def read_pool_summary(value: Any) -> PoolSummary:
    """One pool's summary; a malformed one reads as a summary that states nothing (the pool is still there)."""
    if not isinstance(value, Mapping):
        return PoolSummary()
    generations = value.get(GENERATIONS)
    read = [read_generation(g) for g in generations] if isinstance(generations, (list, tuple)) else []
    return PoolSummary(
        role=_text(value.get(ROLE)),
        wave=_int(value.get(WAVE)),
        held=_bool(value.get(HELD)),
        driver_version=_text(value.get(DRIVER_VERSION)),
        image=_text(value.get(IMAGE)),
        generations=tuple(g for g in read if g is not None),
    )


def read_pools(value: Any) -> dict[str, PoolSummary]:
    """The ``pools`` output: pool -> summary, in the order the stack states them."""
    if not isinstance(value, Mapping):
        return {}
    return {str(name): read_pool_summary(summary) for name, summary in value.items()}


def read_cloud_pools(value: Any) -> dict[str, str]:
    """The ``cloudPools`` output: cloud pool name -> the record of its replace-only fields."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _times(value: Any) -> dict[int, datetime]:
    """A map of whole numbers (written as strings) to recorded times; what is malformed is left out."""
    if not isinstance(value, Mapping):
        return {}
    found = {}
    for key, text in value.items():
        moment = read_timestamp(text)
        if isinstance(key, str) and key.isdigit() and moment is not None:
            found[int(key)] = moment
    return found


def read_timeline(value: Any) -> Timeline:
    if not isinstance(value, Mapping):
        return Timeline()
    generations = value.get(GENERATIONS_DEPLOYED)
    run = value.get(DRIVERS_RUN)
    return Timeline(
        waves_released=_times(value.get(WAVES_RELEASED)),
        generations_deployed={str(pool): times for pool, gens in generations.items() if (times := _times(gens))}
        if isinstance(generations, Mapping) else {},
        drivers_run={str(pool): tuple(d for d in drivers if isinstance(d, str) and d)
                     for pool, drivers in run.items() if isinstance(drivers, (list, tuple))}
        if isinstance(run, Mapping) else {},
        held_on_declared={str(pool): driver for pool, driver in held.items() if isinstance(driver, str) and driver}
        if isinstance(held := value.get(HELD_ON_DECLARED), Mapping) else {},
    )


def read_stack_outputs(outputs: Any) -> StackOutputs:
    """A stack's outputs as `pulumi stack output --json` prints them or a StackReference hands them over (a
    mapping; anything else reads as a stack that states nothing)."""
    if not isinstance(outputs, Mapping):
        return StackOutputs()
    return StackOutputs(
        stage=read_stage(outputs.get(STAGE)),
        cluster=_text(outputs.get(CLUSTER)),
        driver_version=_text(outputs.get(DRIVER_VERSION)),
        pools=read_pools(outputs.get(POOLS)),
        released_pools=_names(outputs.get(RELEASED_POOLS)),
        held_pools=_names(outputs.get(HELD_POOLS)),
        cloud_pools=read_cloud_pools(outputs.get(CLOUD_POOLS)),
        operator_version=_text(outputs.get(OPERATOR_VERSION)),
        per_pool_drivers=_bool(outputs.get(PER_POOL_DRIVERS)),
        previous_driver_version=_text(outputs.get(PREVIOUS_DRIVER_VERSION)),
        timeline=read_timeline(outputs.get(TIMELINE)),
        identity=read_stack_identity(outputs.get(IDENTITY)),
    )
