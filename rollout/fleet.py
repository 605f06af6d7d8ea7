"""`gpu-rollout fleet status|advance|halt|resume`: the promotion train across the fleet's stacks (docs/fleet.md).

Thin: each verb loads the fleet file and the stack files (:func:`load_project`), reads the world (each stack's
record in the backend through the Automation API, :class:`AutomationBackend`; each cluster through the live checks,
:mod:`checks.fleet`), hands it to :mod:`promotion_train.train`, which decides, and acts on what it decided: `up` through the
Automation API (:mod:`rollout.engine`, one worker process per stack, so a wave's stacks go up at once), `pause` and
`resume` (:mod:`checks.pause`), the train's Lease (:mod:`checks.lease`). Nothing is kept on this machine between
runs: a killed `advance` is followed by one that reads the same world.

The halt is recorded in every cluster of the fleet it can reach (:func:`halt_records`: a Lease of the train's
name in each, the lease stack's being the lock too), so the brake works with any one cluster down, the Lease's
included; `advance` treats a record in any cluster as a halt, and `resume` clears every record it reaches and names
those it could not. A cluster that cannot be read stops only the stacks on it: everything else is read, halted on
and moved, and the step fails after doing what it could, naming the cluster and why.

Exit codes: 0 the step was taken, or there was nothing to do yet; 1 the train is halted (now or before), an `up`
failed, another `advance` holds the lease, or a cluster or the backend could not be read; 2 invalid input (the
fleet file, a stack file, a flag).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from checks import fleet as live
from checks.attested import read_attested
from checks import kube as k
from checks.errors import ClusterError
from checks.lease import HaltRecord, LeaseHeld, LeaseState, TrainLease, micro_time
from checks.nodestate import NoNodesError
from checks.pause import ChangeInterrupted, ImageOwnedDriver, PauseReport, pause, resume
from checks.soak import readiness
from git_revisions.repository import Repository
from pulumi_backend import backend as backends
from promotion_train import deploy_plan, train, waves
from rollout import context, documents, fleet_announce, schemas
from rollout import preflight as preflight_verb
from rollout.console import say, stdout
from rollout.engine import UpResult
from refusals.exits import Exit
from rollout.fleet_project import FleetProject
from promotion_train.stacks import StackFile, prod_stacks_of
from engine_contracts import attestation
from fleetspec.base import Stage
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from fleetspec.model import FleetSpec
from refusals.errors import Declined, InvalidInput

UP_MESSAGE = "gpu-rollout fleet advance: wave {wave}"


# ---------------------------------------------------------------- the world's two other halves


class Backend(Protocol):
    """The stacks' records, and `up`: the Pulumi backend through the Automation API (tests hand in their own)."""

    def deployed(self, stacks: list[StackFile]) -> dict[str, deploy_plan.Deployed]: ...

    def locked(self, stack: str) -> bool: ...

    def up(self, requests: list[UpRequest]) -> list[UpResult]: ...


@dataclass(frozen=True)
class UpRequest:
    stack: str
    pack: str
    pack_config: str | None
    message: str


class AutomationBackend:
    """The real one: `pulumi stack history`, the stack file's config and the file backend's locks through the
    Automation API (:mod:`pulumi_backend.backend`), several stacks at once; `up` in one worker process per stack."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.workspace = backends.workspace(project_dir)
        self._locked: dict[str, bool] = {}

    def deployed(self, stacks: list[StackFile]) -> dict[str, deploy_plan.Deployed]:
        def one(entry: StackFile) -> deploy_plan.Deployed:
            stack = backends.select(self.workspace, entry.name) if entry.problem is None else None
            if stack is None:
                return deploy_plan.Deployed(None)
            self._locked[entry.name] = bool(backends.lock_files(self.workspace, entry.name))
            return deploy_plan.Deployed(backends.history(stack), backends.stack_file_config(stack))

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(stacks)))) as pool:
            return dict(zip([s.name for s in stacks], pool.map(one, stacks), strict=True))

    def locked(self, stack: str) -> bool:
        """Read with the stack's records (:meth:`deployed`): the lock of a stack the backend does not have is none."""
        return self._locked.get(stack, False)

    def up(self, requests: list[UpRequest]) -> list[UpResult]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from rollout.engine import up_in_process

        if not requests:
            return []
        # spawn: a fresh interpreter per worker, so no program state is shared; a worker outlives a killed parent
        # until its `up` is done.
        with ProcessPoolExecutor(max_workers=len(requests), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(up_in_process, str(self.project_dir), r.stack, r.pack, r.pack_config, r.message)
                       for r in requests]
            return [f.result() for f in futures]


class Clusters:
    """How each stack's cluster is reached: ``DIR/<stack>`` of ``--kubeconfig-dir`` where it exists (a CI job
    writes one per stack), else what the stack declares (``cluster.existing``), else ``$KUBECONFIG``; the context
    the stack declares, else the file's current one."""

    def __init__(self, kubeconfig_dir: Path | None = None, settings: k.ClientSettings | None = None) -> None:
        self.kubeconfig_dir = kubeconfig_dir
        self.settings = settings

    def kubeconfig_of(self, stack: str) -> str | None:
        if self.kubeconfig_dir is None:
            return None
        for name in (stack, f"{stack}.yaml"):
            if (self.kubeconfig_dir / name).is_file():
                return str(self.kubeconfig_dir / name)
        return None

    def connect(self, stack: str, spec: FleetSpec) -> k.Kube:
        cluster = context.resolve_cluster(spec, self.kubeconfig_of(stack), None)
        return k.connect(cluster.kubeconfig, cluster.context, self.settings)


