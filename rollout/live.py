"""What the live verbs share: how they tell the user which cluster they act on."""

from __future__ import annotations

from checks.identity import ClusterIdentity, Verdict
from rollout.console import say


def note_identity(identity: ClusterIdentity) -> None:
    """One line on stderr when nothing confirmed the cluster is the stack's (a refuted one never gets here:
    the verb stopped with exit 2). preflight reports it as its ``cluster-identity`` result instead."""
    if identity.verdict != Verdict.CONFIRMED:
        say(f"note: {identity.message}")
