"""The fleet train's lease: one ``coordination.k8s.io/v1`` Lease (``kube-system/gpu-driver-upgrade-fleet``) in the
cluster of the fleet file's lease stack, so two `gpu-rollout fleet advance` never act at once, and the train's halt
record, so a halted train stays halted whoever runs next.

The lease is taken as leader election takes one: read it; free (no holder, or a holder that stopped renewing for
``leaseDurationSeconds``) means write our identity with the ``resourceVersion`` read, so of two takers racing the
API server admits one and answers the other 409. The holder renews ``renewTime`` while it runs and clears the holder
when done; a holder killed outright blocks the next for at most the duration. Every write is a read-modify-write
on a fresh read, so a renewal never drops a halt recorded meanwhile (`fleet halt` records one whoever holds the
lease: an emergency does not wait).

The halt record is the annotation ``gpu-driver-upgrade.io/fleet-halted`` (JSON: cause, at, by) on the Lease: the
world says the train is halted, not a local file. Every cluster of the fleet holds one such record, on a Lease of the
same name (:class:`TrainLease` in each; only the lease stack's is ever taken as the lock), so a halt is recorded
wherever it can reach and survives any one cluster down. A rollback halts its wave only: the annotation
``gpu-driver-upgrade.io/fleet-waves-halted`` (JSON: wave -> cause, at, by). `fleet resume` removes both.

The lease stack's Lease also holds what the train saw verified: per stack the update whose `verify --smoke` passed
(``fleet-verified``), and per stack and pool the target its nodes were first seen complete on by a passing verify,
and when (``fleet-pools-verified``): a stack's next wave is released, and an old generation retired, only from it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from checks import kube as k
from checks.errors import ClusterError, ConflictError, NotFoundError
from checks.objects import Obj, annotations_of, meta, spec_of
from checks.progress import epoch
from gpu_knowledge import kinds, labels

ATTEMPTS = 5  # read-modify-write rounds before a busy lease is given up on


def micro_time(at: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds), as Lease times are written."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class HaltRecord:
    cause: str
    at: float
    by: str
    wave: str | None = None  # a rollback's halt of one wave (and the waves after it); None: the whole train

    def as_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "at": micro_time(self.at), "by": self.by,
                **({"wave": self.wave} if self.wave is not None else {})}


@dataclass(frozen=True)
class PoolVerified:
    """A pool's nodes seen complete on ``target`` (``promotion_train.waves.pool_target_mark``) by a passing verify
    (or, where the fleet's wave asks none, by the finished rollout) at ``at``: the train's record of a wave's
    completion, from which the next wave's dwell and an old generation's keep count."""

    target: str
    at: float
    verify: str = "smoke"  # smoke | none (the fleet wave's waitFor.verify when it was recorded)

    def as_json(self) -> dict[str, str]:
        return {"target": self.target, "at": micro_time(self.at), "verify": self.verify}


@dataclass(frozen=True)
class LeaseState:
    """The Lease as read (None fields where unset)."""

    holder: str | None
    renewed: float | None
    duration: int
    halt: HaltRecord | None
    raw: Obj
    verified: dict[str, int] = field(default_factory=dict)  # stack -> the update whose verify --smoke passed
    wave_halts: dict[str, HaltRecord] = field(default_factory=dict)  # wave -> the rollback's halt of it
    pools_verified: dict[str, dict[str, PoolVerified]] = field(default_factory=dict)  # stack -> pool -> record
    guards: dict[str, dict[str, Any]] = field(default_factory=dict)  # stack -> what its guard saw last (JSON)

    @property
    def halts(self) -> list[HaltRecord]:
        """Every halt recorded here: the train's, then each wave's."""
        return ([self.halt] if self.halt is not None else []) + list(self.wave_halts.values())

    def free(self, now: float) -> bool:
        """No holder, or one that stopped renewing long enough ago."""
        return not self.holder or self.renewed is None or now >= self.renewed + self.duration

    def expires(self) -> float | None:
        return None if self.renewed is None else self.renewed + self.duration

    def as_json(self, now: float) -> dict[str, Any]:
        expires = self.expires()
        return {"holder": self.holder if not self.free(now) else None,
                "renewTime": micro_time(self.renewed) if self.renewed is not None else None,
                "expires": micro_time(expires) if expires is not None and not self.free(now) else None,
                "halted": self.halt.as_json() if self.halt else None}


class LeaseHeld(ClusterError):
    """Another `fleet advance` holds the lease: this one does nothing."""


def _record(raw: str, doc: Any, wave: str | None = None) -> HaltRecord:
    try:
        return HaltRecord(str(doc["cause"]), epoch(doc.get("at")) or 0.0, str(doc.get("by", "")), wave)
    except (KeyError, TypeError, AttributeError):
        # Unreadable, but there: still a halt (someone wrote it); its text is the cause.
        return HaltRecord(raw[:500], 0.0, "", wave)


def _halt_of(obj: Obj) -> HaltRecord | None:
    raw = annotations_of(obj).get(labels.ANNOTATION_FLEET_HALTED)
    if not raw:
        return None
    try:
        return _record(raw, json.loads(raw))
    except ValueError:
        return HaltRecord(raw[:500], 0.0, "")


def _wave_halts_of(obj: Obj) -> dict[str, HaltRecord]:
    raw = annotations_of(obj).get(labels.ANNOTATION_FLEET_WAVES_HALTED)
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not doc:
        # Unreadable, but there: a halt of some wave nobody can name is a halt of the whole train.
        return {"?": HaltRecord(raw[:500], 0.0, "", "?")}
    return {str(wave): _record(raw, record, str(wave)) for wave, record in doc.items()}


def _verified_of(obj: Obj) -> dict[str, int]:
    try:
        doc = json.loads(annotations_of(obj).get(labels.ANNOTATION_FLEET_VERIFIED) or "{}")
    except ValueError:
        return {}  # unreadable: every stack is verified again
    if not isinstance(doc, dict):
        return {}
    return {str(stack): int(update) for stack, update in doc.items()
            if isinstance(update, int) and not isinstance(update, bool)}


def _pool_record(doc: Any) -> PoolVerified | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("target"), str):
        return None
    at = epoch(doc["at"]) if isinstance(doc.get("at"), str) else None
    verify = doc.get("verify")
    return None if at is None else PoolVerified(doc["target"], at, verify if verify in ("smoke", "none") else "smoke")


def _pools_verified_of(obj: Obj) -> dict[str, dict[str, PoolVerified]]:
    """The record; an unreadable one, or entry, reads as none: that wave is verified again (no record is no pass)."""
    try:
        doc = json.loads(annotations_of(obj).get(labels.ANNOTATION_FLEET_POOLS_VERIFIED) or "{}")
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict[str, dict[str, PoolVerified]] = {}
    for stack, pools in doc.items():
        if isinstance(pools, dict):
            read = {str(pool): record for pool, raw in pools.items() if (record := _pool_record(raw)) is not None}
            if read:
                out[str(stack)] = read
    return out
def _guards_of(obj: Obj) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(annotations_of(obj).get(labels.ANNOTATION_GUARD_STATUS) or "{}")
    except ValueError:
        return {}  # unreadable: as if no guard had written (the fleet reads the cluster itself)
    if not isinstance(doc, dict):
        return {}
    return {str(stack): status for stack, status in doc.items() if isinstance(status, dict)}


def _state(obj: Obj) -> LeaseState:
    spec = spec_of(obj)
    return LeaseState(spec.get("holderIdentity") or None, epoch(spec.get("renewTime") or spec.get("acquireTime")),
                      int(spec.get("leaseDurationSeconds") or 0), _halt_of(obj), obj, _verified_of(obj),
                      _wave_halts_of(obj), _pools_verified_of(obj), _guards_of(obj))


class TrainLease:
    """The train's Lease in one cluster. ``clock`` is injected, so tests judge expiry without waiting."""

    def __init__(self, kube: k.Kube, namespace: str, name: str, holder: str, duration: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name
        self.holder, self.duration, self.clock = holder, duration, clock

    def read(self) -> LeaseState | None:
        try:
            return _state(self.kube.get(k.LEASES, self.name, self.namespace))
        except NotFoundError:
            return None

    def _new(self, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Obj:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if annotations:
            metadata["annotations"] = annotations
        return {"apiVersion": kinds.LEASE.api_version, "kind": kinds.LEASE.kind, "metadata": metadata, "spec": spec}

    def _write(self, change: Callable[[LeaseState | None], Obj | None]) -> LeaseState | None:
        """Read, let ``change`` say the object to write (None: nothing), write it with the version read; on a
        conflict read again. ``change`` may raise to refuse."""
        for _ in range(ATTEMPTS):
            current = self.read()
            body = change(current)
            if body is None:
                return current
            try:
                if current is None:
                    written = self.kube.create(k.LEASES, body, self.namespace)
                else:
                    written = self.kube.replace(k.LEASES, self.name, body, self.namespace)
            except ConflictError:
                continue  # someone wrote between our read and our write: judge again on a fresh read
            return _state(written)
        raise ClusterError(f"lease {self.namespace}/{self.name}: changed {ATTEMPTS} times while being written; "
                           "try again")

    def _replacing(self, current: LeaseState, spec_changes: dict[str, Any],
                   annotations: dict[str, str | None] | None = None) -> Obj:
        body = json.loads(json.dumps(current.raw))
        body.setdefault("spec", {}).update(spec_changes)
        body["spec"] = {key: value for key, value in body["spec"].items() if value is not None}
        if annotations:
            notes = meta(body).setdefault("annotations", {}) or {}
            for key, value in annotations.items():
                if value is None:
                    notes.pop(key, None)
                else:
                    notes[key] = value
            body["metadata"]["annotations"] = notes
        return body

    def acquire(self) -> LeaseState:
        """Take the lease, or raise :class:`LeaseHeld` naming who holds it and until when."""

        def take(current: LeaseState | None) -> Obj:
            now = self.clock()
            stamp = micro_time(now)
            spec = {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration, "acquireTime": stamp,
                    "renewTime": stamp}
            if current is None:
                return self._new({**spec, "leaseTransitions": 0})
            if not current.free(now) and current.holder != self.holder:
                expires = current.expires()
                raise LeaseHeld(f"another `fleet advance` holds the train's lease {self.namespace}/{self.name} "
                                f"({current.holder}, until {micro_time(expires) if expires else '?'} unless it "
                                "renews): this one does nothing")
            transitions = int(spec_of(current.raw).get("leaseTransitions") or 0)
            return self._replacing(current, {**spec, "leaseTransitions": transitions + 1})

        state = self._write(take)
        assert state is not None
        return state

    def renew(self) -> LeaseState:
        """Move ``renewTime`` on; :class:`LeaseHeld` when the lease is no longer ours (we stopped renewing for
        longer than the duration and someone took it)."""

        def renewed(current: LeaseState | None) -> Obj:
            if current is None or current.holder != self.holder:
                raise LeaseHeld(f"the train's lease {self.namespace}/{self.name} is no longer ours "
                                f"({current.holder if current else 'gone'})")
            return self._replacing(current, {"renewTime": micro_time(self.clock())})

        state = self._write(renewed)
        assert state is not None
        return state

    def release(self) -> None:
        """Clear the holder (the halt record stays); nothing when the lease is not ours any more."""

        def cleared(current: LeaseState | None) -> Obj | None:
            if current is None or current.holder != self.holder:
                return None
            return self._replacing(current, {"holderIdentity": None, "renewTime": None, "acquireTime": None})

        self._write(cleared)

    def record_halt(self, cause: str, wave: str | None = None) -> LeaseState:
        """Record the train as halted, or with ``wave`` that wave (a rollback's halt), whoever holds the lease. A
        record already there is kept: the first cause is the one that stopped it (a second halt changes nothing)."""
        record = HaltRecord(" ".join(cause.split())[:1000], self.clock(), self.holder, wave)

        def halted(current: LeaseState | None) -> Obj | None:
            if wave is None:
                key, text = labels.ANNOTATION_FLEET_HALTED, json.dumps(record.as_json(), sort_keys=True)
                if current is not None and current.halt is not None:
                    return None
            else:
                if current is not None and wave in current.wave_halts:
                    return None
                waves = {name: {k: v for k, v in r.as_json().items() if k != "wave"}
                         for name, r in (current.wave_halts if current else {}).items()}
                waves[wave] = {k: v for k, v in record.as_json().items() if k != "wave"}
                key, text = labels.ANNOTATION_FLEET_WAVES_HALTED, json.dumps(waves, sort_keys=True)
            if current is None:
                return self._new({"leaseDurationSeconds": self.duration}, {key: text})
            return self._replacing(current, {}, {key: text})

        state = self._write(halted)
        assert state is not None
        return state

    def record_verified(self, updates: dict[str, int]) -> None:
        """Add stack -> update whose `verify --smoke` passed to the record (a stack's older entry is replaced)."""
        if not updates:
            return

        def recorded(current: LeaseState | None) -> Obj | None:
            merged = {**(current.verified if current else {}), **updates}
            text = json.dumps(dict(sorted(merged.items())))
            if current is None:
                return self._new({"leaseDurationSeconds": self.duration}, {labels.ANNOTATION_FLEET_VERIFIED: text})
            if current.verified == merged:
                return None
            return self._replacing(current, {}, {labels.ANNOTATION_FLEET_VERIFIED: text})

        self._write(recorded)

    def record_pools_verified(self, records: dict[str, dict[str, PoolVerified]]) -> None:
        """Add stack -> pool -> record (a pool's older record is replaced; the others stay)."""
        if not any(records.values()):
            return

        def recorded(current: LeaseState | None) -> Obj | None:
            merged = {stack: dict(pools) for stack, pools in (current.pools_verified if current else {}).items()}
            for stack, pools in records.items():
                merged.setdefault(stack, {}).update(pools)
            if current is not None and current.pools_verified == merged:
                return None
            text = json.dumps({stack: {pool: merged[stack][pool].as_json() for pool in sorted(merged[stack])}
                               for stack in sorted(merged)})
            if current is None:
                return self._new({"leaseDurationSeconds": self.duration},
                                 {labels.ANNOTATION_FLEET_POOLS_VERIFIED: text})
            return self._replacing(current, {}, {labels.ANNOTATION_FLEET_POOLS_VERIFIED: text})

        self._write(recorded)

    def record_guard(self, stack: str, status: dict[str, Any]) -> None:
        """Write what ``stack``'s guard saw (its entry replaced; other stacks' kept), whoever holds the lease."""

        def recorded(current: LeaseState | None) -> Obj:
            merged = {**(current.guards if current else {}), stack: status}
            text = json.dumps(dict(sorted(merged.items())), sort_keys=True)
            if current is None:
                return self._new({"leaseDurationSeconds": self.duration}, {labels.ANNOTATION_GUARD_STATUS: text})
            return self._replacing(current, {}, {labels.ANNOTATION_GUARD_STATUS: text})

        self._write(recorded)

    def clear_halt(self) -> list[HaltRecord]:
        """Remove every halt record (the train's and each wave's); the records removed, none when there were none."""
        before = self.read()

        def cleared(current: LeaseState | None) -> Obj | None:
            if current is None or not current.halts:
                return None
            return self._replacing(current, {}, {labels.ANNOTATION_FLEET_HALTED: None,
                                                 labels.ANNOTATION_FLEET_WAVES_HALTED: None})

        self._write(cleared)
        return before.halts if before is not None else []

    # ------------------------------------------------------------ the announcements' record (announcements/)

    def claim(self, key: str, stale_after: float = 600.0, keep: int = 500) -> bool:
        """Claim the announcement ``key`` (annotation ``gpu-driver-upgrade.io/announced``), True when this sender
        won it: the first to write it does (the API server admits one write of a version), and every other finds it
        and sends nothing. A claim never settled for ``stale_after`` seconds (its sender died) may be taken again.
        The newest ``keep`` entries stay."""
        won = False

        def claimed(current: LeaseState | None) -> Obj | None:
            nonlocal won
            now = self.clock()
            entries = _announced(current.raw if current else None)
            entry = entries.get(key)
            if entry is not None and (entry.get("sent") or now - float(entry.get("at", 0)) < stale_after):
                won = False
                return None
            entries[key] = {"at": now, "by": self.holder, "sent": False}
            text = json.dumps(dict(sorted(entries.items(), key=lambda kv: -float(kv[1].get("at", 0)))[:keep]),
                              sort_keys=True)
            won = True
            if current is None:
                return self._new({"leaseDurationSeconds": self.duration}, {labels.ANNOTATION_ANNOUNCED: text})
            return self._replacing(current, {}, {labels.ANNOTATION_ANNOUNCED: text})

        self._write(claimed)
        return won

    def settle(self, key: str, sent: bool) -> None:
        """Mark a claimed announcement sent, or (not sent) remove the claim so a later sender tries again."""

        def settled(current: LeaseState | None) -> Obj | None:
            entries = _announced(current.raw if current else None)
            if current is None or key not in entries:
                return None
            if sent:
                entries[key] = {**entries[key], "sent": True}
            else:
                entries.pop(key)
            return self._replacing(current, {}, {labels.ANNOTATION_ANNOUNCED: json.dumps(entries, sort_keys=True)})

        self._write(settled)


def _announced(obj: Obj | None) -> dict[str, dict[str, Any]]:
    """The announcements recorded on the Lease: key -> {at, by, sent}; an unreadable record counts as empty."""
    try:
        found = json.loads(annotations_of(obj).get(labels.ANNOTATION_ANNOUNCED) or "{}") if obj else {}
    except ValueError:
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}