# ---------------------------------------------------------------- reading the world


def read_worlds(project: FleetProject, backend: Backend, clusters: Clusters, now: datetime,
                head: str | None = None, guards: Mapping[str, Mapping[str, Any]] | None = None
                ) -> tuple[dict[str, train.StackWorld], str]:
    """Each stack's record (deploy_plan's decision at main's head, its window judged at ``now``) and, for a stack
    deployed, its cluster now (read concurrently), with what its guard saw (``guards``: stack -> its status on the
    cluster's fleet Lease; :func:`checks.fleet.with_guard`)."""
    repo = Repository(project.project_dir)
    commit = repo.commit(head or "HEAD", "--head")
    files = list(project.stacks.values())
    deployed = backend.deployed(files)
    worlds = {s.name: train.stack_world(s, project.specs[s.name], deployed.get(s.name, deploy_plan.Deployed(None)),
                                        commit, repo, now, backend.locked(s.name)) for s in files}
    targets = [live.Target(name, project.specs[name], _connector(clusters, name, project.specs[name]))
               for name, world in worlds.items() if train.needs_cluster(world)]
    for name, seen in live.observe_all(targets).items():
        worlds[name] = (replace(worlds[name], view_error=str(seen)) if isinstance(seen, ClusterError)
                        else replace(worlds[name], view=live.with_guard(seen, (guards or {}).get(name),
                                                                        now.timestamp())))
    return worlds, commit


def _connector(clusters: Clusters, stack: str, spec: FleetSpec) -> Callable[[], k.Kube]:
    return lambda: clusters.connect(stack, spec)


class LiveProbe:
    """`verify --smoke` and the soak read, against the stacks' clusters, each at most once per run."""

    def __init__(self, project: FleetProject, clusters: Clusters, now: float) -> None:
        self.project, self.clusters, self.now = project, clusters, now
        self._soaks: dict[str, train.Soak] = {}

    def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
        spec = self.project.specs[stack]
        if through_wave is not None:
            spec = waves.spec_through(spec, through_wave)
        try:
            failed = live.smoke_verify(self.clusters.connect(stack, spec), spec)
        except NoNodesError as error:
            return [f"no upgraded node to verify: {error}"]
        except ClusterError as error:
            say(f"{stack}: verify could not read its cluster: {error}")
            return None
        return [f"{r.id} {r.subject}: {r.message}" for r in failed]

    def soak(self, stack: str) -> train.Soak:
        if stack not in self._soaks:
            self._soaks[stack] = self._soak(stack)
        return self._soaks[stack]

    def _soak(self, stack: str) -> train.Soak:
        spec = self.project.specs[stack]
        try:
            facts = live.soak_of(self.clusters.connect(stack, spec), spec)
        except ClusterError as error:
            return train.Soak(None, None, f"its cluster could not be read: {error}")
        if spec.stage != Stage.CANARY:
            return train.Soak(facts.start)
        prods = {s.name: s.min_soak_hours for s in prod_stacks_of(list(self.project.stacks.values()), stack)
                 if s.min_soak_hours is not None}
        answer = readiness(stack, facts, prods, self.project.project_dir / attestation.ATTESTATION_DIR, self.now)
        ready_at = schemas.SoakDocument.of(answer).readyAt
        when = f" (ready to attest at {ready_at})" if answer.ready_at and not answer.ready else ""
        return train.Soak(facts.start, answer.attested, answer.reason + when)


# ---------------------------------------------------------------- reporting


def _holder() -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def _lease_of(project: FleetProject, clusters: Clusters, holder: str = "") -> TrainLease:
    stack = project.fleet.lease_stack
    return TrainLease(clusters.connect(stack, project.specs[stack]), LEASE_NAMESPACE, LEASE_NAME,
                      holder or _holder(), project.fleet.lease.durationSeconds)


def fleet_clusters(project: FleetProject) -> dict[str, list[str]]:
    """Each cluster of the fleet (``cluster.name``) and its stacks, in wave order; the lease stack's cluster first."""
    found: dict[str, list[str]] = {}
    lease = project.specs[project.fleet.lease_stack].cluster.name
    found[lease] = []
    for stack in project.fleet.stacks:
        found.setdefault(project.specs[stack].cluster.name, []).append(stack)
    return found


@dataclass
class ClusterRecord:
    """One cluster's halt record as read or written: ``state`` (None: no Lease there), or why it could not be."""

    cluster: str
    stacks: list[str]
    state: LeaseState | None = None
    error: str | None = None
    changed: bool = False  # this run wrote (halt) or removed (resume) the record

    def document(self) -> schemas.HaltRecordDocument:
        state = self.state
        return schemas.HaltRecordDocument(
            cluster=self.cluster, stacks=self.stacks, error=self.error, changed=self.changed,
            halted=state.halt.as_json() if state is not None and state.halt is not None else None,
            wavesHalted=[r.as_json() for r in state.wave_halts.values()] if state is not None else [])


def _record_lease(project: FleetProject, clusters: Clusters, stacks: list[str], holder: str) -> TrainLease:
    """The Lease holding the halt record in the cluster of ``stacks``, reached through the first stack that
    connects (a stack's own kubeconfig may be missing while a sibling's works)."""
    errors: list[str] = []
    for stack in stacks:
        try:
            kube = clusters.connect(stack, project.specs[stack])
        except ClusterError as error:
            errors.append(f"{stack}: {error}")
            continue
        return TrainLease(kube, LEASE_NAMESPACE, LEASE_NAME, holder, project.fleet.lease.durationSeconds)
    raise ClusterError("; ".join(errors) or "no stack reaches it")


