"""announcements/: the owners of a pool's models are told through the stack's webhook (a loopback receiver here)
when the pool starts, pauses and finishes, once per event: two senders (the deploy step and the in-cluster guard)
race on the cluster's train Lease (the fake API server), and only the first sends. A webhook that refuses gives the
claim back; the URL is read from the Secret the stack names, never from the stack file."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from announcements.announce import announce_stack, events_of
from announcements.events import EventKind
from announcements.webhook import payload
from checks import kube as k
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import FleetSpec
from gpu_knowledge import labels
from tests.conftest import change, stack_config
from tests.announcements.receiver import Receiver
from tests.fakekube.server import FakeKube


def _spec(kind: str = "slack") -> FleetSpec:
    config = change(stack_config("prod"), "models", lambda models: [
        m.update(owners=["@acme/embeddings"]) for m in models if "gpua100" in m["nodePools"]])
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": kind, "secret": "fleet-webhook"}})
    config = change(config, "nodePools", lambda pools: [
        p["rollout"].update(released=True) for p in pools if p["name"] == "gpua100"])
    return spec_from_config(config)


def _secret(fake: FakeKube, url: str) -> None:
    fake.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fleet-webhook", "namespace": "kube-system"},
              "data": {"url": base64.b64encode(url.encode()).decode()}})


def _announced(fake: FakeKube) -> dict[str, Any]:
    lease = fake.obj("leases", LEASE_NAME, LEASE_NAMESPACE)
    return json.loads(lease["metadata"]["annotations"][labels.ANNOTATION_ANNOUNCED])


def test_a_pool_start_is_sent_once_whichever_sender_sees_it_first(fake: FakeKube, kube: k.Kube,
                                                                  receiver: Receiver) -> None:
    _secret(fake, receiver.url)
    spec = _spec()
    deploy = announce_stack(kube, spec, "prod", EventKind.STARTED, "wave 2", holder="fleet-advance-1")
    guard = announce_stack(kube, spec, "prod", EventKind.STARTED, "wave 2", holder="guard-0")
    moving = sorted(o.event.pool for o in deploy)
    assert moving == sorted(p.name for p in spec.nodePools if spec.pool_target(p).moves)
    assert all(o.sent for o in deploy) and not any(o.sent for o in guard)
    assert all(o.why.startswith("announced already") for o in guard)
    assert len(receiver.bodies) == len(moving)
    [a100] = [b["text"] for b in receiver.bodies if "pool gpua100 " in b["text"]]
    assert "started moving to driver 580.173.02: wave 2. Owners: @acme/embeddings." in a100
    assert all(entry["sent"] for entry in _announced(fake).values())


def test_each_kind_is_its_own_event_and_a_new_pause_cause_is_another(fake: FakeKube, kube: k.Kube,
                                                                     receiver: Receiver) -> None:
    _secret(fake, receiver.url)
    spec = _spec()
    for kind, detail in ((EventKind.STARTED, "wave 2"), (EventKind.PAUSED, "slo-breach: p99"),
                         (EventKind.PAUSED, "slo-breach: p99"), (EventKind.FINISHED, "complete")):
        announce_stack(kube, spec, "prod", kind, detail, holder="guard-0", occurrence=detail,
                       pools=["gpua100"])
    announce_stack(kube, spec, "prod", EventKind.PAUSED, "verify failed", holder="guard-0",
                   occurrence="verify failed", pools=["gpua100"])
    kinds = [b["text"].split(" (cluster inference-weu-1) ")[1].split(" ")[0] for b in receiver.bodies]
    assert kinds == ["started", "paused", "finished", "paused"]


def test_a_refusing_webhook_gives_the_claim_back_so_the_next_sender_sends(fake: FakeKube, kube: k.Kube,
                                                                          receiver: Receiver) -> None:
    _secret(fake, receiver.url)
    spec = _spec()
    receiver.status = 500
    [refused] = announce_stack(kube, spec, "prod", EventKind.STARTED, "wave 2", holder="a", pools=["gpua100"])
    assert not refused.sent and "HTTP 500" in refused.why and receiver.url not in refused.why
    assert _announced(fake) == {}
    receiver.status = 200
    [sent] = announce_stack(kube, spec, "prod", EventKind.STARTED, "wave 2", holder="b", pools=["gpua100"])
    assert sent.sent and len(receiver.bodies) == 1


def test_a_missing_secret_is_not_sent_and_says_how_to_create_it(fake: FakeKube, kube: k.Kube) -> None:
    [outcome] = announce_stack(kube, _spec(), "prod", EventKind.STARTED, "wave 2", holder="a", pools=["gpua100"])
    assert not outcome.sent and "kube-system/fleet-webhook" in outcome.why and "does not exist" in outcome.why
    assert _announced(fake) == {}


def test_a_stack_without_a_webhook_tells_no_one(fake: FakeKube, kube: k.Kube) -> None:
    spec = spec_from_config(stack_config("prod"))
    assert announce_stack(kube, spec, "prod", EventKind.STARTED, "wave 2", holder="a") == []
    assert fake.counts["create"] == 0


@pytest.mark.parametrize("kind", ["slack", "teams", "json"])
def test_each_webhook_kind_gets_its_own_shape(kind: str) -> None:
    [event] = events_of(_spec(kind), "prod", EventKind.PAUSED, "slo-breach", pools=["gpua100"])
    body = payload(kind, event)
    if kind == "slack":
        assert body == {"text": event.text()}
    elif kind == "teams":
        card = body["attachments"][0]
        assert body["type"] == "message" and card["contentType"] == "application/vnd.microsoft.card.adaptive"
        assert card["content"]["body"][0]["text"] == event.text()
    else:
        assert body["event"] == "paused" and body["pool"] == "gpua100" and body["owners"] == ["@acme/embeddings"]


def test_a_bad_webhook_is_refused_at_its_key() -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": "discord"}})
    with pytest.raises(SpecError, match="notifications.webhook.kind"):
        spec_from_config(config)
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": "slack", "secret": "Bad_Name"}})
    with pytest.raises(SpecError, match="notifications.webhook.secret"):
        spec_from_config(config)
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": "slack", "url": "hooks.slack.com"}})
    with pytest.raises(SpecError, match="notifications.webhook.url"):
        spec_from_config(config)

