"""A stack's own waves as the train lets them go: before it brings up a deployed stack, pure, over its cluster's view
and the train's record of passing verifies (the Lease's ``fleet-pools-verified``, :class:`checks.lease.PoolVerified`).

The runbook removes the skip label "pool by pool", the next pool only once the one before ran clean; and keeps "the
old node pool or node group until the new one has run cleanly". So an `up` of a stack that releases a wave (its
newest released wave is not complete on the cluster) waits until every earlier released wave is:

- **complete**: every node of its pools on the pool's target (operator: ``upgrade-done`` on it; image: the newest
  generation Ready on it, ``nodeCount`` of them);
- **not held**: no node of it carries the skip label;
- **verified**: a passing `verify --smoke` saw it complete on that target (the record; where the fleet's wave asks
  no verify, the train's sight of it complete);
- **dwelt** ``rollout.waveDwellHours`` since that record: the dwell counts from completion, not from release.

An `up` that retires an image-owned pool's generation waits for a passing verify of the newest one (the floor of
``rollout.keepGenerationHours`` since it first deployed is policy ``old-generation-kept``'s). And no `up` goes to a
stack paused by hand (`gpu-rollout pause`'s annotation on a node): the person who paused it resumes it.

Where a record is missing for a wave complete and not held, the train asks `verify --smoke` on the stack as of that
wave (:func:`spec_through`) and records what passed: the dwell starts then. A stack never deployed has no cluster to
judge: policy ``waves-in-order`` judges the waves its first deployment releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from checks.lease import PoolVerified
from fleetspec.model import FleetSpec, NodePool


def pool_target_mark(spec: FleetSpec, pool: NodePool) -> str:
    """What a record of the pool is of: its target driver, and on an image-owned pool its newest generation."""
    target = spec.pool_target(pool)
    return target.driver + (f" g{target.generation}" if target.generation is not None else "")


def released_waves(spec: FleetSpec) -> dict[int, list[NodePool]]:
    """The stack's released prod pools by wave (a canary pool is no wave: the prod gate judges it)."""
    out: dict[int, list[NodePool]] = {}
    for pool in spec.nodePools:
        if pool.role != "canary" and not spec.pool_held(pool):
            out.setdefault(pool.rollout.wave, []).append(pool)
    return dict(sorted(out.items()))


def spec_through(spec: FleetSpec, wave: int) -> FleetSpec:
    """The stack as it was while ``wave`` was its newest released wave: the pools of later waves held."""
    pools = [p.model_copy(update={"rollout": p.rollout.model_copy(update={"released": False})})
             if p.role != "canary" and p.rollout.wave > wave else p for p in spec.nodePools]
    return spec.model_copy(update={"nodePools": pools})


def _complete(row: Mapping[str, Any]) -> bool:
    done = row.get("done")
    if isinstance(done, bool):  # image-owned: the generations' done rule (checks/generations.py)
        return done
    return isinstance(done, int) and done == row.get("total") and not row.get("skipped")


def _progress(row: Mapping[str, Any]) -> str:
    if isinstance(row.get("done"), bool):
        return "; ".join(row.get("waiting") or []) or "not done"
    return f"{row.get('done')} of {row.get('total')} node(s) done on {row.get('target')}"