def halt_records(project: FleetProject, clusters: Clusters,
                 change: Callable[[TrainLease], tuple[LeaseState | None, bool]] | None = None,
                 holder: str = "", only: Collection[str] | None = None) -> list[ClusterRecord]:
    """Every cluster's halt record, concurrently: read, or changed by ``change`` (returning the state after and
    whether it wrote). A cluster that cannot be reached is reported with why, never raised."""
    who = holder or _holder()

    def one(item: tuple[str, list[str]]) -> ClusterRecord:
        cluster, stacks = item
        try:
            lease = _record_lease(project, clusters, stacks, who)
            if change is None:
                return ClusterRecord(cluster, stacks, lease.read())
            state, changed = change(lease)
            return ClusterRecord(cluster, stacks, state, changed=changed)
        except ClusterError as error:
            return ClusterRecord(cluster, stacks, error=str(error))

    items = [(c, s) for c, s in fleet_clusters(project).items() if only is None or c in only]
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(items)))) as pool:
        return list(pool.map(one, items))


@dataclass(frozen=True)
class Halts:
    """What every reachable cluster records: the train's halt (the first found), each wave's, the clusters whose
    record could not be read."""

    halt: HaltRecord | None
    waves: dict[str, HaltRecord]
    unread: dict[str, str]  # cluster -> why
    guards: dict[str, dict[str, Any]] = field(default_factory=dict)  # stack -> what its guard last wrote there

    @classmethod
    def of(cls, records: list[ClusterRecord]) -> Halts:
        halts = [r.state.halt for r in records if r.state is not None and r.state.halt is not None]
        waves: dict[str, HaltRecord] = {}
        for record in records:
            for wave, found in (record.state.wave_halts if record.state is not None else {}).items():
                waves.setdefault(wave, found)
        guards = {stack: status for r in records if r.state is not None for stack, status in r.state.guards.items()
                  if stack in r.stacks}
        return cls(min(halts, key=lambda h: h.at) if halts else None, waves,
                   {r.cluster: r.error for r in records if r.error is not None}, guards)

    def halted_waves(self, project: FleetProject) -> dict[str, str]:
        """wave -> why; a record naming no wave of the fleet file halts the first wave (whatever it meant)."""
        names = [w.name for w in project.fleet.waves]
        out: dict[str, str] = {}
        for wave, record in self.waves.items():
            out.setdefault(wave if wave in names else names[0], record.cause)
        return out

    def say_unread(self) -> None:
        for cluster, why in self.unread.items():
            say(f"cluster {cluster}: its halt record could not be read ({why}); a halt recorded only there is not "
                "seen by this run")


def _status(found: train.Train, lease: LeaseState | None, now: float, project: FleetProject,
            halts: Halts | None = None) -> dict[str, Any]:
    """The fields of `fleet status`'s document, which `fleet advance`'s begins with."""
    current = found.waves[found.current].wave.name if found.current is not None else None
    limits = project.fleet.limits
    halt = halts.halt if halts is not None else (lease.halt if lease else None)
    return {
        "current": current, "complete": found.complete, "next": found.next_step(),
        "halt": found.halt.as_json() if found.halt else None,
        "halted": halt.as_json() if halt else None,
        "wavesHalted": [r.as_json() for r in halts.waves.values()] if halts is not None else [],
        "unread": [f"cluster {c}: {why}" for c, why in halts.unread.items()] if halts is not None else [],
        "lease": lease.as_json(now) if lease else None,
        "blocked": found.blocked, "signs": [s.as_json() for s in found.signs],
        "limits": {"maxGpusUnavailable": limits.maxGpusUnavailable, "gpusCommitted": found.gpus_committed,
                   "maxClustersInFlight": limits.maxClustersInFlight,
                   "clustersInFlight": found.clusters_in_flight},
        "waves": [w.as_json() for w in found.waves],
    }


def document(found: train.Train, lease: LeaseState | None, now: float,
             project: FleetProject, halts: Halts | None = None) -> schemas.FleetStatusDocument:
    return schemas.FleetStatusDocument(**_status(found, lease, now, project, halts))


def advance_document(found: train.Train, lease: LeaseState | None, now: float, project: FleetProject, *,
                     applies: bool, ups: list[schemas.Up], withheld: list[str],
                     halts: Halts | None = None) -> schemas.FleetAdvanceDocument:
    """`fleet advance`'s: with --yes (``applies``) its pauses too, empty until the step pauses a stack."""
    status = _status(found, lease, now, project, halts)
    if not applies:
        return schemas.FleetAdvanceDocument(**status, applies=False, ups=ups, withheld=withheld)
    return schemas.FleetAdvanceDocument(**status, applies=True, ups=ups, withheld=withheld, paused=[], ownPauses=[])


