"""The stack's outputs: one typed value, the names it is exported under, its encoding and its reading.

What `pulumi stack output --json` prints for a stack of this project. The program exports it
(``__main__.py``, one loop over :meth:`StackOutputs.as_outputs`; ``spec.manifests.stack_outputs`` builds it
from the spec), and it is read back in four places: by the stack's next deployment (``components.previous``
and, for the pack, ``spec.resource_facts.previous``), by a prod stack's gate from its canary stack
(``components.promotion``), by `gpu-rollout plan` and `gpu-rollout diff` (``rollout.plan``,
``preview.diff``). Every output's name, and every key of a pool summary, is spelled here and nowhere else
(tests/spec/test_stack_outputs.py looks for a stray literal).

Reading is tolerant like the other readers: an output a stack lacks, or states malformed (an older
release's, a hand-edited ``--previous-outputs`` file), reads as None, empty or False.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spec.base import Stage
from spec.resource_facts.values import flag, flag_text, read_stage

# The stack outputs, in the order the program exports them.
STAGE = "stage"
CLUSTER = "cluster"  # cluster.name
DRIVER_VERSION = "driverVersion"  # the fleet's target driver (also a pool summary's and a generation's key)
POOLS = "pools"  # pool -> its summary (PoolSummary)
RELEASED_POOLS = "releasedPools"  # by wave, then name
HELD_POOLS = "heldPools"  # by wave, then name
CLOUD_POOLS = "cloudPools"  # cloud pool name -> replace-only fields it was deployed with (spec.replacement)
OPERATOR_VERSION = "operatorVersion"  # the GPU Operator chart release
PER_POOL_DRIVERS = "perPoolDrivers"  # "true" when NVIDIADrivers own the operator's driver per pool
PREVIOUS_DRIVER_VERSION = "previousDriverVersion"  # what held pools stay on; "" when none is declared

OUTPUT_NAMES: tuple[str, ...] = (
    STAGE, CLUSTER, DRIVER_VERSION, POOLS, RELEASED_POOLS, HELD_POOLS,
    CLOUD_POOLS, OPERATOR_VERSION, PER_POOL_DRIVERS, PREVIOUS_DRIVER_VERSION,
)

# The keys of a pool summary (beside DRIVER_VERSION), and of one of its generations.
ROLE = "role"
WAVE = "wave"
HELD = "held"
IMAGE = "image"
GENERATIONS = "generations"
GENERATION_ID = "id"
RETIRED = "retired"


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

    def as_outputs(self) -> dict[str, Any]:
        """Output name -> JSON value, in export order (``perPoolDrivers`` spelled "true"/"false")."""
        return {
            STAGE: self.stage.value if self.stage is not None else None,
            CLUSTER: self.cluster,
            DRIVER_VERSION: self.driver_version,
            POOLS: {name: summary.as_output() for name, summary in self.pools.items()},
            RELEASED_POOLS: list(self.released_pools),
            HELD_POOLS: list(self.held_pools),
            CLOUD_POOLS: dict(self.cloud_pools),
            OPERATOR_VERSION: self.operator_version,
            PER_POOL_DRIVERS: flag_text(self.per_pool_drivers) if self.per_pool_drivers is not None else None,
            PREVIOUS_DRIVER_VERSION: self.previous_driver_version,
        }


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
    )