def _at(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Gate:
    """Why the stack may not go up now (empty: it may), and the waves a verify would record."""

    refusals: list[str] = field(default_factory=list)
    to_verify: list[int] = field(default_factory=list)  # complete and not held, with no record of it

    @property
    def through(self) -> int | None:
        return max(self.to_verify) if self.to_verify else None


def gate(stack: str, spec: FleetSpec, pools: list[dict[str, Any]], records: Mapping[str, PoolVerified],
         now: float) -> Gate:
    """Judge an `up` of ``stack`` (``spec``: what it would deploy) over its cluster's pool rows (the view, read
    with ``spec``) and its records. Pure."""
    rows = {str(r.get("pool")): r for r in pools}
    found = Gate()
    paused = sorted(name for name, row in rows.items() if row.get("paused"))
    if paused:
        found.refusals.append(f"{stack} is paused by hand (`gpu-rollout pause`) on pool(s) {', '.join(paused)}: "
                              f"`gpu-rollout resume --stack {stack}` first; the train brings up no paused stack")
    waves = released_waves(spec)
    pending = [w for w, members in waves.items() if not all(_complete(rows.get(p.name, {})) for p in members)]
    if pending:
        newest = max(pending)
        for wave, members in waves.items():
            if wave < newest:
                _judge_wave(found, stack, spec, wave, members, rows, records, now, newest)
    for pool in spec.nodePools:
        _judge_retirement(found, stack, spec, pool, rows.get(pool.name, {}), records)
    if paused:
        found.to_verify = []  # nothing is verified on a stack someone paused: they look at it first
    return found


def _judge_wave(found: Gate, stack: str, spec: FleetSpec, wave: int, members: list[NodePool],
                rows: Mapping[str, Mapping[str, Any]], records: Mapping[str, PoolVerified], now: float,
                newest: int) -> None:
    before = f"{stack}: wave {newest} waits for wave {wave}"
    held = [f"{p.name} ({rows[p.name].get('skipped')} node(s))" for p in members
            if rows.get(p.name, {}).get("skipped")]
    if held:
        found.refusals.append(f"{before}, which has nodes held by the skip label: {', '.join(held)}; the next wave "
                              "goes only once none is held")
        return
    incomplete = [f"{p.name}: {_progress(rows[p.name]) if p.name in rows else 'not read'}" for p in members
                  if not _complete(rows.get(p.name, {}))]
    if incomplete:
        found.refusals.append(f"{before}, which is not complete ({'; '.join(incomplete)})")
        return
    marks = {p.name: pool_target_mark(spec, p) for p in members}
    seen = [records.get(p.name) for p in members]
    if any(r is None or r.target != marks[p.name] for r, p in zip(seen, members, strict=True)):
        found.to_verify.append(wave)
        found.refusals.append(f"{before}, complete but with no passing verify of it on record (verify --smoke "
                              "records one)")
        return
    completed = max(r.at for r in seen if r is not None)
    dwell = spec.rollout.waveDwellHours
    dwelt = (now - completed) / 3600
    if dwelt < dwell:
        found.refusals.append(f"{before}, verified complete {_at(completed)}: {dwelt:.1f} h of "
                              f"rollout.waveDwellHours {dwell:g} h so far, until {_at(completed + dwell * 3600)}")


def _judge_retirement(found: Gate, stack: str, spec: FleetSpec, pool: NodePool, row: Mapping[str, Any],
                      records: Mapping[str, PoolVerified]) -> None:
    leaving = [g for g in row.get("generations") or [] if g.get("spec") == "retired" and g.get("nodes")]
    if not leaving:
        return
    gone = ", ".join(f"g{g.get('generation')}" for g in leaving)
    mark = pool_target_mark(spec, pool)
    record = records.get(pool.name)
    if record is not None and record.target == mark:
        return
    if _complete(row):
        found.to_verify.append(pool.rollout.wave)
    found.refusals.append(f"{stack}: pool {pool.name} retires {gone} before a passing verify of its newest "
                          f"generation ({mark}): the old generation stays until the new one verified clean"
                          + ("" if _complete(row) else f" ({_progress(row)})"))


def records_of(spec: FleetSpec, pools: list[dict[str, Any]], through: int | None, now: float,
               verify: str = "smoke") -> dict[str, PoolVerified]:
    """What a passing verify of the stack (as of wave ``through``; None: as it is) records: each released pool
    complete on its target, at ``now``."""
    rows = {str(r.get("pool")): r for r in pools}
    out = {}
    for pool in spec.nodePools:
        if spec.pool_held(pool) or (through is not None and pool.role != "canary" and pool.rollout.wave > through):
            continue
        if _complete(rows.get(pool.name, {})):
            out[pool.name] = PoolVerified(pool_target_mark(spec, pool), now, verify)
    return out