def render(found: train.Train, lease: LeaseState | None, now: float, halts: Halts | None = None) -> None:
    console = stdout(highlight=False)

    def line(text: str) -> None:
        console.print(text, markup=False, soft_wrap=True)

    halt = halts.halt if halts is not None else (lease.halt if lease else None)
    if halt is not None:
        line(f"HALTED since {micro_time(halt.at)}: {halt.cause}")
    for record in (halts.waves.values() if halts is not None else []):
        line(f"wave {record.wave} HALTED since {micro_time(record.at)}: {record.cause}")
    for cluster, why in (halts.unread.items() if halts is not None else []):
        line(f"cluster {cluster}: not read: {why}")
    for wave in found.waves:
        line(f"wave {wave.wave.name}: {wave.status.value}")
        for state in wave.stacks:
            world = state.world
            driver = f"{world.spec.driver.previousVersion} -> {world.spec.driver.version}" if world.spec else "?"
            seen = world.view
            pools = (f"; {seen.done}/{seen.nodes} node(s) done, {seen.paused} paused, {seen.gpus_unavailable} GPU(s) "
                     "out" if seen else "")
            verified = "; verified" if state.verified else ""
            line(f"  {world.name} ({world.cluster}, {driver}): {state.status.value}: {state.reason}{pools}{verified}")
            if seen is not None and seen.guard is not None:
                line(f"    guard: {live.guard_summary(seen.guard)}")
        for waiting in wave.waiting:
            line(f"  waits for {waiting}")
    for sign in found.signs:
        line(f"sign: {sign.kind} in {sign.stack}: {sign.message}")
    for note in found.vouched:
        line(f"note: {note}")
    line(f"next: {found.next_step()}")
    if lease is not None and not lease.free(now):
        line(f"lease: held by {lease.holder} until {micro_time(lease.expires() or now)}")


# ---------------------------------------------------------------- status


def status(project: FleetProject, backend: Backend, clusters: Clusters, as_json: bool,
           now: Callable[[], float] = time.time) -> Exit:
    """Where the train is, read from the world; changes nothing (verify is not run: what it passed is recorded)."""
    moment = now()
    records = halt_records(project, clusters)
    halts, lease = Halts.of(records), _lease_state(project, records)
    worlds, _ = read_worlds(project, backend, clusters, datetime.fromtimestamp(moment, UTC), guards=halts.guards)
    found = train.assess(project.fleet, worlds, _RecordedOnly(LiveProbe(project, clusters, moment)), moment,
                         halted=halts.halt is not None, halted_waves=halts.halted_waves(project),
                         verified=lease.verified if lease else {},
                         pools_verified=lease.pools_verified if lease else {})
    if as_json:
        documents.write(document(found, lease, moment, project, halts))
    else:
        render(found, lease, moment, halts)
    return Exit.OK


def _lease_state(project: FleetProject, records: list[ClusterRecord]) -> LeaseState | None:
    """The train's Lease (the lease stack's cluster's record), as read with the halt records."""
    cluster = project.specs[project.fleet.lease_stack].cluster.name
    return next((r.state for r in records if r.cluster == cluster), None)


class _RecordedOnly:
    """status asks no model: a stack counts as verified only where the Lease records it (the soak is read)."""

    def __init__(self, probe: LiveProbe) -> None:
        self.probe = probe

    def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
        return None

    def soak(self, stack: str) -> train.Soak:
        return self.probe.soak(stack)


# ---------------------------------------------------------------- pausing and resuming every stack


@dataclass
class Paused:
    stack: str
    report: PauseReport | None = None
    error: str | None = None
    image_owned: str | None = None  # what is in flight on a stack that cannot be paused

    def document(self) -> schemas.StackPause | schemas.StackPauseError:
        if self.report is None:
            return schemas.StackPauseError(stack=self.stack, error=self.error, imageOwned=self.image_owned)
        return schemas.StackPause.of(self.stack, self.report, self.error, self.image_owned)


def _each(project: FleetProject, clusters: Clusters, names: list[str], verb: str, reason: str,
          views: Mapping[str, Any] | None = None) -> list[Paused]:
    """`pause` (or `resume`) of each stack, concurrently; what could not be done is said, never raised."""

    def one(name: str) -> Paused:
        spec = project.specs[name]
        try:
            kube = clusters.connect(name, spec)
            report = pause(kube, spec, name, reason) if verb == "pause" else resume(kube, spec, name)
            return Paused(name, report)
        except ImageOwnedDriver:
            seen = (views or {}).get(name)
            flight = (f"{seen.done} of {seen.nodes} node(s) done" if seen is not None else "not read")
            return Paused(name, image_owned=f"the node image owns the driver: no `up` of it follows; in flight: "
                          f"{flight}")
        except ChangeInterrupted as error:
            return Paused(name, error.report, str(error))
        except ClusterError as error:
            return Paused(name, error=str(error))

    if not names:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        return list(pool.map(one, names))


def _say_paused(done: list[Paused], verb: str) -> None:
    for item in done:
        if item.error:
            say(f"{item.stack}: {verb} FAILED: {item.error}")
        elif item.image_owned:
            say(f"{item.stack}: {item.image_owned}")
        elif item.report is not None:
            changed = len(item.report.changed) + len(item.report.held)
            say(f"{item.stack}: {verb}d {changed} node(s)" + (f", {len(item.report.unchanged)} already paused"
                                                              if item.report.unchanged else ""))


def record_halt_everywhere(project: FleetProject, clusters: Clusters, cause: str, wave: str | None = None,
                           holder: str = "") -> list[ClusterRecord]:
    """The halt recorded in every cluster the run reaches, at once, waiting for no Lease (an emergency does not);
    a record already there is kept (a second halt changes nothing)."""

    def recorded(lease: TrainLease) -> tuple[LeaseState | None, bool]:
        before = lease.read()
        had = before is not None and (before.halt is not None if wave is None else wave in before.wave_halts)
        return lease.record_halt(cause, wave), not had

    return halt_records(project, clusters, recorded, holder)


