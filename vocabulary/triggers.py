"""The kinds of trigger: what the live watches (:mod:`checks.watch`, :mod:`checks.generations`) report as a reason to
stop, and the fleet train's own signs (a failed ``verify --smoke``). The fleet file's ``haltOn``
(:mod:`fleetspec.fleet_file`) names them; every one is a bad sign but ``outside-window``, which pauses its own stack
only (the stack's maintenance window is closed, nothing is wrong)."""

from __future__ import annotations

from enum import StrEnum

from gpu_knowledge import labels


class TriggerKind(StrEnum):
    """In the order the fleet file's default ``haltOn`` lists them (the bad signs), then ``outside-window``."""

    UPGRADE_FAILED = labels.UPGRADE_FAILED  # a node in the upgrade controller's failed state (its own spelling;
    # the operator-owned watch, checks/watch.py)
    VALIDATION_FAILED = "validation-failed"  # the validation job failed on a node (checks/hold.py)
    VALIDATION_MISSING = "validation-missing"  # no validation result past the guard's deadline (checks/watch.py)
    BELOW_MIN_AVAILABLE = "below-min-available"  # a model below its minAvailable (checks/progress.py)
    STUCK = "stuck"  # a node in one upgrade state for longer than the stack allows (checks/watch.py)
    VERIFY_FAILED = "verify-failed"  # the fleet train's own sign: `gpu-rollout verify --smoke` failed on a stack
    SLO_BREACH = "slo-breach"  # a model's SLO breached on a pool being upgraded (checks/slo.py)
    SLO_NO_DATA = "slo-no-data"  # no figure of a model's SLO on a pool being upgraded for its whole `for` (checks/slo.py)
    NOT_READY = "not-ready"  # a node not Ready for longer than the stuck limit (image-owned, checks/generations.py)
    OUTSIDE_WINDOW = "outside-window"  # the stack's maintenance window is closed (checks/watch.py): no bad sign

    @property
    def bad_sign(self) -> bool:
        """A sign that something is wrong (so the fleet file's haltOn may name it): all but outside-window."""
        return self is not TriggerKind.OUTSIDE_WINDOW


# Every bad sign, in the order above: what haltOn accepts.
BAD_SIGNS: tuple[TriggerKind, ...] = tuple(kind for kind in TriggerKind if kind.bad_sign)


class DriftKind(StrEnum):
    """What the guard (checks/drift.py) sees wrong between rollouts: each raises an alert, never a pause."""

    OTHER_DRIVER = "other-driver"  # a node, not upgrading, runs another driver than its pool's target
    UNVALIDATED = "unvalidated"  # a GPU node without a passing validation result for the driver it runs
    GFD_LABELS = "gfd-labels"  # a node's GFD product or GPU count contradicts its pool's declaration
    XID = "xid"  # a node's GPUs reported an Xid error lately (Prometheus, DCGM Exporter)
    DCGM_SILENT = "dcgm-silent"  # no DCGM Exporter series for a node (Prometheus)
