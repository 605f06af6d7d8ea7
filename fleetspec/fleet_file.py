"""The fleet file (``Fleet.yaml`` at the top of the project): one driver promotion train across many stacks.

It orders stacks; it never says what a stack releases. Each stack's own ``Pulumi.<stack>.yaml`` still decides its
driver, its pools and its waves inside the cluster; the fleet file puts the stacks in waves (the canary wave
first), says how many stacks of a wave may move at once, what each wave waits for before the next starts, the
limits across every cluster, what halts the train everywhere, and where the train's lease lives. ``gpu-rollout
fleet plan|status|advance|halt|resume`` read it (docs/fleet.md).

Validated as stack config is: a pydantic model, every problem with its key path (``waves[1].maxConcurrent``) and
the reason, raised together as one :class:`fleetspec.load.SpecError`. What spans keys (a wave's name given twice, a
stack in two waves, the lease's stack in none: :func:`structure_problems`) and what only the stack files can tell
(that a stack named exists, that canary stacks come first and a prod stack's canary before it:
:func:`stack_problems`) are checked after, and every problem of both is reported together, each at its own key, a
stack name that is no stack's with the nearest one.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictBool, StrictInt, ValidationError, field_validator

from fleetspec import yaml_files
from fleetspec.base import DNS_LABEL, PositiveInt, SpecModel, Stage
from fleetspec.load import SpecError, SpecProblem, located
from fleetspec.stacks import is_stack_name
from vocabulary.triggers import BAD_SIGNS, TriggerKind

FLEET_FILE = "Fleet.yaml"
MAX_FLEET_FILE_BYTES = 1024 * 1024
DOCS = "docs/fleet.md"

# The signs that may halt the train in every cluster: every bad sign (vocabulary.triggers), the live watches'
# triggers and a failed `verify --smoke`. `outside-window` is no bad sign: the stack outside its window is paused
# alone, as `watch` pauses it. A trigger the watches report that haltOn cannot name (a newer kind) halts the train.
HALT_SIGNS: tuple[TriggerKind, ...] = BAD_SIGNS
OWN_STACK_ONLY = TriggerKind.OUTSIDE_WINDOW  # a trigger that pauses its own stack, never the train


def _halt_sign(value: object) -> object:
    if value == OWN_STACK_ONLY:
        raise ValueError(f"{OWN_STACK_ONLY} is no bad sign and cannot halt the train: a stack outside its "
                         "maintenance window is paused alone, as `watch` pauses it")
    if not isinstance(value, str) or value not in HALT_SIGNS:
        *first, last = (f"'{sign}'" for sign in HALT_SIGNS)
        raise ValueError(f"Input should be {', '.join(first)} or {last}")
    return value


HaltSign = Annotated[TriggerKind, BeforeValidator(_halt_sign)]

# Where the train's lease lives in the lease stack's cluster: beside the stacks' identity records.
LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "gpu-driver-upgrade-fleet"


class WaitFor(SpecModel):
    """What a wave waits for, once every stack of it runs what its stack file says and its rollout is done,
    before the next wave starts."""

    verify: Literal["smoke", "none"] = Field(
        "smoke", description="`smoke`: `gpu-rollout verify --smoke` passes on each stack of the wave (a failed "
        "check halts the train); `none`: the finished rollout is enough (a cluster whose API server cannot reach "
        "the model pods through the pod proxy, where verify cannot ask them).")
    attestation: StrictBool = Field(
        False, description="Each (canary) stack of the wave has a sound attestation of its driver in the project, "
        "soaked as long as its prod stacks ask: what the soak workflow proposes in a pull request, merged.")
    soakHours: Annotated[float, Field(ge=0, le=24 * 365)] = Field(
        0, description="Hours since the wave's last upgraded node finished its upgrade.")

    @field_validator("soakHours", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number of hours such as 24, got {value!r}")
        return value


class Wave(SpecModel):
    name: str = Field(description="The wave's name, as status and the PR comment show it.")
    stacks: list[str] = Field(min_length=1, description="The stacks of the wave, by their own names.")
    maxConcurrent: PositiveInt = Field(1, description="Stacks of the wave that may move at once.")
    waitFor: WaitFor = Field(default_factory=WaitFor)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not DNS_LABEL.fullmatch(value):
            raise ValueError(f"{value!r} is not a wave name: lower-case letters, digits and '-', at most 63")
        return value

    @field_validator("stacks")
    @classmethod
    def _stacks(cls, value: list[str]) -> list[str]:
        for name in value:
            if not isinstance(name, str) or not is_stack_name(name):
                raise ValueError(f"{name!r} is not a stack's own name (the NAME of Pulumi.NAME.yaml)")
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice")
        return value


class Limits(SpecModel):
    """Limits across every cluster of the fleet; absent: none."""

    maxGpusUnavailable: PositiveInt | None = Field(
        None, description="GPUs the stacks in flight may take out of service at once, all clusters together "
        "(each stack counted at the most its upgrade policy lets go at once).")
    maxClustersInFlight: PositiveInt | None = Field(None, description="Clusters with a rollout in flight at once.")


class Lease(SpecModel):
    """The train's lock: a coordination.k8s.io/v1 Lease in one stack's cluster, so two `fleet advance` never run
    at once; it expires, so a killed one blocks the next for at most ``durationSeconds``."""

    stack: str | None = Field(None, description="The stack whose cluster holds the Lease (default: the first stack "
                              "of the first wave).")
    durationSeconds: Annotated[StrictInt, Field(ge=15, le=86_400)] = Field(
        900, description="How long a holder that stopped renewing keeps it.")


class FleetFile(SpecModel):
    waves: list[Wave] = Field(min_length=1)
    limits: Limits = Field(default_factory=Limits)
    haltOn: list[HaltSign] = Field(default_factory=lambda: list(HALT_SIGNS),
                                   description="The signs that halt the train and pause every stack it started: "
                                   "any trigger kind but `outside-window`.")
    lease: Lease = Field(default_factory=Lease)

    @field_validator("haltOn")
    @classmethod
    def _once(cls, value: list[TriggerKind]) -> list[TriggerKind]:
        twice = sorted({sign for sign in value if value.count(sign) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice")
        return value

    # ------------------------------------------------------------ reading it

    @property
    def stacks(self) -> list[str]:
        """Every stack of the fleet, in wave order."""
        return [stack for wave in self.waves for stack in wave.stacks]

    def wave_of(self, stack: str) -> Wave:
        return next(wave for wave in self.waves if stack in wave.stacks)

    @property
    def lease_stack(self) -> str:
        return self.lease.stack or self.waves[0].stacks[0]

    def halts(self, sign: str) -> bool:
        """Does this sign halt the whole train (else it pauses its own stack only)."""
        if sign == OWN_STACK_ONLY:
            return False
        return sign in self.haltOn or sign not in HALT_SIGNS


def _path(loc: tuple[object, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the file)"


def _problems(error: ValidationError, document: Mapping[str, Any]) -> list[SpecProblem]:
    problems = []
    for line in error.errors(include_url=False):
        where = located(line, FleetFile, document, DOCS)
        if where.own_words and not where.loc:
            # A whole-file check names its own key path first ("waves[1].name: ...").
            head, _, rest = where.message.partition(": ")
            if rest and head.startswith(("waves[", "lease.", "limits.")):
                problems.append(SpecProblem(head, rest))
                continue
        problems.append(SpecProblem(_path(where.loc), where.message, where.item))
    return problems


def nearest(name: str, names: Collection[str]) -> str:
    """``; did you mean X?`` for the name in ``names`` nearest ``name`` (a typo), else nothing."""
    found = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
    return f"; did you mean {found[0]}?" if found else ""


def structure_problems(fleet: FleetFile, declared: Collection[str] | None = None) -> list[SpecProblem]:
    """What spans keys: a wave name given twice, a stack in two waves, the lease's stack in no wave (the nearest
    stack of a wave for a typo, among those with a stack file where ``declared`` says which); each at its key."""
    problems: list[SpecProblem] = []
    seen: dict[str, int] = {}
    for index, wave in enumerate(fleet.waves):
        if wave.name in seen:
            problems.append(SpecProblem(f"waves[{index}].name", f"{wave.name!r} is also the name of "
                                        f"waves[{seen[wave.name]}]"))
        seen.setdefault(wave.name, index)
    where: dict[str, int] = {}
    for index, wave in enumerate(fleet.waves):
        for position, stack in enumerate(wave.stacks):
            if stack in where:
                problems.append(SpecProblem(f"waves[{index}].stacks[{position}]", f"{stack} is already in wave "
                                            f"{fleet.waves[where[stack]].name}: a stack moves in one wave"))
                continue
            where[stack] = index
    if fleet.lease.stack is not None and fleet.lease.stack not in where:
        candidates = [name for name in where if declared is None or name in declared]
        problems.append(SpecProblem("lease.stack", f"{fleet.lease.stack} is in no wave"
                                    + nearest(fleet.lease.stack, candidates)))
    return problems


def _loose(document: Mapping[str, Any]) -> tuple[FleetFile | None, bool]:
    """The fleet file's shape where its keys are not all valid: each wave's name and stacks where they are text and a
    list of text (else none), whether it waits for an attestation, and the lease's stack; None without a waves list;
    and whether every wave's stacks could be read. Only for judging what spans keys beside the keys' own problems:
    never a fleet to act on."""
    waves = document.get("waves")
    if not isinstance(waves, list):
        return None, False
    whole = all(isinstance(w, Mapping) and isinstance(w.get("stacks"), list)
                and all(isinstance(s, str) for s in w["stacks"]) for w in waves)
    shaped = []
    for wave in waves:
        wave = wave if isinstance(wave, Mapping) else {}
        name, stacks = wave.get("name"), wave.get("stacks")
        wait = found if isinstance(found := wave.get("waitFor"), Mapping) else {}
        shaped.append(Wave.model_construct(
            name=name if isinstance(name, str) else "",
            stacks=[s for s in stacks if isinstance(s, str)] if isinstance(stacks, list) else [],
            maxConcurrent=1, waitFor=WaitFor.model_construct(attestation=wait.get("attestation") is True)))
    lease = found if isinstance(found := document.get("lease"), Mapping) else {}
    stack = lease.get("stack")
    return FleetFile.model_construct(waves=shaped, lease=Lease.model_construct(
        stack=stack if isinstance(stack, str) else None)), whole


def fleet_from_document(document: Any, source: str = FLEET_FILE,
                        declared: Mapping[str, DeclaredStack] | None = None) -> FleetFile:
    """The fleet file from its YAML document; SpecError naming every problem: its keys', what spans keys, and with
    ``declared`` (the project's stack files) what must agree with them."""
    if not isinstance(document, Mapping):
        raise SpecError([SpecProblem(source, "must be a YAML mapping with a waves: list")], source)
    try:
        fleet = FleetFile.model_validate(dict(document))
    except ValidationError as error:
        # Every problem at once: what spans keys is judged on whatever of the waves and the lease reads as their
        # shape (a wave's name and stacks), beside the keys' own problems, never repeating a key already named.
        problems = _problems(error, document)
        named = {p.path for p in problems}
        loose, whole = _loose(document)
        if loose is not None:
            spanning = structure_problems(loose, declared) + (stack_problems(loose, declared)
                                                              if declared is not None else [])
            # A stack "in no wave" is said only where every wave's stacks could be read.
            problems += [p for p in spanning if p.path not in named and (whole or p.path != "waves")]
        raise SpecError(problems, source) from None
    problems = structure_problems(fleet, declared) + (stack_problems(fleet, declared) if declared is not None else [])
    if problems:
        raise SpecError(problems, source)
    return fleet


def read_fleet_file(path: Path, declared: Mapping[str, DeclaredStack] | None = None) -> FleetFile:
    """The fleet file at ``path``; SpecError (exit 2) naming every problem (with ``declared``: its disagreements
    with the stack files too)."""
    try:
        document = yaml_files.read(path, MAX_FLEET_FILE_BYTES, yaml_files.StrictLoader)
    except yaml_files.YamlFileError as error:
        raise SpecError([SpecProblem(str(path), f"is {error}" if not str(error).startswith("key ") else str(error))],
                        str(path)) from None
    return fleet_from_document(document, str(path), declared)


def fleet_path(project_dir: Path) -> Path:
    return project_dir / FLEET_FILE


@dataclass(frozen=True)
class DeclaredStack:
    """What the fleet needs to know of a stack file: its stage and, for a prod stack, its canary."""

    stage: Stage | None  # None: the stack file does not load
    canary: str | None = None
    problem: str | None = None


def check_stacks(fleet: FleetFile, declared: Mapping[str, DeclaredStack], source: str = FLEET_FILE) -> None:
    """SpecError naming every problem of :func:`structure_problems` and :func:`stack_problems`."""
    problems = structure_problems(fleet, declared) + stack_problems(fleet, declared)
    if problems:
        raise SpecError(problems, source)


def stack_problems(fleet: FleetFile, declared: Mapping[str, DeclaredStack]) -> list[SpecProblem]:
    """What the stack files must agree with: every stack named has a stack file that loads (a typo: the nearest
    stack file's name), every stack file of the project is in a wave (the deploy workflow deploys through the train
    only), the first wave holds the canary stacks and only them, a prod stack's canary is in an earlier wave, and
    only a canary wave waits for an attestation."""
    problems: list[SpecProblem] = []
    position = {stack: index for index, wave in enumerate(fleet.waves) for stack in wave.stacks}
    for index, wave in enumerate(fleet.waves):
        for at, stack in enumerate(wave.stacks):
            key = f"waves[{index}].stacks[{at}]"
            found = declared.get(stack)
            if found is None:
                problems.append(SpecProblem(key, f"no stack file Pulumi.{stack}.yaml in the project"
                                            + nearest(stack, declared)))
                continue
            if found.stage is None:
                problems.append(SpecProblem(key, f"Pulumi.{stack}.yaml does not load: {found.problem}"))
                continue
            if index == 0 and found.stage != Stage.CANARY:
                problems.append(SpecProblem(key, f"{stack} is a {found.stage.value} stack: the first wave is the "
                                            "canary wave and holds canary stacks only"))
            if index > 0 and found.stage == Stage.CANARY:
                problems.append(SpecProblem(key, f"{stack} is a canary stack: canary stacks move in the first wave"))
            if found.canary is not None:
                if found.canary not in position:
                    problems.append(SpecProblem(key, f"its promotion.canaryStack {found.canary} is in no wave: the "
                                                "fleet moves a prod stack only after its canary"))
                elif position[found.canary] >= index:
                    problems.append(SpecProblem(key, f"its promotion.canaryStack {found.canary} must move in an "
                                                "earlier wave"))
        if wave.waitFor.attestation:
            prods = [s for s in wave.stacks if (d := declared.get(s)) is not None and d.stage == Stage.PROD]
            if prods:
                problems.append(SpecProblem(f"waves[{index}].waitFor.attestation", "only a canary stack's verify "
                                            f"attests; {', '.join(prods)} never will"))
    for stack in sorted(set(declared) - set(position)):
        problems.append(SpecProblem("waves", f"Pulumi.{stack}.yaml is in no wave: add it to one (the deploy "
                                    "workflow deploys the project's stacks through the train only)"))
    return problems