def _say_records(records: list[ClusterRecord], verb: str) -> None:
    for record in records:
        if record.error is not None:
            say(f"cluster {record.cluster}: its halt record could not be {verb} ({record.error}); stacks there: "
                f"{', '.join(record.stacks) or 'none'}")


def halt(project: FleetProject, clusters: Clusters, reason: str, as_json: bool, wave_of: str | None = None) -> Exit:
    """Record the train as halted in every cluster it reaches and pause every stack of the fleet, at once (an
    emergency waits for no lease, and no one cluster stops it). ``wave_of``: a rollback's halt of that stack's
    wave: the halt recorded for the wave, and the wave's other stacks paused (the stack itself is being rolled
    back: a skip label would hold its own way back)."""
    wave = project.fleet.wave_of(wave_of).name if wave_of is not None else None
    cause = (f"rollback of stack {wave_of}: {reason}" if wave_of is not None else f"halted by hand: {reason}")
    names = ([s for s in project.fleet.wave_of(wave_of).stacks if s != wave_of] if wave_of is not None
             else project.fleet.stacks)
    with ThreadPoolExecutor(max_workers=2) as pool:
        recording = pool.submit(record_halt_everywhere, project, clusters, cause, wave)
        pausing = pool.submit(_each, project, clusters, names, "pause", f"fleet halted: {cause}")
        records, done = recording.result(), pausing.result()
    found = Halts.of(records)
    first = found.waves.get(wave) if wave is not None else found.halt
    if as_json:
        documents.write(schemas.FleetHaltDocument(halted=schemas.HaltRecord.model_validate(first.as_json()) if first else None,
                                                  records=[r.document() for r in records],
                                                  paused=[d.document() for d in done]))
    _say_paused(done, "pause")
    _say_records(records, "written")
    recorded = [r.cluster for r in records if r.error is None]
    scope = f"wave {wave} halted" if wave is not None else "fleet halted"
    stays = "it and the waves after it stay where they are" if wave is not None else "nothing moves"
    if recorded:
        say(f"{scope}: {first.cause if first else cause}; recorded in {', '.join(recorded)}; {stays} until "
            "`gpu-rollout fleet resume`")
    else:
        say(f"{scope} NOWHERE: no cluster's record could be written; the stacks above were paused where reachable")
    return Exit.failed_if(any(d.error for d in done) or any(r.error for r in records))


def resume_all(project: FleetProject, clusters: Clusters, as_json: bool) -> Exit:
    """Resume every stack of the fleet (only the pauses of `pause`, never someone else's skip label), then remove
    the halt record of every cluster whose stacks all resumed; names each record it could not clear. A remaining
    record keeps the train halted (`advance` treats it as a halt)."""
    done = _each(project, clusters, project.fleet.stacks, "resume", "")
    failed = {d.stack for d in done if d.error}

    removed: list[HaltRecord] = []

    def cleared(lease: TrainLease) -> tuple[LeaseState | None, bool]:
        gone = lease.clear_halt()
        removed.extend(gone)
        return lease.read(), bool(gone)

    every = fleet_clusters(project)
    held_back = [c for c, stacks in every.items() if failed & set(stacks)]
    records = halt_records(project, clusters, cleared, only=[c for c in every if c not in held_back])
    for record in halt_records(project, clusters, only=held_back):  # kept: why, in the cluster's own words if down
        why = failed & set(record.stacks)
        records.append(ClusterRecord(record.cluster, record.stacks, record.state, record.error or (
            f"not cleared: {', '.join(sorted(why))} could not be resumed")))
    first = min(removed, key=lambda r: (r.wave is not None, r.at)) if removed else None
    if as_json:
        documents.write(schemas.FleetResumeDocument(cleared=first.as_json() if first else None,
                                                    records=[r.document() for r in records],
                                                    resumed=[d.document() for d in done]))
    _say_paused(done, "resume")
    _say_records(records, "cleared")
    left = [r.cluster for r in records if r.error is not None]
    if left:
        say(f"the train stays halted: the halt records of {', '.join(left)} remain; resume the stacks above (or "
            "reach those clusters), then `gpu-rollout fleet resume` again")
    else:
        say("the train may move again" + (f" (it was halted: {first.cause})" if first else " (it was not halted)"))
    return Exit.failed_if(bool(failed) or bool(left))


# ---------------------------------------------------------------- advance


@dataclass(frozen=True)
class Packs:
    """Which policy pack each `up` enforces. ``root``: the protected packs, ``ROOT/<packRef>/pack`` and its
    ``ROOT/<packRef>/<stage>.json``, one per commit deploy-plan names (the deploy workflow assembles them); else
    ``pack`` (default: the project's ``policy/``) with the project's ``policy/<stage>.json``."""

    root: Path | None = None
    pack: Path | None = None

    def for_stack(self, project: FleetProject, world: train.StackWorld) -> tuple[str, str | None] | str:
        """(pack, config) for the stack's `up`, or why it has none."""
        stage = (world.file.stage or Stage.PROD).value
        if self.root is not None:
            ref = world.decision.pack_ref
            folder = self.root / (ref or "?")
            if ref is None or not (folder / "pack").is_dir():
                return f"no pack of its protected base {ref or '(none)'} in {self.root}"
            config = folder / f"{stage}.json"
            return str(folder / "pack"), str(config) if config.is_file() else None
        pack = self.pack or project.project_dir / "policy"
        config = project.project_dir / "policy" / f"{stage}.json"
        return str(pack), str(config) if config.is_file() else None


