"""Issue 37 with issue 35: the in-cluster guard tells the model owners that their pool paused, through the same
once-per-event claim as `fleet advance`: its pause sends one message, and the deploy step announcing the same
sign afterwards sends none. The guard's Role may read that one webhook Secret and no other."""

from __future__ import annotations

import base64
import json

from announcements.announce import announce_stack
from announcements.events import EventKind
from checks import kube as k
from checks.guard import Guard
from components.guard import namespaced_roles
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from rollout.guard import tell_owners
from tests.announcements.receiver import Receiver
from tests.checks.test_guard import caught_up, t4_nodes
from tests.conftest import change, stack_config
from tests.fakekube.fixtures import move_node, seed
from tests.fakekube.server import FakeKube


def _spec() -> FleetSpec:
    """The prod example with its T4 models owned by a team and the owners' webhook named."""
    config = change(stack_config("prod"), "models", lambda models: [
        m.update(owners=["@acme/chat"]) for m in models if "gput4" in m["nodePools"]])
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": "json", "secret": "fleet-webhook"}})
    return spec_from_config(config)


def test_the_guard_s_pause_tells_the_owners_once(fake: FakeKube, kube: k.Kube, receiver: Receiver) -> None:
    spec = _spec()
    seed(fake, spec)
    fake.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fleet-webhook", "namespace": "kube-system"},
              "data": {"url": base64.b64encode(receiver.url.encode()).decode()}})
    fake.bookmark_interval = 0.05
    told: list[str] = []
    guard = Guard(kube, spec, "prod", "guard-0", lease_namespace="gpu-rollout-guard",
                  on_pause=lambda triggers: (told.append(triggers[0].subject), tell_owners(kube, spec, "prod", triggers)))
    try:
        guard.sync()
        guard.stream()
        assert guard.elect().leader
        nodes = t4_nodes(fake)
        for node in nodes:
            move_node(fake, node, "upgrade-required")
        move_node(fake, nodes[0], "upgrade-failed")
        caught_up(guard, fake)
        triggers = guard.look().triggers
    finally:
        guard.stop()
        fake.drop_watches()
    assert nodes[0] in {t.subject for t in triggers} and told == [triggers[0].subject]
    sent = [b for b in receiver.bodies if b.get("pool") == "gput4"]
    assert len(sent) == 1 and sent[0]["event"] == "paused" and "@acme/chat" in json.dumps(sent[0])
    # fleet advance, seeing the same sign later, finds it announced already.
    cause = f"{triggers[0].kind.value}: {triggers[0].message}"
    again = announce_stack(kube, spec, "prod", EventKind.PAUSED, cause, holder="fleet-advance", occurrence=cause)
    assert again and not any(o.sent for o in again) and len(receiver.bodies) == len(sent)


def test_the_guard_may_read_the_webhook_secret_and_no_other() -> None:
    rules = namespaced_roles(_spec())["kube-system"]
    secrets = [r for r in rules if r["resources"] == ["secrets"]]
    assert secrets == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["fleet-webhook"]}]
    without = namespaced_roles(spec_from_config(stack_config("prod")))["kube-system"]
    assert not [r for r in without if r["resources"] == ["secrets"]]
