"""The fleet train's Lease (checks/lease.py) on the fake API: one holder at a time, taken over only once the holder
stopped renewing, a race decided by the API server's resourceVersion, and the halt record kept through renewals."""

from __future__ import annotations

import pytest

from checks import kube as k
from checks.errors import ConflictError
from checks.lease import LeaseHeld, PoolVerified, TrainLease
from gpu_knowledge import labels
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from tests.fakekube.server import FakeKube

START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def lease(kube: k.Kube, holder: str, clock: Clock, duration: int = 60) -> TrainLease:
    return TrainLease(kube, LEASE_NAMESPACE, LEASE_NAME, holder, duration, clock)


def stored(fake: FakeKube) -> dict:
    return fake.obj("leases", LEASE_NAME, LEASE_NAMESPACE)


def test_the_first_taker_creates_it_and_a_second_is_refused_until_it_expires(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    first, second = lease(kube, "run-1", clock), lease(kube, "run-2", clock)
    first.acquire()
    assert stored(fake)["spec"]["holderIdentity"] == "run-1"
    assert stored(fake)["spec"]["leaseDurationSeconds"] == 60
    clock.now += 59
    with pytest.raises(LeaseHeld, match=r"another `fleet advance` holds the train's lease kube-system/"
                       r"gpu-driver-upgrade-fleet \(run-1, until 2027-01-15T08:01:00.000000Z"):
        second.acquire()
    clock.now += 2  # run-1 stopped renewing 61 s ago: it was killed
    second.acquire()
    assert stored(fake)["spec"]["holderIdentity"] == "run-2"
    assert stored(fake)["spec"]["leaseTransitions"] == 1


def test_renewing_keeps_it_and_a_renewal_after_a_takeover_is_refused(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    first, second = lease(kube, "run-1", clock), lease(kube, "run-2", clock)
    first.acquire()
    for _ in range(5):
        clock.now += 40
        first.renew()
    with pytest.raises(LeaseHeld):
        second.acquire()  # 200 s after it was taken, but renewed 0 s ago
    clock.now += 120
    second.acquire()
    with pytest.raises(LeaseHeld, match="no longer ours"):
        first.renew()


def test_release_frees_it_at_once(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    first = lease(kube, "run-1", clock)
    first.acquire()
    first.release()
    assert "holderIdentity" not in stored(fake)["spec"]
    lease(kube, "run-2", clock).acquire()
    first.release()  # not ours any more: nothing happens
    assert stored(fake)["spec"]["holderIdentity"] == "run-2"


def test_a_racing_writer_is_refused_by_its_resource_version_and_judged_again(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    lease(kube, "run-1", clock).acquire()
    clock.now += 120  # expired: both may take it
    taken = []

    def race(verb: str, plural: str, query: dict) -> None:
        if verb == "update" and plural == "leases" and not taken:
            taken.append(True)  # run-3 writes between run-2's read and its write
            fake.update("leases", LEASE_NAME, {"spec": {"holderIdentity": "run-3", "renewTime":
                        "2027-01-15T08:02:00.000000Z"}}, LEASE_NAMESPACE)

    fake.hooks.append(race)
    with pytest.raises(LeaseHeld, match="run-3"):
        lease(kube, "run-2", clock).acquire()
    assert stored(fake)["spec"]["holderIdentity"] == "run-3"


def test_the_fake_refuses_a_replace_of_a_stale_version(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    lease(kube, "run-1", clock).acquire()
    body = stored(fake)
    fake.update("leases", LEASE_NAME, {"spec": {"holderIdentity": "someone"}}, LEASE_NAMESPACE)
    with pytest.raises(ConflictError):
        kube.replace(k.LEASES, LEASE_NAME, body, LEASE_NAMESPACE)


def test_a_halt_recorded_meanwhile_survives_the_holder_s_renewal_and_release(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    holder, emergency = lease(kube, "run-1", clock), lease(kube, "person", clock)
    holder.acquire()
    emergency.record_halt("halted by hand: Xid 79 on gpu-h100-s03")  # `fleet halt` waits for no lease
    state = holder.renew()
    assert state.halt is not None and state.halt.cause == "halted by hand: Xid 79 on gpu-h100-s03"
    assert state.halt.by == "person"
    holder.release()
    assert holder.read().halt is not None
    emergency.record_halt("a second cause")  # the first cause stays: it is what stopped the train
    assert holder.read().halt.cause == "halted by hand: Xid 79 on gpu-h100-s03"
    cleared = emergency.clear_halt()
    assert [r.cause for r in cleared] == ["halted by hand: Xid 79 on gpu-h100-s03"]
    assert labels.ANNOTATION_FLEET_HALTED not in (stored(fake)["metadata"].get("annotations") or {})
    assert emergency.clear_halt() == []


def test_a_rollback_halts_its_wave_beside_the_train_s_halt_and_resume_clears_both(fake: FakeKube,
                                                                                  kube: k.Kube) -> None:
    clock = Clock()
    holder, rollback = lease(kube, "run-1", clock), lease(kube, "rollback", clock)
    holder.acquire()
    rollback.record_halt("rollback of stack eks-prod: Xid 79", wave="prod-cloud")
    rollback.record_halt("rollback of stack prod: a second rollback", wave="prod-cloud")  # the first cause stays
    state = holder.renew()
    assert state.halt is None  # the train as a whole is not halted: earlier waves may move
    assert {w: (r.cause, r.by, r.wave) for w, r in state.wave_halts.items()} == {
        "prod-cloud": ("rollback of stack eks-prod: Xid 79", "rollback", "prod-cloud")}
    rollback.record_halt("halted by hand: drill")  # a train halt beside it: both are kept
    state = holder.read()
    assert state is not None and state.halt is not None and list(state.wave_halts) == ["prod-cloud"]
    assert [r.cause for r in rollback.clear_halt()] == ["halted by hand: drill", "rollback of stack eks-prod: Xid 79"]
    notes = stored(fake)["metadata"].get("annotations") or {}
    assert labels.ANNOTATION_FLEET_HALTED not in notes and labels.ANNOTATION_FLEET_WAVES_HALTED not in notes
    assert holder.read().holder == "run-1"  # the lock itself untouched


def test_an_unreadable_wave_halt_is_still_a_halt(fake: FakeKube, kube: k.Kube) -> None:
    train = lease(kube, "run-1", Clock())
    train.acquire()
    body = stored(fake)
    body["metadata"].setdefault("annotations", {})[labels.ANNOTATION_FLEET_WAVES_HALTED] = "not json"
    kube.replace(k.LEASES, LEASE_NAME, body, LEASE_NAMESPACE)
    state = train.read()
    assert state is not None and [(r.cause, r.wave) for r in state.halts] == [("not json", "?")]


def test_a_halt_on_a_cluster_without_a_lease_creates_one_and_verify_records_merge(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    record = lease(kube, "person", clock).record_halt("halted by hand: drill")
    assert record.halt is not None and record.holder is None
    train = lease(kube, "run-1", clock)
    train.acquire()  # a halted train's lease can still be taken: advance reports the halt and moves nothing
    train.record_verified({"existing-canary": 3})
    train.record_verified({"existing-prod": 7, "existing-canary": 4})
    assert train.read().verified == {"existing-canary": 4, "existing-prod": 7}
    assert train.read().halt is not None


def test_pool_verify_records_merge_per_pool_and_an_unreadable_one_reads_as_none(fake: FakeKube, kube: k.Kube) -> None:
    clock = Clock()
    train = lease(kube, "run-1", clock)
    train.acquire()
    train.record_pools_verified({"prod": {"gput4": PoolVerified("580.173.02", START)}})
    clock.now += 3600
    train.record_pools_verified({"prod": {"gpua100": PoolVerified("580.173.02", clock.now, "none")},
                                 "eks-prod": {"gpu-a10g": PoolVerified("580.173.02 g4", clock.now)}})
    state = train.read()
    assert state is not None and state.pools_verified == {
        "prod": {"gput4": PoolVerified("580.173.02", START),
                 "gpua100": PoolVerified("580.173.02", START + 3600, "none")},
        "eks-prod": {"gpu-a10g": PoolVerified("580.173.02 g4", START + 3600)}}
    body = stored(fake)
    body["metadata"]["annotations"][labels.ANNOTATION_FLEET_POOLS_VERIFIED] = (
        '{"prod": {"gput4": {"target": "580.173.02", "at": 7}, "gpua100": "x"}, "eks-prod": []}')
    kube.replace(k.LEASES, LEASE_NAME, body, LEASE_NAMESPACE)
    assert train.read().pools_verified == {}  # no record is no pass: those waves are verified again