class Renewer:
    """Renews the lease every third of its duration while `advance` works; notes when it is lost, and a halt
    recorded on it meanwhile (the train's, or a wave's it did not know of when it started)."""

    def __init__(self, lease: TrainLease, known_waves: Collection[str] = ()) -> None:
        self.lease = lease
        self.known_waves = set(known_waves)
        self.lost: str | None = None
        self.halted: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(max(1.0, self.lease.duration / 3)):
            self.check()

    def check(self) -> None:
        try:
            state = self.lease.renew()
        except LeaseHeld as error:
            self.lost = str(error)
            return
        except ClusterError as error:
            say(f"note: renewing the train's lease failed (tried again later): {error}")
            return
        if state.halt is not None:
            self.halted = state.halt.cause
        new = [r for wave, r in state.wave_halts.items() if wave not in self.known_waves]
        if new:
            self.halted = new[0].cause


def hold(project: FleetProject, clusters: Clusters, command: list[str], wait: float,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         run: Callable[[list[str]], int] | None = None) -> Exit:
    """Run ``command`` holding the train's Lease, so it never runs beside a `fleet advance` (a rollback's `up`:
    rollback and deploy share one serialisation). Waits up to ``wait`` seconds for the Lease; a Lease whose cluster
    does not answer does not stop an emergency: the command runs, and that is said (the halt its wave records keeps
    the train off it)."""
    import subprocess

    def execute(argv: list[str]) -> int:
        return subprocess.run(argv, check=False).returncode  # noqa: S603 - the caller's own command line

    runner = run or execute
    deadline = clock() + wait
    try:
        lease = _lease_of(project, clusters)
        while True:
            try:
                lease.acquire()
                break
            except LeaseHeld as error:
                if clock() >= deadline:
                    raise Declined(f"fleet hold: the train's lease stayed held for {wait:g} s: {error}") from None
                say(f"waiting for the train's lease: {error}")
                sleep(min(10.0, max(0.0, deadline - clock())))
    except ClusterError as error:
        say(f"the train's lease could not be taken ({error}): running without it")
        return Exit.failed_if(runner(command) != 0)
    try:
        with Renewer(lease):
            return Exit.failed_if(runner(command) != 0)
    finally:
        try:
            lease.release()
        except ClusterError as error:
            say(f"note: the train's lease could not be released ({error}); it expires by itself")


# ---------------------------------------------------------------- the approval: bound to what was shown


def config_digest(project: FleetProject, stack: str) -> str:
    """The digest of the stack file an `up` would run (sha256 of its bytes), as the approval plan names it."""
    return "sha256:" + hashlib.sha256((project.project_dir / project.stacks[stack].file).read_bytes()).hexdigest()


def approval_plan(project: FleetProject, found: train.Train, worlds: Mapping[str, train.StackWorld],
                  withheld: list[str], commit: str) -> schemas.ApprovalPlan | None:
    """What a person approves for the withheld `up`s: each stack with its config digest and the pack commit its
    `up` enforces, the commit, and the waves this run saw done (an identity that cannot read them takes them so)."""
    if not withheld:
        return None
    return schemas.ApprovalPlan(
        commit=commit, doneWaves=[w.wave.name for w in found.waves if w.status == train.WaveStatus.DONE],
        ups=[schemas.ApprovedUp(stack=name, configDigest=config_digest(project, name),
                                packRef=worlds[name].decision.pack_ref) for name in withheld])


def read_expected(path: Path) -> schemas.ApprovalPlan:
    """The approved plan (`advance --expect`); InvalidInput naming the flag when it is not one."""
    try:
        return schemas.ApprovalPlan.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        raise InvalidInput(f"--expect: {path} is not an approval plan (the `approval` of `fleet advance --json`): "
                           f"{str(error).splitlines()[0]}") from None


def plan_differences(expected: schemas.ApprovalPlan, own: schemas.ApprovalPlan | None, commit: str) -> list[str]:
    """How this run's `up`s differ from the approved ones, one line each; empty: the same."""
    out: list[str] = []
    if expected.commit != commit:
        out.append(f"the approved plan was made at commit {expected.commit[:12]}, this run is at {commit[:12]}")
    mine = {u.stack: u for u in own.ups} if own is not None else {}
    theirs = {u.stack: u for u in expected.ups}
    for name in sorted(set(theirs) - set(mine)):
        out.append(f"{name}: approved, but this run would not bring it up now")
    for name in sorted(set(mine) - set(theirs)):
        out.append(f"{name}: this run would bring it up, but it was not approved")
    for name in sorted(set(mine) & set(theirs)):
        for key in ("configDigest", "packRef"):
            if getattr(mine[name], key) != getattr(theirs[name], key):
                out.append(f"{name}: its {key} is {getattr(mine[name], key)}, the approved plan's "
                           f"{getattr(theirs[name], key)}")
    return out


# ---------------------------------------------------------------- advance


