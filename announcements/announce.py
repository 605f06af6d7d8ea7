"""Announce a stack's pool events through its webhook, once per event, whichever sender sees them first.

:func:`announce_stack` is the one entry point: the deploy step (`gpu-rollout fleet advance`) calls it when it brings a
stack up (started), pauses it (paused) and finds its rollout complete (finished); the in-cluster guard calls it for
the same events. Each event is claimed on the train Lease of the stack's cluster before it is sent
(:meth:`checks.lease.TrainLease.claim`): a sender that finds it claimed sends nothing; a send that fails gives the
claim back, so the next sender tries again.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from announcements.events import EventKind, PoolEvent
from announcements.webhook import WebhookError, payload, post
from checks import kube as k
from checks.errors import ClusterError, NotFoundError
from checks.lease import TrainLease
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE, Lease
from fleetspec.model import FleetSpec
from fleetspec.notifications import WEBHOOK_NAMESPACE, WEBHOOK_SECRET_KEY, Webhook

Send = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Outcome:
    event: PoolEvent
    sent: bool
    why: str  # "sent", "announced already (by <sender>)", "not sent: <reason>"


def events_of(spec: FleetSpec, stack: str, kind: EventKind, detail: str, occurrence: str = "",
              pools: Collection[str] | None = None) -> list[PoolEvent]:
    """The events of ``kind`` for the stack's pools that move in this deployment (``FleetSpec.pool_target``), or
    for ``pools`` where given; each names the owners of the models on it."""
    out = []
    for pool in spec.nodePools:
        target = spec.pool_target(pool)
        if (pools is None and not target.moves) or (pools is not None and pool.name not in pools):
            continue
        owners = sorted({o for m in spec.models if pool.name in m.nodePools for o in m.owners})
        what = f"driver {target.driver}" + (f" on node image {target.image}" if target.image else "")
        out.append(PoolEvent(stack, spec.cluster.name, pool.name, kind, what, detail, tuple(owners), occurrence))
    return out


def webhook_url(kube: k.Kube, webhook: Webhook) -> str:
    """The URL in the Secret the stack names (``notifications.webhook.secret``, key ``url``) in kube-system."""
    where = f"Secret {WEBHOOK_NAMESPACE}/{webhook.secret}"
    try:
        secret = kube.get(k.SECRETS, webhook.secret, WEBHOOK_NAMESPACE)
    except NotFoundError:
        raise ClusterError(f"{where} (notifications.webhook.secret) does not exist: create it with key "
                           f"'{WEBHOOK_SECRET_KEY}' holding the webhook URL") from None
    encoded = (secret.get("data") or {}).get(WEBHOOK_SECRET_KEY)
    try:
        url = base64.b64decode(encoded or "", validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        url = ""
    if not url.startswith(("https://", "http://")):
        raise ClusterError(f"{where} (notifications.webhook.secret): key '{WEBHOOK_SECRET_KEY}' holds no http(s) URL")
    return url


def announce_stack(kube: k.Kube, spec: FleetSpec, stack: str, kind: EventKind, detail: str, *, holder: str,
                   occurrence: str = "", pools: Collection[str] | None = None, send: Send = post,
                   clock: Callable[[], float] = time.time) -> list[Outcome]:
    """Tell the owners of the stack's moving pools (or ``pools``) that they ``kind``, once per event: claim each on
    the train Lease of ``kube``'s cluster, send it through the stack's webhook, mark it sent (or give the claim
    back when the send failed). Nothing where the stack names no webhook. A cluster that cannot be read raises
    ClusterError; a webhook that refuses is an outcome, never an exception (telling people must not stop a
    rollout)."""
    webhook = spec.notifications.webhook if spec.notifications else None
    events = events_of(spec, stack, kind, detail, occurrence, pools) if webhook is not None else []
    if webhook is None or not events:
        return []
    record = TrainLease(kube, LEASE_NAMESPACE, LEASE_NAME, holder, Lease().durationSeconds, clock)
    url: str | None = None
    out = []
    for event in events:
        if not record.claim(event.key):
            out.append(Outcome(event, False, "announced already (another sender claimed it first)"))
            continue
        try:
            url = url or webhook_url(kube, webhook)
            send(url, payload(webhook.kind, event))
        except (WebhookError, ClusterError) as error:
            record.settle(event.key, sent=False)
            out.append(Outcome(event, False, f"not sent: {error}"))
            continue
        record.settle(event.key, sent=True)
        out.append(Outcome(event, True, "sent"))
    return out
