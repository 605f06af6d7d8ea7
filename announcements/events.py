"""A pool event, in words, for a person and for a machine."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    STARTED = "started"  # its stack's `up` moves the pool's nodes
    PAUSED = "paused"  # the rollout on it was paused (a bad sign, a halt, `gpu-rollout pause`)
    FINISHED = "finished"  # its rollout is complete


@dataclass(frozen=True)
class PoolEvent:
    stack: str
    cluster: str
    pool: str
    kind: EventKind
    target: str  # what the pool moves to: "driver 580.173.02" or "driver 580.173.02 on node image 1.33.5-20251120"
    detail: str  # why, in words: "wave 2", "SLO breach of llm-chat: p99 latency 2.1 s"
    owners: tuple[str, ...]  # models[].owners of the models on the pool
    occurrence: str = ""  # what tells two events of one kind and target apart (a pause's cause)

    @property
    def key(self) -> str:
        """The event's identity in the record: the same event seen by two senders has one key."""
        what = "\0".join((self.stack, self.pool, self.kind.value, self.target, self.occurrence))
        return f"{self.stack}/{self.pool}/{self.kind.value}/{hashlib.sha256(what.encode()).hexdigest()[:16]}"

    def text(self) -> str:
        owners = f" Owners: {', '.join(self.owners)}." if self.owners else ""
        return (f"GPU driver upgrade: pool {self.pool} of stack {self.stack} (cluster {self.cluster}) {self.kind.value}"
                f" moving to {self.target}: {self.detail}.{owners}")

    def document(self) -> dict[str, Any]:
        return {"event": self.kind.value, "stack": self.stack, "cluster": self.cluster, "pool": self.pool,
                "target": self.target, "detail": self.detail, "owners": list(self.owners), "text": self.text()}
