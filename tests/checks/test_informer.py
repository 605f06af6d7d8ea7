"""The watch protocol, as the guard uses it (checks/kube.py ``Kube.watch``, checks/informer.py), against the fake API
server, which keeps the real server's rules: resourceVersion, bookmarks, 410 Gone on a version it no longer keeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from checks import kube as k
from checks.informer import Informer
from tests.fakekube.server import FakeKube


def node(name: str, **node_labels: str) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": node_labels}}


def wait_for(condition: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    """Until ``condition`` holds; fails naming ``what`` after ``limit`` seconds (a hang, never a timing verdict)."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.01)


def test_a_watch_streams_each_change_after_the_lists_version(fake: FakeKube, kube: k.Kube) -> None:
    fake.add(node("a", pool="x"))
    items, version = kube.list_at(k.NODES)
    assert [i["metadata"]["name"] for i in items] == ["a"] and version
    fake.update("nodes", "a", {"metadata": {"labels": {"state": "upgrade-failed"}}})
    fake.add(node("b"))
    fake.remove("nodes", "b")
    seen = [(kind, obj["metadata"].get("name")) for kind, obj in kube.watch(k.NODES, version, timeout_seconds=0)]
    assert seen == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")]


def test_a_selector_turns_leaving_and_joining_into_deleted_and_added(fake: FakeKube, kube: k.Kube) -> None:
    fake.add(node("a", pool="x"))
    _, version = kube.list_at(k.NODES, label_selector="pool=x")
    fake.update("nodes", "a", {"metadata": {"labels": {"pool": "y"}}})
    fake.update("nodes", "a", {"metadata": {"labels": {"pool": "x"}}})
    seen = [kind for kind, _ in kube.watch(k.NODES, version, label_selector="pool=x", timeout_seconds=0)]
    assert seen == ["DELETED", "ADDED"]


def test_a_version_the_server_no_longer_keeps_is_410_gone(fake: FakeKube, kube: k.Kube) -> None:
    fake.add(node("a"))
    _, version = kube.list_at(k.NODES)
    fake.update("nodes", "a", {"metadata": {"labels": {"x": "1"}}})
    fake.compact()
    with pytest.raises(k.Expired, match="too old resource version"):
        list(kube.watch(k.NODES, version, timeout_seconds=0))


def test_bookmarks_move_the_version_on_while_nothing_changes(fake: FakeKube, kube: k.Kube) -> None:
    fake.bookmark_interval = 0.05
    fake.add(node("a"))
    _, version = kube.list_at(k.NODES)
    fake.add({"kind": "ConfigMap", "metadata": {"name": "other", "namespace": "kube-system"}})  # another kind moves on
    marks = [obj for kind, obj in kube.watch(k.NODES, version, timeout_seconds=1) if kind == "BOOKMARK"]
    assert marks and int(marks[-1]["metadata"]["resourceVersion"]) >= fake.last_rv > int(version)


def test_the_informer_follows_reconnects_from_its_version_and_relists_after_410(fake: FakeKube,
                                                                               kube: k.Kube) -> None:
    fake.bookmark_interval = 0.05
    fake.add(node("a"))
    changes = []
    informer = Informer(kube, k.NODES, on_change=lambda: changes.append(1), timeout_seconds=30)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: informer.live and fake.watching == 1, "the informer listed and watches")
        fake.update("nodes", "a", {"metadata": {"labels": {"state": "upgrade-failed"}}})
        wait_for(lambda: informer.objects[("", "a")]["metadata"]["labels"].get("state") == "upgrade-failed",
                 "the change arrived")
        # A restarted API server: the stream ends and is opened again from the version seen, with no LIST.
        fake.drop_watches()
        fake.add(node("b"))
        wait_for(lambda: ("", "b") in informer.objects, "the node added while reconnecting arrived")
        assert informer.lists == 1 and fake.counts["list"] == 1
        # Compaction past the informer's version (no bookmark moved it on): the server answers 410 Gone when the
        # stream is opened again, and the informer lists afresh.
        fake.bookmark_interval = 3600
        opened = fake.counts["watch"]
        fake.drop_watches()
        wait_for(lambda: fake.counts["watch"] > opened, "watching again")
        fake.add({"kind": "ConfigMap", "metadata": {"name": "other", "namespace": "kube-system"}})
        fake.compact()
        fake.remove("nodes", "b")
        fake.drop_watches()
        wait_for(lambda: informer.lists == 2, "listed again after 410 Gone")
        wait_for(lambda: ("", "b") not in informer.objects, "the relist replaced the objects")
    finally:
        stop.set()
        fake.drop_watches()
        thread.join(10)
    assert changes


def test_an_optional_kind_that_is_not_served_is_no_failure(fake: FakeKube, kube: k.Kube) -> None:
    fake.served.discard("nvidiadrivers")
    informer = Informer(kube, k.NVIDIA_DRIVERS, optional=True)
    informer.relist()
    assert informer.values() == [] and not informer.served and informer.live


def test_a_watch_the_identity_may_not_open_says_which_permission(fake: FakeKube, kube: k.Kube) -> None:
    from checks.errors import AccessDeniedError
    from tests.fakekube.server import Fault

    fake.faults.append(Fault(403, "watch", "nodes"))
    with pytest.raises(AccessDeniedError, match="'watch' 'nodes' cluster-wide"):
        list(kube.watch(k.NODES, "1", timeout_seconds=0))


def test_the_informer_says_a_failure_and_watches_again(fake: FakeKube, kube: k.Kube) -> None:
    from tests.fakekube.server import Fault

    fake.add(node("a"))
    said: list[str] = []
    informer = Informer(kube, k.NODES, notify=said.append, timeout_seconds=30, backoff_cap=0.05)
    fake.faults.append(Fault(403, "watch", "nodes"))
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: said and fake.watching == 1, "the failure said, then watching again")
        assert "forbidden (403)" in said[0] and "watching again in" in said[0]
        wait_for(lambda: informer.live, "live again")
    finally:
        stop.set()
        fake.drop_watches()
        thread.join(10)


def test_in_cluster_takes_no_kubeconfig(tmp_path) -> None:
    from checks.errors import ConfigError

    with pytest.raises(ConfigError, match="--in-cluster uses the pod's ServiceAccount"):
        k.connect(str(tmp_path / "kubeconfig"), in_cluster=True)