def advance(project: FleetProject, backend: Backend, clusters: Clusters, *, yes: bool, packs: Packs,
            only_stage: Stage | None, as_json: bool, now: Callable[[], float] = time.time,
            expect: schemas.ApprovalPlan | None = None) -> Exit:
    """Take the train's next safe step and return: `up` the stacks of the current wave that may go, pause every
    stack the train moved on a bad sign, or do nothing yet. Without ``yes`` it says what it would do. ``expect``:
    the approved plan; the step's `up`s must be exactly it, else nothing goes up. With the Lease's cluster out of
    reach it still halts on a bad sign (an emergency needs no lock), and brings nothing up."""
    if not yes:
        return _dry_run(project, backend, clusters, only_stage, as_json, now, expect)
    try:
        lease = _lease_of(project, clusters)
        held = lease.acquire()
    except LeaseHeld as error:
        raise Declined(f"fleet advance refused: {error}") from None
    except ClusterError as error:
        say(f"the train's lease could not be taken: the cluster of stack {project.fleet.lease_stack} did not answer "
            f"({error}); this step halts on a bad sign but brings nothing up")
        return _step(project, backend, clusters, None, None, None, packs, only_stage, as_json, now, expect)
    try:
        records = halt_records(project, clusters)
        with Renewer(lease, Halts.of(records).waves) as renewer:
            return _step(project, backend, clusters, lease, held, renewer, packs, only_stage, as_json, now, expect,
                         records)
    finally:
        try:
            lease.release()
        except ClusterError as error:
            say(f"note: the train's lease could not be released ({error}); it expires by itself")


def _read(project: FleetProject, backend: Backend, clusters: Clusters, moment: float, lease: LeaseState | None,
          probe: train.Probe, expect: schemas.ApprovalPlan | None,
          records: list[ClusterRecord] | None = None
          ) -> tuple[train.Train, dict[str, train.StackWorld], str, Halts, list[ClusterRecord]]:
    records = records if records is not None else halt_records(project, clusters)
    halts = Halts.of(records)
    worlds, commit = read_worlds(project, backend, clusters, datetime.fromtimestamp(moment, UTC),
                                 guards=halts.guards)
    found = train.assess(project.fleet, worlds, probe, moment, halted=halts.halt is not None,
                         halted_waves=halts.halted_waves(project), verified=lease.verified if lease else {},
                         pools_verified=lease.pools_verified if lease else {},
                         vouched_waves=expect.doneWaves if expect is not None else ())
    halts.say_unread()
    return found, worlds, commit, halts, records


def _dry_run(project: FleetProject, backend: Backend, clusters: Clusters, only_stage: Stage | None, as_json: bool,
             now: Callable[[], float], expect: schemas.ApprovalPlan | None) -> Exit:
    moment = now()
    records = halt_records(project, clusters)
    lease = _lease_state(project, records)
    found, worlds, commit, halts, _ = _read(project, backend, clusters, moment, lease,
                                            LiveProbe(project, clusters, moment), expect, records)
    ups, withheld = _by_stage(project, found.ups, only_stage)
    if as_json:
        # The ups --yes would run, in the shape of the ones it ran (ok: null, not run yet).
        planned = [schemas.Up(stack=stack, ok=None, detail="run again with --yes to bring it up") for stack in ups]
        out = advance_document(found, lease, moment, project, applies=False, ups=planned, withheld=withheld,
                               halts=halts)
        out.approval = approval_plan(project, found, worlds, withheld, commit)
        documents.write(out)
    else:
        render(found, lease, moment, halts)
    say("nothing changed: run again with --yes to take this step")
    return Exit.OK


def _by_stage(project: FleetProject, ups: list[str], only_stage: Stage | None) -> tuple[list[str], list[str]]:
    if only_stage is None:
        return ups, []
    return ([s for s in ups if project.stacks[s].stage == only_stage],
            [s for s in ups if project.stacks[s].stage != only_stage])


def _step(project: FleetProject, backend: Backend, clusters: Clusters, lease: TrainLease | None,
          held: LeaseState | None, renewer: Renewer | None, packs: Packs, only_stage: Stage | None, as_json: bool,
          now: Callable[[], float], expect: schemas.ApprovalPlan | None,
          records: list[ClusterRecord] | None = None) -> Exit:
    moment = now()
    found, worlds, commit, halts, records = _read(
        project, backend, clusters, moment, held,
        LiveProbe(project, clusters, moment), expect, records)
    if lease is not None:
        lease.record_verified(found.verified_now)
        lease.record_pools_verified(found.pools_verified_now)
    out = advance_document(found, held, moment, project, applies=True, ups=[], withheld=[], halts=halts)
    unreadable = [s for w in found.waves for s in w.stacks if s.status == train.StackStatus.UNREADABLE]
    code = Exit.OK
    if halts.halt is not None:
        say(f"the train is halted since {micro_time(halts.halt.at)}: {halts.halt.cause}; nothing moves until "
            "`gpu-rollout fleet resume`")
        code = Exit.FAILED
    elif found.halt is not None:
        code = _halt_train(project, clusters, found, worlds, out)
    else:
        out.ownPauses = _own_pauses(project, clusters, found)
        if lease is None or renewer is None:
            say("nothing is brought up without the train's lease")
            code = Exit.FAILED
        else:
            code = _ups(project, backend, clusters, found, worlds, renewer, packs, only_stage, out, expect, commit)
    # The model owners are told what this step did and saw (announcements/), once per event.
    fleet_announce.tell(project.specs, clusters.connect, _holder(), fleet_announce.events(
        found, halts.halt is not None, [(u.stack, project.fleet.wave_of(u.stack).name) for u in out.ups if u.ok]))
    # What could not be read was not judged: the step says so and fails, having done the rest; but for the other
    # environment's clusters, which an approved plan's identity need not reach (the plan's run read them).
    others = _other_environments(project, only_stage if expect is not None else None)
    for state in unreadable:
        say(f"{state.world.name}: {state.reason}" + (" (another environment's: the approved plan's run read it)"
                                                     if state.world.name in others else ""))
    if ({s.world.name for s in unreadable} - others
            or any(not set(r.stacks) <= others for r in records if r.error is not None)):
        code = Exit.FAILED
    if as_json:
        documents.write(out)
    else:
        render(found, held, moment, halts)
    return code


