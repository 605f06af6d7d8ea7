"""`fleet advance` tells the model owners through the stack's webhook (a loopback receiver) when it brings a stack's
pools up (started) and when their rollout is complete (finished), once per event across runs; the event is claimed
on the stack's cluster's train Lease, where the in-cluster guard claims it too."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from gpu_knowledge import labels
from tests.announcements.receiver import Receiver, receiver  # noqa: F401 - the loopback webhook
from tests.rollout.gitrepo import GitRepo
from tests.rollout.test_fleet_verbs import CANARY, World, clusters, repo, world  # noqa: F401 - the fleet's world


@pytest.fixture
def told(repo: GitRepo, receiver: Receiver) -> GitRepo:  # noqa: F811
    path = repo.root / f"Pulumi.{CANARY}.yaml"
    document = yaml.safe_load(path.read_text())
    config = document["config"]
    config["gpu-driver-upgrade:notifications"] = {"webhook": {"kind": "json"}}
    for model in config["gpu-driver-upgrade:models"]:
        model["owners"] = ["@acme/serving"]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    repo.commit("the canary's owners are told through a webhook")
    return repo


def test_advance_announces_each_pool_start_and_finish_once(told: GitRepo, world: World,  # noqa: F811
                                                           receiver: Receiver,  # noqa: F811
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    world.fakes[CANARY].add({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "gpu-driver-upgrade-webhook", "namespace": "kube-system"},
        "data": {"url": base64.b64encode(receiver.url.encode()).decode()}})
    world.advance(capsys)
    assert world.backend.upped() == [CANARY]
    started = [b for b in receiver.bodies if b["event"] == "started"]
    assert started and {b["stack"] for b in started} == {CANARY}
    assert all("wave canary" in b["detail"] for b in started), started
    assert any(b["owners"] == ["@acme/serving"] for b in started), started

    world.advance(capsys)  # the canary rolls out: nothing new to tell
    assert len(receiver.bodies) == len(started)

    world.upgrade(CANARY)
    world.advance(capsys)
    world.advance(capsys)
    finished = [b for b in receiver.bodies if b["event"] == "finished"]
    assert sorted(b["pool"] for b in finished) == sorted(b["pool"] for b in started)
    assert len(receiver.bodies) == 2 * len(started)
    lease = world.fakes[CANARY].obj("leases", LEASE_NAME, LEASE_NAMESPACE)
    record = json.loads(lease["metadata"]["annotations"][labels.ANNOTATION_ANNOUNCED])
    assert len(record) == len(receiver.bodies) and all(e["sent"] for e in record.values())


def test_a_missing_webhook_secret_is_said_and_changes_no_outcome(told: GitRepo, world: World,  # noqa: F811
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = world.advance(capsys)
    assert world.backend.upped() == [CANARY] and [u["ok"] for u in doc["ups"]] == [True]
    assert "the owners were not sent: Secret kube-system/gpu-driver-upgrade-webhook" in err
    assert int(code) == 0
