"""Where the fleet's promotion train is, and its next safe step: pure, over what the world shows.

The world is each stack's record in the backend, read as the deploy workflow reads it (:mod:`promotion_train.deploy_plan`:
does the stack run what main says, is an update of it running, was it rolled back), what its cluster shows now
(:mod:`checks.fleet`: `watch --once`'s snapshot and triggers), and, for the wave at the front of the train, what
`verify --smoke` and the soak say. Nothing is kept between runs but what the world itself holds: the train's
Lease records a halt and, per stack, the update whose `verify` passed (so a stack is not probed again every run).

Each wave, in order, is:

- **done** when every stack of it runs what main says, its rollout is complete, `verify --smoke` passed on that
  update (``waitFor.verify``) and what it waits for is there: each canary's attestation of its driver, merged
  (``waitFor.attestation``), and ``waitFor.soakHours`` since its last upgraded node finished;
- else the **current** wave: its stacks that differ from what they run go up, as many as ``maxConcurrent`` allows
  beside those still moving, within the fleet's limits (GPUs out of service, clusters in flight) and each stack's
  maintenance window. Later waves wait.

A bad sign in any cluster (a trigger the fleet file's ``haltOn`` names, or one it cannot name; a failed verify)
halts the train: every stack moving or moved by the train (any wave) is paused and nothing moves until `fleet
resume`. A sign the fleet file leaves out (and ``outside-window``) pauses its own stack only, as `watch` does. A
rollback halts its wave: that wave and the later ones stay where they are until `fleet resume`.

A cluster that cannot be read stops only what depends on it: its stacks do not move (nor count as done), and they
count as in flight against the fleet's limits (missing evidence is no pass); every other cluster is read, halted on
and moved as usual. Every stack with a rollout in flight counts against the limits, whatever its deploy state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from checks.fleet import ClusterView
from checks.lease import PoolVerified
from promotion_train import deploy_plan, waves as stack_waves
from promotion_train.deploy_plan import Decision
from promotion_train.stacks import StackFile
from pulumi_backend import lenient_spec
from pulumi_backend.pulumi_config import Update
from simulate.fleet import spec_groups
from gpu_knowledge import capacity
from fleetspec.fleet_file import FleetFile, Wave
from fleetspec.model import DriverOwner, FleetSpec
from vocabulary.triggers import TriggerKind


class StackStatus(StrEnum):
    BLOCKED = "blocked"  # its stack file does not load
    UPDATING = "updating"  # an update of it is running in the backend
    ROLLED_BACK = "rolled-back"  # left alone until the rollback's pull request merges
    DESTROYED = "destroyed"  # left alone
    UNREADABLE = "unreadable"  # its cluster could not be read
    PENDING = "pending"  # it differs from what it runs: it goes up when its wave is current
    WINDOW = TriggerKind.OUTSIDE_WINDOW.value  # it differs, but its maintenance window is closed
    ROLLING = "rolling"  # it runs what main says; its rollout is in flight
    COMPLETE = "complete"  # its rollout is complete

    @property
    def moving(self) -> bool:
        return self in (StackStatus.UPDATING, StackStatus.ROLLING)


class WaveStatus(StrEnum):
    DONE = "done"
    HALTED = "halted"  # a rollback halted it: it stays where it is until `fleet resume`
    WAITING = "waiting"  # its stacks are done; it waits for an attestation or a soak
    CURRENT = "current"  # its stacks move (or wait for their turn)
    LATER = "later"


@dataclass(frozen=True)
class StackWorld:
    """What the world shows of one stack."""

    file: StackFile
    spec: FleetSpec | None  # None: its stack file does not load
    decision: Decision  # deploy_plan's, its maintenance window judged
    update: int | None = None  # the version of its last update in the backend
    locked: bool = False  # the backend holds a lock of it: an update in progress
    view: ClusterView | None = None  # its cluster now; None when not read (nothing deployed)
    view_error: str | None = None  # why its cluster could not be read
    deployed_driver: str | None = None  # driver.version of its last succeeded update's config; None: none read

    def moves_from(self) -> tuple[str | None, str]:
        """The driver the stack moves from and where that was read: its last succeeded update's, as `plan
        --from-backend` judges against, else (nothing deployed, or not read) the file's driver.previousVersion."""
        if self.deployed_driver is not None:
            return self.deployed_driver, "last deployment: its last succeeded update in the backend"
        previous = self.spec.driver.previousVersion if self.spec is not None else None
        return previous, "driver.previousVersion (no succeeded update in the backend)"

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def cluster(self) -> str:
        return self.spec.cluster.name if self.spec is not None else "?"

    def status(self) -> tuple[StackStatus, str]:
        decision = self.decision
        if self.spec is None or self.file.problem is not None:
            return StackStatus.BLOCKED, f"its stack file does not load: {self.file.problem}"
        if decision.state == deploy_plan.RUNNING or self.locked:
            return StackStatus.UPDATING, (decision.reason if decision.state == deploy_plan.RUNNING else
                                          "the backend holds its lock: an update is in progress (or one was killed: "
                                          "`pulumi cancel`, or remove a dead file backend's lock)")
        if decision.state == deploy_plan.ROLLED_BACK:
            return StackStatus.ROLLED_BACK, decision.reason
        if decision.state == deploy_plan.DESTROYED:
            return StackStatus.DESTROYED, decision.reason
        if self.view_error is not None:
            return StackStatus.UNREADABLE, f"its cluster {self.cluster} could not be read: {self.view_error}"
        if decision.state == deploy_plan.OUTSIDE_WINDOW:
            return StackStatus.WINDOW, decision.reason
        if decision.deploy:
            return StackStatus.PENDING, decision.reason
        if self.view is None:
            return StackStatus.UNREADABLE, f"its cluster {self.cluster} was not read"
        if not self.view.complete:
            return StackStatus.ROLLING, (f"{self.view.done} of {self.view.nodes} node(s) done"
                                         + (f", {self.view.paused} paused" if self.view.paused else ""))
        return StackStatus.COMPLETE, "its rollout is complete: every released pool runs its target driver"


@dataclass(frozen=True)
class Soak:
    """What `gpu-rollout soak` reads of a stack: when its last upgraded node finished (None: not yet), and, for a
    canary, the project's attestation that admits its driver into every prod stack (None: not there yet)."""

    finished: float | None
    attested: str | None = None
    reason: str = ""


class Probe(Protocol):
    """The reads the front of the train needs, made only for the stacks that need them."""

    def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
        """The failed checks of `verify --smoke`, one line each; None when the cluster could not be asked now.
        ``through_wave``: on the stack as it was while that wave was its newest released one
        (:func:`promotion_train.waves.spec_through`)."""
        ...

    def soak(self, stack: str) -> Soak: ...


@dataclass(frozen=True)
class Sign:
    """A bad sign: a watch trigger or a failed verify, in one stack's cluster."""

    stack: str
    kind: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"stack": self.stack, "kind": self.kind, "message": self.message}


@dataclass
class StackState:
    world: StackWorld
    status: StackStatus
    reason: str
    verified: bool = False  # verify --smoke passed on its last update (or the wave asks none)
    verify_failures: list[str] = field(default_factory=list)
    vouched: bool = False  # not read by this run; its wave done as an approved plan's run saw it
    gate: list[str] = field(default_factory=list)  # why its own waves keep it from going up (promotion_train/waves.py)

    @property
    def in_flight(self) -> bool:
        """Does its rollout count against the fleet's limits: an update running, its cluster showing a rollout not
        complete (whatever its deploy state: a stack whose file changed may still be rolling), or a deployed stack
        whose cluster could not be read (it may be rolling: missing evidence is no pass)."""
        world = self.world
        if self.status.moving:
            return True
        if self.vouched:
            return False
        if world.view is not None:
            return not world.view.complete
        return world.view_error is not None and world.update is not None

    def as_json(self) -> dict[str, Any]:
        world = self.world
        spec = world.spec
        return {
            "stack": world.name, "stage": world.file.stage.value if world.file.stage else None,
            "cluster": world.cluster, "status": self.status.value, "reason": self.reason,
            "driver": {"from": world.moves_from()[0], "fromSource": world.moves_from()[1],
                       "to": spec.driver.version} if spec else None,
            "update": world.update, "deploy": world.decision.deploy, "packRef": world.decision.pack_ref,
            "verified": self.verified, "verifyFailures": self.verify_failures, "inFlight": self.in_flight,
            "view": world.view.as_json() if world.view else None,
        }


@dataclass
class WaveState:
    wave: Wave
    stacks: list[StackState]
    status: WaveStatus = WaveStatus.LATER
    waiting: list[str] = field(default_factory=list)  # what the wave waits for, in words

    def as_json(self) -> dict[str, Any]:
        return {"name": self.wave.name, "status": self.status.value, "maxConcurrent": self.wave.maxConcurrent,
                "waitFor": self.wave.waitFor.model_dump(), "waiting": self.waiting,
                "stacks": [s.as_json() for s in self.stacks]}


@dataclass
class Train:
    waves: list[WaveState]
    current: int | None = None  # the index of the current wave; None when every wave is done
    halt: Sign | None = None  # the first bad sign that halts the train (this run)
    signs: list[Sign] = field(default_factory=list)  # every bad sign seen
    own_pauses: list[Sign] = field(default_factory=list)  # signs that pause their own stack only
    ups: list[str] = field(default_factory=list)  # the stacks to bring up now
    blocked: list[str] = field(default_factory=list)  # why nothing (more) moves now
    verified_now: dict[str, int] = field(default_factory=dict)  # stack -> update whose verify passed this run
    # stack -> pool -> the target a verify passed on this run, pools with no such record before (promotion_train/waves.py)
    pools_verified_now: dict[str, dict[str, PoolVerified]] = field(default_factory=dict)
    gpus_committed: int = 0  # the most GPUs the stacks in flight may take out at once, all clusters
    clusters_in_flight: list[str] = field(default_factory=list)
    vouched: list[str] = field(default_factory=list)  # waves taken as done from an approved plan, and why

    @property
    def complete(self) -> bool:
        return self.current is None and self.halt is None

    def stack(self, name: str) -> StackState:
        return next(s for w in self.waves for s in w.stacks if s.world.name == name)

    def started(self) -> list[StackState]:
        """The stacks moving or moved by the train, which a halt pauses: every stack of any wave that has a
        deployment (not destroyed), whichever wave is current now. A later change can make an earlier wave current
        again while a stack of a later one still rolls: it is paused too."""
        return [s for w in self.waves for s in w.stacks
                if s.world.update is not None and s.world.decision.state != deploy_plan.DESTROYED]

    def next_step(self) -> str:
        if self.halt is not None:
            return f"halt: {self.halt.message} (stack {self.halt.stack})"
        if self.ups:
            return "up " + ", ".join(self.ups)
        if self.current is None:
            return "nothing: every wave is done"
        return "wait: " + ("; ".join(self.blocked) or "the current wave's stacks are moving")


def worst_gpus_unavailable(spec: FleetSpec) -> int:
    """The most GPUs the stack's rollout takes out of service at once: per upgrade policy (an NVIDIADriver's pool,
    or the ClusterPolicy's pools), the nodes its upgrade slots let go at once, taken from the pools with the most
    GPUs per node first, with the validation job's GPUs on as many nodes just upgraded (gpu_knowledge/capacity.py). A
    stack whose node image owns the driver moves by generations beside the old nodes: 0."""
    if spec.driver.owner != DriverOwner.OPERATOR:
        return 0
    pools = {p.name: p for p in spec.nodePools if spec.pool_target(p).moves}
    total = 0
    for group in spec_groups(spec):
        members = sorted((pools[name] for name in group.pools if name in pools),
                         key=lambda p: (-p.gpusPerNode, p.name))
        nodes = sum(p.nodeCount for p in members)
        if not members or nodes == 0:
            continue
        slots = capacity.upgrade_slots(group.policy.max_parallel, group.policy.max_unavailable, nodes)
        for pool in members:
            out = min(slots, pool.nodeCount)
            if out <= 0:
                break
            shape = capacity.PoolShape(pool.name, pool.nodeCount, pool.gpusPerNode)
            total += capacity.gpus_out_of_service(shape, out, spec.validation_gpus(pool))
            slots -= out
    return total


def _signs(world: StackWorld) -> list[Sign]:
    if world.view is None:
        return []
    return [Sign(world.name, t.kind, t.message) for t in world.view.triggers]


def _at(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _new_records(state: StackState, pools_verified: Mapping[str, Mapping[str, PoolVerified]], now: float,
                 through: int | None = None, verify: str = "smoke") -> dict[str, PoolVerified]:
    """The pools a passing verify (as of wave ``through``) records now: complete, with no record of that target
    (a record already there keeps its time: the dwell counts from the first)."""
    world = state.world
    if world.spec is None or world.view is None:
        return {}
    had = pools_verified.get(world.name, {})
    return {pool: record for pool, record in
            stack_waves.records_of(world.spec, world.view.pools, through, now, verify).items()
            if pool not in had or had[pool].target != record.target}


def _record(train: Train, stack: str, records: Mapping[str, PoolVerified]) -> None:
    if records:
        train.pools_verified_now.setdefault(stack, {}).update(records)


def _failed_verify(state: StackState, failures: list[str], train: Train) -> None:
    state.verify_failures = failures
    train.signs.append(Sign(state.world.name, TriggerKind.VERIFY_FAILED,
                            f"verify --smoke failed on stack {state.world.name}: " + "; ".join(failures[:3])
                            + (f" and {len(failures) - 3} more" if len(failures) > 3 else "")))


def _verify_wave(wave: WaveState, verified: Mapping[str, int], probe: Probe, train: Train,
                 pools_verified: Mapping[str, Mapping[str, PoolVerified]], now: float) -> None:
    """verify --smoke on each complete stack of the wave whose last update has not passed it yet (or whose pools
    have no record of the targets it passed on)."""
    for state in wave.stacks:
        if state.status != StackStatus.COMPLETE:
            continue
        if wave.wave.waitFor.verify == "none":
            state.verified = True
            _record(train, state.world.name, _new_records(state, pools_verified, now, verify="none"))
            continue
        update = state.world.update
        unrecorded = _new_records(state, pools_verified, now)
        if update is not None and verified.get(state.world.name) == update and not unrecorded:
            state.verified = True
            continue
        failures = probe.verify(state.world.name)
        if failures is None:
            train.blocked.append(f"{state.world.name}: verify --smoke could not read its cluster now; asked again "
                                 "next run")
        elif failures:
            _failed_verify(state, failures, train)
        else:
            state.verified = True
            _record(train, state.world.name, unrecorded)
            if update is not None:
                train.verified_now[state.world.name] = update


def _gate_pending(wave: WaveState, probe: Probe, train: Train,
                  pools_verified: Mapping[str, Mapping[str, PoolVerified]], now: float, may_move: bool) -> None:
    """The current wave's stacks that would go up, judged by their own waves (promotion_train/waves.py); a wave
    complete with no passing verify on record is verified now (while the train may move) and recorded."""
    for state in wave.stacks:
        world = state.world
        if state.status != StackStatus.PENDING or world.update is None or world.spec is None or world.view is None:
            continue  # a stack never deployed: policy waves-in-order judges what its first deployment releases
        records = {**pools_verified.get(world.name, {}), **train.pools_verified_now.get(world.name, {})}
        judged = stack_waves.gate(world.name, world.spec, world.view.pools, records, now)
        if judged.through is not None and may_move:
            failures = probe.verify(world.name, judged.through)
            if failures:
                _failed_verify(state, failures, train)
            elif failures is not None:
                verify = "smoke" if wave.wave.waitFor.verify == "smoke" else "none"
                _record(train, world.name, _new_records(state, pools_verified, now, judged.through, verify))
                records = {**records, **train.pools_verified_now.get(world.name, {})}
                judged = stack_waves.gate(world.name, world.spec, world.view.pools, records, now)
        state.gate = judged.refusals


def _waits(wave: WaveState, probe: Probe, now: float) -> list[str]:
    """What the wave, its stacks done and verified, still waits for; empty when nothing."""
    wait = wave.wave.waitFor
    missing: list[str] = []
    if wait.attestation:
        for state in wave.stacks:
            found = probe.soak(state.world.name)
            if found.attested is None:
                missing.append(f"the attestation of {state.world.name}'s driver: {found.reason} (soak.yml proposes "
                               "it in a pull request; its merge lets the next wave move)")
    if wait.soakHours > 0:
        finished = [probe.soak(s.world.name).finished for s in wave.stacks]
        if any(f is None for f in finished):
            missing.append(f"a soak of {wait.soakHours:g} h, which starts when the wave's last upgraded node "
                           "finished its upgrade (some have not)")
        else:
            last = max(f for f in finished if f is not None)
            soaked = (now - last) / 3600
            if soaked < wait.soakHours:
                missing.append(f"a soak of {wait.soakHours:g} h: {soaked:.1f} h so far, until "
                               f"{_at(last + wait.soakHours * 3600)}")
    return missing


def _committed(everyone: Sequence[StackState]) -> tuple[set[str], int]:
    """The clusters with a rollout in flight and the most GPUs those rollouts may take out at once."""
    flying = [s for s in everyone if s.in_flight]
    return ({s.world.cluster for s in flying},
            sum(worst_gpus_unavailable(s.world.spec) for s in flying if s.world.spec is not None))


def _choose_ups(fleet: FleetFile, wave: WaveState, train: Train, everyone: Sequence[StackState]) -> None:
    in_wave = sum(s.in_flight for s in wave.stacks)
    slots = wave.wave.maxConcurrent - in_wave
    clusters, gpus = _committed(everyone)
    limits = fleet.limits
    for state in wave.stacks:
        name = state.world.name
        if state.status != StackStatus.PENDING:
            continue
        assert state.world.spec is not None
        if state.gate:  # its own previous wave is not done: the change waits (promotion_train/waves.py)
            train.blocked += state.gate
            continue
        if state.in_flight:  # still rolling: its slot, its cluster and its GPUs are counted already
            train.ups.append(name)
            continue
        if slots <= 0:
            train.blocked.append(f"{name} waits for a slot: wave {wave.wave.name} lets {wave.wave.maxConcurrent} "
                                 f"stack(s) move at once, and {in_wave + len(train.ups)} move")
            continue
        cluster = state.world.cluster
        if (limits.maxClustersInFlight is not None and cluster not in clusters
                and len(clusters) >= limits.maxClustersInFlight):
            train.blocked.append(f"{name} waits: {len(clusters)} cluster(s) have a rollout in flight "
                                 f"({', '.join(sorted(clusters))}), limits.maxClustersInFlight is "
                                 f"{limits.maxClustersInFlight}")
            continue
        worst = worst_gpus_unavailable(state.world.spec)
        if limits.maxGpusUnavailable is not None and gpus + worst > limits.maxGpusUnavailable:
            alone = worst > limits.maxGpusUnavailable
            train.blocked.append(f"{name} waits: its rollout may take {worst} GPU(s) out at once, "
                                 + (f"more than limits.maxGpusUnavailable ({limits.maxGpusUnavailable}) alone: lower "
                                    "its upgrade parallelism or raise the limit" if alone else
                                    f"and the stacks in flight may take {gpus}; limits.maxGpusUnavailable is "
                                    f"{limits.maxGpusUnavailable}"))
            continue
        train.ups.append(name)
        slots -= 1
        clusters.add(cluster)
        gpus += worst
    train.gpus_committed = gpus
    train.clusters_in_flight = sorted(clusters)


def _walk(train: Train, may_move: bool, verified: Mapping[str, int], probe: Probe, now: float,
          halted_waves: Mapping[str, str], vouched_waves: Collection[str],
          pools_verified: Mapping[str, Mapping[str, PoolVerified]]) -> None:
    """The waves in order: done ones passed, the first that is not done (or halted) made the current one."""
    for index, wave in enumerate(train.waves):
        if wave.wave.name in halted_waves:
            wave.status, train.current = WaveStatus.HALTED, index
            train.blocked.append(f"wave {wave.wave.name} is halted ({halted_waves[wave.wave.name]}): it and the "
                                 "waves after it stay where they are until `gpu-rollout fleet resume`")
            return
        unread = [s.world.name for s in wave.stacks if s.status == StackStatus.UNREADABLE]
        if unread and wave.wave.name in vouched_waves:
            wave.status = WaveStatus.DONE
            for state in wave.stacks:
                state.vouched = state.status == StackStatus.UNREADABLE
            train.vouched.append(f"wave {wave.wave.name}: done as the approved plan read it; this run could not "
                                 f"read {', '.join(unread)}")
            continue
        if may_move:
            _verify_wave(wave, verified, probe, train, pools_verified, now)
        else:  # nothing moves: no model is asked; what verify passed on before still counts
            for state in wave.stacks:
                state.verified = state.status == StackStatus.COMPLETE and (
                    wave.wave.waitFor.verify == "none" or verified.get(state.world.name) == state.world.update)
        if {s.status for s in wave.stacks} != {StackStatus.COMPLETE} or not all(s.verified for s in wave.stacks):
            wave.status = WaveStatus.CURRENT
            train.current = index
            _gate_pending(wave, probe, train, pools_verified, now, may_move)
            return
        missing = _waits(wave, probe, now)
        if missing:
            wave.status, wave.waiting = WaveStatus.WAITING, missing
            train.current = index
            train.blocked += [f"wave {wave.wave.name} waits for {what}" for what in missing]
            return
        wave.status = WaveStatus.DONE


def assess(fleet: FleetFile, worlds: Mapping[str, StackWorld], probe: Probe, now: float, *,
           halted: bool = False, verified: Mapping[str, int] | None = None,
           halted_waves: Mapping[str, str] | None = None, vouched_waves: Collection[str] = (),
           pools_verified: Mapping[str, Mapping[str, PoolVerified]] | None = None) -> Train:
    """The train as the world shows it, and its next safe step (``ups``, or ``halt``). ``halted``: a halt is
    recorded already (nothing moves); ``halted_waves``: wave -> why a rollback halted it (it and the later waves stay
    where they are); ``verified``: stack -> the update whose verify passed (the Lease's record); ``vouched_waves``:
    waves an approved plan saw done, taken as done where this run could not read some of their stacks (an identity
    of one environment reads only its own clusters); ``pools_verified``: stack -> pool -> the target a passing verify
    saw it complete on, and when (the Lease's record: a stack's next wave waits on it, promotion_train/waves.py).
    ``probe`` runs `verify --smoke` only while the train may move (no halt)."""
    verified = verified or {}
    waves = [WaveState(w, [StackState(worlds[s], *worlds[s].status()) for s in w.stacks]) for w in fleet.waves]
    everyone = [s for w in waves for s in w.stacks]
    train = Train(waves)
    for state in everyone:
        for sign in _signs(state.world):
            train.signs.append(sign)
            if not fleet.halts(sign.kind):
                train.own_pauses.append(sign)
    unreadable = [s for s in everyone if s.status == StackStatus.UNREADABLE]
    may_move = not halted and not any(fleet.halts(s.kind) for s in train.signs)
    _walk(train, may_move, verified, probe, now, halted_waves or {}, vouched_waves, pools_verified or {})
    clusters, train.gpus_committed = _committed(everyone)
    train.clusters_in_flight = sorted(clusters)
    halting = [s for s in train.signs if fleet.halts(s.kind)]
    if halting:
        train.halt = halting[0]
        return train
    if halted:
        train.blocked.append("the train is halted: nothing moves until `gpu-rollout fleet resume`")
        return train
    # A cluster that could not be read stops what depends on it only: its own stacks (and its wave, which cannot
    # be done); every other cluster goes on.
    train.blocked += [f"{s.world.name}: {s.reason}; it does not move"
                      + (", and counts as in flight" if s.in_flight else "") for s in unreadable if not s.vouched]
    if train.current is None or waves[train.current].status == WaveStatus.HALTED:
        return train
    wave = waves[train.current]
    for state in wave.stacks:
        if state.status in (StackStatus.BLOCKED, StackStatus.ROLLED_BACK, StackStatus.DESTROYED, StackStatus.WINDOW):
            train.blocked.append(f"{state.world.name} ({state.status.value}): {state.reason}")
    if wave.status == WaveStatus.CURRENT:
        _choose_ups(fleet, wave, train, everyone)
    return train


# ---------------------------------------------------------------- building the worlds from what was read


def stack_world(stack: StackFile, spec: FleetSpec | None, deployed: deploy_plan.Deployed, head: str,
                git: deploy_plan.Git, now: datetime, locked: bool = False) -> StackWorld:
    """The backend's side of a stack: deploy_plan's decision (its window judged at ``now``) and its last update."""
    decision = deploy_plan.within_window(deploy_plan.decide(stack, deployed, head, git), now)
    updates = [u for u in deployed.history or [] if u.kind in ("update", "destroy")]
    return StackWorld(stack, spec, decision, updates[0].version if updates else None, locked,
                      deployed_driver=_deployed_driver(updates))


def _deployed_driver(updates: Sequence[Update]) -> str | None:
    """driver.version of the newest succeeded update's config (read leniently: a key the model now refuses is
    absent, a secret is never read); None where there is none."""
    good = next((u for u in updates if u.good), None)
    if good is None:
        return None
    version = lenient_spec.fleet(good.config).driver.version  # a leaf: the value as the config holds it
    return version if isinstance(version, str) else None


def needs_cluster(world: StackWorld) -> bool:
    """Is there anything of the stack in its cluster to read: it loads, and it was deployed and not destroyed."""
    return (world.spec is not None and world.update is not None
            and world.decision.state != deploy_plan.DESTROYED)


def pause_reason(sign: Sign) -> str:
    return f"fleet halted: {sign.message} (stack {sign.stack})"