def _other_environments(project: FleetProject, stage: Stage | None) -> set[str]:
    """The stacks of another stage than ``stage`` (none without one): their clusters are another identity's."""
    if stage is None:
        return set()
    return {name for name, stack in project.stacks.items() if stack.stage != stage}


def _halt_train(project: FleetProject, clusters: Clusters, found: train.Train,
                worlds: Mapping[str, train.StackWorld], out: schemas.FleetAdvanceDocument) -> Exit:
    """Record the halt in every cluster reachable and pause every stack moving or moved by the train (any wave)."""
    sign = found.halt
    assert sign is not None
    cause = f"{sign.kind} in stack {sign.stack}: {sign.message}"
    started = [s.world.name for s in found.started()]
    views = {name: w.view for name, w in worlds.items()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        recording = pool.submit(record_halt_everywhere, project, clusters, cause)
        pausing = pool.submit(_each, project, clusters, started, "pause", train.pause_reason(sign), views)
        records, done = recording.result(), pausing.result()
    out.paused = [d.document() for d in done]
    out.records = [r.document() for r in records]
    _say_paused(done, "pause")
    _say_records(records, "written")
    say(f"train HALTED: {cause}; paused every stack it moved ({', '.join(started) or 'none'}); recorded in "
        f"{', '.join(r.cluster for r in records if r.error is None) or 'no cluster'}; nothing moves until "
        "`gpu-rollout fleet resume`")
    return Exit.FAILED


def _own_pauses(project: FleetProject, clusters: Clusters,
                found: train.Train) -> list[schemas.StackPause | schemas.StackPauseError]:
    """A sign the fleet file does not halt on pauses its own stack, as `watch` does (once per stack)."""
    seen: dict[str, train.Sign] = {}
    for sign in found.own_pauses:
        seen.setdefault(sign.stack, sign)
    done = []
    for name, sign in seen.items():
        done += _each(project, clusters, [name], "pause", f"{sign.message} (gpu-rollout fleet advance)")
    _say_paused(done, "pause")
    return [d.document() for d in done]


def _preflight_holds(project: FleetProject, clusters: Clusters, stack: str) -> str | None:
    """Why preflight holds ``stack`` back from its `up` (its failed checks, or a cluster it could not read: missing
    evidence is no pass), or None: the live checks gate the train, not only a person who remembers to run them."""
    spec = project.specs[stack]
    try:
        registry, management, quotas = preflight_verb.askers(spec)
        failed = live.preflight_failures(clusters.connect(stack, spec), spec, read_attested(project.project_dir, spec),
                                         quotas, registry, management)
    except ClusterError as error:  # another cluster than the stack's, an unusable kubeconfig, an API error
        return f"preflight could not judge its cluster: {error}"
    if failed:
        return "preflight failed: " + "; ".join(f"{r.id} {r.subject}: {r.message}" for r in failed)
    return None


def _ups(project: FleetProject, backend: Backend, clusters: Clusters, found: train.Train,
         worlds: Mapping[str, train.StackWorld], renewer: Renewer, packs: Packs, only_stage: Stage | None,
         out: schemas.FleetAdvanceDocument, expect: schemas.ApprovalPlan | None, commit: str) -> Exit:
    chosen, withheld = _by_stage(project, found.ups, only_stage)
    out.withheld = withheld
    out.approval = approval_plan(project, found, worlds, withheld, commit)
    for name in withheld:
        say(f"{name}: its `up` is the next step, for a {project.stacks[name].stage} stack: run `fleet advance --yes "
            f"--stage {project.stacks[name].stage}` from its environment")
    if expect is not None:
        differences = plan_differences(expect, approval_plan(project, found, worlds, chosen, commit), commit)
        if differences:
            for line in differences:
                say(f"not as approved: {line}")
            say("fleet advance refused: this run's `up`s are not the approved ones; nothing was brought up (the next "
                "step's run asks for an approval of what it shows)")
            return Exit.FAILED
    requests, missing = [], []
    for name in chosen:
        found_pack = packs.for_stack(project, worlds[name])
        if isinstance(found_pack, str):
            missing.append(f"{name}: not brought up: {found_pack}")
            continue
        held_back = _preflight_holds(project, clusters, name)
        if held_back is not None:
            missing.append(f"{name}: not brought up: {held_back}")
            continue
        wave = project.fleet.wave_of(name).name
        requests.append(UpRequest(name, found_pack[0], found_pack[1], UP_MESSAGE.format(wave=wave)))
    for line in missing:
        say(line)
    renewer.check()  # a halt recorded meanwhile (`fleet halt`) or a lease lost stops the step here
    if renewer.halted or renewer.lost:
        say(f"fleet advance stopped before any `up`: {renewer.halted or renewer.lost}")
        return Exit.FAILED
    for request in requests:
        say(f"up {request.stack} (wave {project.fleet.wave_of(request.stack).name}; pack {request.pack})")
    results = backend.up(requests)
    out.ups = [schemas.Up(stack=r.stack, ok=r.ok, detail=r.detail) for r in results]
    for result in results:
        say(f"{result.stack}: {'up done' if result.ok else 'up FAILED'}: {result.detail}")
    if not requests and not missing:
        say(f"nothing to bring up now: {found.next_step()}")
    return Exit.failed_if(bool(missing) or any(not r.ok for r in results))
