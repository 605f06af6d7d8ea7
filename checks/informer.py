"""A kind's objects kept current through the Kubernetes watch API, as the guard holds them (:mod:`checks.guard`).

One LIST (paginated, slim records: :mod:`checks.slim`) gives the objects and the version they were read at; a watch
from that version then streams each change, and ``BOOKMARK`` events move the version on while nothing changes. A
stream that ends (its ``timeoutSeconds``, a restarted API server) is opened again from the last version seen, so
nothing is missed and nothing is listed again; a version the server no longer keeps (410 Gone) is listed afresh,
replacing every object. A failure is retried with a capped backoff and said through ``notify``; ``live`` is false
from a failure until the next successful open, so `/healthz` tells a guard that sees nothing from one that sees.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from checks import kube as k
from checks.errors import ClusterError, NotFoundError
from checks.objects import Obj, meta

Key = tuple[str, str]  # (namespace, name)


@dataclass
class Informer:
    """The objects of one kind (optionally one namespace and selectors), by (namespace, name)."""

    kube: k.Kube
    resource: k.Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    optional: bool = False  # a CRD that may not be installed: no objects, and that is no failure
    on_change: Callable[[], None] = lambda: None  # after any change to the objects (from the informer's thread)
    notify: Callable[[str], None] = lambda line: None
    timeout_seconds: int = 300  # each watch stream's; the server closes it then and it is opened again
    backoff_cap: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    objects: dict[Key, Obj] = field(default_factory=dict)
    version: str = ""  # the last resourceVersion seen: where the next watch starts
    live: bool = False  # listed, and the last watch opened without error
    served: bool = True  # False: the kind is not served (an optional CRD)
    lists: int = 0  # LISTs made (the first, then one per 410 Gone)
    failures: int = 0  # consecutive failures

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def values(self) -> list[Obj]:
        with self._lock:
            return list(self.objects.values())

    def relist(self) -> None:
        """List every object afresh and start watching from the list's version."""
        try:
            items, version = self.kube.list_at(self.resource, self.namespace, self.label_selector, self.field_selector)
            self.served = True
        except NotFoundError:
            if not self.optional:
                raise
            items, version, self.served = [], "", False
        with self._lock:
            self.objects = {_key(o): o for o in items}
            self.version = version
        self.lists += 1
        self.live, self.failures = True, 0
        self.on_change()

    def apply(self, kind: str, obj: Obj) -> bool:
        """One watch event; True when it changed the objects."""
        version = str(meta(obj).get("resourceVersion") or "")
        if version:
            self.version = version
        if kind == "BOOKMARK":
            return False
        with self._lock:
            if kind == "DELETED":
                self.objects.pop(_key(obj), None)
            elif kind in ("ADDED", "MODIFIED"):
                self.objects[_key(obj)] = obj
            else:
                return False
        return True

    def stream_once(self) -> None:
        """One watch stream, to its end; lists first when there is no version yet or the server dropped ours."""
        if not self.lists:
            self.relist()
        if not self.served:
            self.live = True
            self.sleep(float(self.timeout_seconds))  # not installed: look again now and then
            self.lists = 0
            return
        try:
            events = self.kube.watch(self.resource, self.version, self.namespace, self.label_selector,
                                     self.field_selector, self.timeout_seconds)
            first = True
            for kind, obj in events:
                if first:
                    self.live, self.failures, first = True, 0, False
                if self.apply(kind, obj):
                    self.on_change()
            self.live, self.failures = True, 0  # ended cleanly: the server's timeout
        except k.Expired as gone:
            self.notify(f"{self.resource.kind_name}: {gone}; listing again")
            self.relist()

    def run(self, stop: threading.Event) -> None:
        """Stream until ``stop``; every failure is said, waited out (capped backoff) and retried."""
        while not stop.is_set():
            try:
                self.stream_once()
            except ClusterError as error:
                self.live = False
                self.failures += 1
                delay = min(self.backoff_cap, 0.5 * 2 ** min(self.failures, 8))
                self.notify(f"{self.resource.kind_name}: {error}; watching again in {delay:.0f} s")
                stop.wait(delay)


def _key(obj: Obj) -> Key:
    metadata = meta(obj)
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
