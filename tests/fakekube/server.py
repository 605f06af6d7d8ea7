"""The fake API server: an in-memory store behind ``ThreadingHTTPServer`` on 127.0.0.1.

Stateful: creates, patches, deletes and evictions change what the next request sees. Deployment and
PodDisruptionBudget status are computed from the pods on every read, as the controllers would keep
them. Every request is counted by verb, and faults (429, 500, 403, slow responses) can be injected.

Where the real API server has rules our code could trip over, the fake keeps them:

- field selectors: only the fields each kind supports (``FIELD_SELECTORS``), else 400;
- PATCH content types: merge and JSON patch for every kind, strategic merge for built-in kinds only,
  anything else (plain ``application/json`` included) 415;
- paginated LISTs are served from a snapshot taken by the first page, so pages never splice two
  states; ``compact()`` (etcd compaction) expires every outstanding continue token with 410;
- an injected fault answers with its own ``Retry-After``;
- eviction follows the policy/v1 eviction REST: terminal, Pending and deleting pods bypass PDBs, an
  unready pod may go when its budget is healthy (or ``unhealthyPodEvictionPolicy: AlwaysAllow``),
  otherwise ``disruptionsAllowed`` (from healthy pods) must be above 0 (429), and a pod under more
  than one PDB cannot be evicted (500);
- Deployment and StatefulSet status (replicas, ready, available) come from the pods their selector matches;
- writes record ``metadata.managedFields`` for labels and annotations (manager from ``fieldManager``
  or the User-Agent, ``time`` of the manager's last change), the only fields the checks read there;
- the watch protocol (``?watch=true``): every write has a ``resourceVersion`` from one counter, a LIST answers the
  version it was taken at, and a watch from a version streams each change after it (ADDED, MODIFIED, DELETED; an
  object that stops or starts matching the selectors is DELETED or ADDED), ``BOOKMARK`` events every
  ``bookmark_interval`` seconds where ``allowWatchBookmarks`` asks, and ends at ``timeoutSeconds``; a version older
  than the changes kept (``history_size``, or ``compact()``) is answered with an ERROR event carrying 410 Gone, as
  the real server does, so the client lists again. ``drop_watches()`` ends every open stream (a restarted server).
"""

from __future__ import annotations

import base64
import bisect
import copy
import itertools
import json
import threading
import time
import uuid
from datetime import datetime, timezone
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakekube.selectors import field_selector, label_selector, matches_selector_object

Obj = dict[str, Any]

# plural -> (group, version, namespaced, kind)
KINDS: dict[str, tuple[str, str, bool, str]] = {
    "nodes": ("", "v1", False, "Node"),
    "pods": ("", "v1", True, "Pod"),
    "events": ("", "v1", True, "Event"),
    "configmaps": ("", "v1", True, "ConfigMap"),
    "secrets": ("", "v1", True, "Secret"),  # the webhook URL (announcements/), the GPU Operator's image pull secrets
    "deployments": ("apps", "v1", True, "Deployment"),
    "statefulsets": ("apps", "v1", True, "StatefulSet"),
    "daemonsets": ("apps", "v1", True, "DaemonSet"),
    "poddisruptionbudgets": ("policy", "v1", True, "PodDisruptionBudget"),
    "clusterpolicies": ("nvidia.com", "v1", False, "ClusterPolicy"),
    "nvidiadrivers": ("nvidia.com", "v1alpha1", False, "NVIDIADriver"),
    "leases": ("coordination.k8s.io", "v1", True, "Lease"),
    "namespaces": ("", "v1", False, "Namespace"),  # only kube-system, whose uid names the cluster
}
WRITE_VERBS = ("create", "update", "patch", "delete")
BUILTIN = {plural for plural, (group, *_rest) in KINDS.items() if group in ("", "apps", "policy")}

_COMMON = {"metadata.name", "metadata.namespace"}
# Field selectors the API server supports per kind (pkg/registry/*/strategy.go GetAttrs / ToSelectableFields);
# custom resources get metadata.name, plus metadata.namespace when namespaced.
FIELD_SELECTORS: dict[str, set[str]] = {
    "nodes": {"metadata.name", "spec.unschedulable"},
    "pods": _COMMON | {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                       "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
    "events": _COMMON | {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                         "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                         "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
    "configmaps": set(_COMMON),
    "secrets": set(_COMMON),
    "deployments": set(_COMMON),
    "statefulsets": set(_COMMON),
    "daemonsets": set(_COMMON),
    "poddisruptionbudgets": set(_COMMON),
    "clusterpolicies": {"metadata.name"},
    "nvidiadrivers": {"metadata.name"},
    "leases": set(_COMMON),
    "namespaces": {"metadata.name", "status.phase"},
}
# Where a selectable field lives in the object, and its value when the object leaves it unset.
FIELD_PATHS = {"source": "source.component"}
FIELD_DEFAULTS = {"spec.unschedulable": "false", "spec.hostNetwork": "false"}

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
# patchMergeKey of the list fields our objects carry (k8s.io/api struct tags).
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
              "env": "name", "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
              "taints": "key", "imagePullSecrets": "name"}
EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a "
           "new list without the continue parameter.")


@dataclass
class Fault:
    """Answer matching requests with ``status`` (or a slow answer for "timeout"), ``times`` times.

    ``skip`` lets that many matching requests through first (e.g. fail the 3rd patch). Status 200 answers
    ``body`` instead of the object (a server, proxy or webhook that sends something else).
    """

    status: int | str
    verb: str | None = None
    plural: str | None = None
    times: int = 1
    skip: int = 0
    retry_after: float | None = None
    delay: float = 1.0
    body: Any = None
    seen: int = field(default=0, init=False)

    def applies(self, verb: str, plural: str) -> bool:
        if (self.verb and self.verb != verb) or (self.plural and self.plural != plural) or self.times <= 0:
            return False
        self.seen += 1
        if self.seen <= self.skip:
            return False
        self.times -= 1
        return True


@dataclass(frozen=True)
class Passthrough:
    """An answer sent as it is (status, body, content type), as the API server's proxies pass a backend's answer."""

    status: int
    body: bytes
    content_type: str = "application/json"


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.retry_after = code, reason, message, retry_after


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch (labels and annotations merge the same way under strategic merge)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items()
                if k not in ("$patch", "$retainKeys") and not k.startswith("$setElementOrder/")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return copy.deepcopy(value)


def _strategic(target: Any, patch: Any) -> Any:
    """Strategic merge patch, the part built-in kinds use: maps merge, lists with a patchMergeKey merge by
    that key (``$patch: delete`` removes an element), other lists are replaced, null deletes."""
    if not isinstance(patch, dict):
        return _strip_directives(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key) or [], value, MERGE_KEYS[key])
        else:
            result[key] = _strategic(result.get(key), value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError(422, "Invalid", f"map: {item!r} does not contain declared merge key: {merge_key}")
        index = next((i for i, old in enumerate(out) if isinstance(old, dict) and old.get(merge_key) == item[merge_key]),
                     None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(_strip_directives(item))
        else:
            out[index] = _strategic(out[index], item)
    return out


def _iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_iso() -> str:
    return _iso()


def _owns_any(fields: Any) -> bool:
    return isinstance(fields, dict) and any(k.startswith("f:") or _owns_any(v) for k, v in fields.items())


def track_fields(old: Obj | None, new: Obj, manager: str, at: float | None = None, operation: str = "Update") -> None:
    """Record in ``new``'s managedFields that ``manager`` set the labels/annotations it changed, at ``at``.

    As the API server does: changed fields move to this manager's entry (from whoever owned them), the
    entry's ``time`` is set to now, and entries left owning nothing are dropped.
    """
    changed = []
    for section in ("labels", "annotations"):
        before = ((old or {}).get("metadata") or {}).get(section) or {}
        after = (new.get("metadata") or {}).get(section) or {}
        changed += [(section, key, key in after) for key in set(before) | set(after) if before.get(key) != after.get(key)]
    if not changed:
        return
    entries = copy.deepcopy((new.get("metadata") or {}).get("managedFields") or [])
    for entry in entries:
        fields = (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        for section, key, _ in changed:
            (fields.get(f"f:{section}") or {}).pop(f"f:{key}", None)
    mine = next((e for e in entries if e.get("manager") == manager and e.get("operation") == operation), None)
    if mine is None:
        mine = {"manager": manager, "operation": operation, "apiVersion": new.get("apiVersion", "v1"),
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}
        entries.append(mine)
    owned = mine["fieldsV1"].setdefault("f:metadata", {})
    for section, key, present in changed:
        if present:
            owned.setdefault(f"f:{section}", {})[f"f:{key}"] = {}
    mine["time"] = _iso(at)
    new.setdefault("metadata", {})["managedFields"] = [e for e in entries if _owns_any(e.get("fieldsV1"))]


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _json_patch(obj: Obj, ops: list[Obj]) -> Obj:
    doc = copy.deepcopy(obj)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        kind = op["op"]
        if kind == "test" and parent.get(last) != op["value"]:
            raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        if kind in ("add", "replace"):
            if kind == "replace" and last not in parent:
                raise ApiError(422, "Invalid", f"replace of missing path {op['path']}")
            parent[last] = op["value"]
        elif kind == "remove":
            if last not in parent:
                raise ApiError(422, "Invalid", f"remove of missing path {op['path']}")
            del parent[last]
    return doc


def pod_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return -(-int(value[:-1]) * total // 100)  # minAvailable percentages round up
    return int(value)


class FakeKube:
    """The store plus the HTTP server. Use as a context manager; ``url`` is the API endpoint."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.store: dict[str, dict[tuple[str, str], Obj]] = {plural: {} for plural in KINDS}
        self.served = set(KINDS)  # remove a CRD plural to act as if it were not installed
        self.counts: Counter[str] = Counter()
        self.counts_by_resource: Counter[tuple[str, str]] = Counter()
        self.faults: list[Fault] = []
        self.pages = 0
        # Called with (verb, plural, query) before each request is served: a test playing the cluster
        # between two requests (a write, a compaction).
        self.hooks: list[Any] = []
        self._snapshots: OrderedDict[str, list[Obj]] = OrderedDict()  # continue snapshots, oldest first
        self.max_snapshots = 64
        self._rv = itertools.count(1000)
        self.last_rv = 999  # the newest version written (a watch's bookmark names it)
        # The watch protocol: every change since ``floor``, oldest first, as (version, plural, type, before, after).
        self.history: list[tuple[int, str, str, Obj | None, Obj | None]] = []
        self.history_size = 50_000
        self.floor = 0  # a watch from a version below this is answered 410 Gone
        self.bookmark_interval = 1.0
        self.changed = threading.Condition(self.lock)
        self._generation = 0  # drop_watches() moves it: every open stream ends
        self.watching = 0  # streams open now
        self._server: ThreadingHTTPServer | None = None
        # Every cluster has kube-system; its uid is the API server's, one per cluster (verify attests it).
        self.store["namespaces"][("", "kube-system")] = {
            "apiVersion": "v1", "kind": "Namespace", "status": {"phase": "Active"},
            "metadata": {"name": "kube-system", "uid": str(uuid.uuid4()), "resourceVersion": "1"}}

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeKube:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, context: str = "fake") -> Path:
        """A kubeconfig pointing at this server, so tests go through the real kubeconfig loader."""
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester"}}],
        }
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    # ------------------------------------------------------------ counters

    @property
    def writes(self) -> int:
        return sum(self.counts[v] for v in WRITE_VERBS)

    def reset_counts(self) -> None:
        with self.lock:
            self.counts.clear()
            self.counts_by_resource.clear()

    # ------------------------------------------------------------ direct store access for tests

    def add(self, obj: Obj) -> Obj:
        with self.lock:
            plural = next(p for p, k in KINDS.items() if k[3] == obj["kind"])
            return self._create(plural, obj.get("metadata", {}).get("namespace", ""), obj)

    def obj(self, plural: str, name: str, namespace: str = "") -> Obj:
        with self.lock:
            return self._computed(plural, copy.deepcopy(self.store[plural][(namespace, name)]))

    def objects(self, plural: str) -> list[Obj]:
        with self.lock:
            return [self._computed(plural, copy.deepcopy(o)) for _, o in sorted(self.store[plural].items())]

    def update(self, plural: str, name: str, patch: Obj, namespace: str = "", manager: str | None = None,
               at: float | None = None) -> Obj:
        """Merge-patch an object behind the API's back (the operator or the kubelet acting).

        With ``manager``, managedFields record that manager changing the labels/annotations at ``at``.
        """
        with self.lock:
            key = (namespace, name)
            old = self.store[plural][key]
            new = _merge(old, patch)
            if manager:
                track_fields(old, new, manager, at)
            self.store[plural][key] = self._stamp(new)
            self._changed(plural, "MODIFIED", old, new)
            return copy.deepcopy(self.store[plural][key])

    def remove(self, plural: str, name: str, namespace: str = "") -> None:
        with self.lock:
            old = self.store[plural].pop((namespace, name))
            self._changed(plural, "DELETED", old, None)

    # ------------------------------------------------------------ the API's behaviour

    def _stamp(self, obj: Obj) -> Obj:
        # A fresh metadata dict: list snapshots may still hold the previous version of the object.
        self.last_rv = next(self._rv)
        obj["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(self.last_rv)}
        return obj

    def _changed(self, plural: str, kind: str, before: Obj | None, after: Obj | None) -> None:
        """Keep a write for the watches (``after`` is the stored object, stamped; a delete takes a version of its own)."""
        if kind == "DELETED":
            self.last_rv = next(self._rv)
        if len(self.history) >= self.history_size:
            cut = len(self.history) // 2
            self.floor = self.history[cut - 1][0]
            del self.history[:cut]
        self.history.append((self.last_rv, plural, kind, before, after))
        self.changed.notify_all()

    def compact(self) -> None:
        """What etcd compaction does: every continue token handed out expires (410), and so does a watch from a
        version before now."""
        with self.lock:
            self._snapshots.clear()
            self.floor = self.last_rv
            self.history.clear()

    def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart does (clients watch again from their version)."""
        with self.lock:
            self._generation += 1
            self.changed.notify_all()

    def _create(self, plural: str, namespace: str, obj: Obj, manager: str | None = None) -> Obj:
        group, version, namespaced, kind = KINDS[plural]
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of a create must be an object")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise ApiError(422, "Invalid", f"{kind}: metadata.name: Required value: name or generateName is required")
        if namespaced and namespace and meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                           "sent on the request")
        if namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.store[plural]:
            raise ApiError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind
        meta.setdefault("uid", f"uid-{next(self._rv)}")
        meta.setdefault("creationTimestamp", _now_iso())
        if manager:
            track_fields(None, obj, manager)
        self.store[plural][key] = self._stamp(obj)
        self._changed(plural, "ADDED", None, obj)
        return copy.deepcopy(self.store[plural][key])

    def _matching_pods(self, namespace: str, selector: Obj | None) -> list[Obj]:
        if selector is None:
            return []  # policy/v1: a null selector selects nothing ({} selects every pod of the namespace)
        return [
            p for (ns, _), p in self.store["pods"].items()
            if ns == namespace and matches_selector_object(selector, p["metadata"].get("labels") or {})
        ]

    def _computed(self, plural: str, obj: Obj) -> Obj:
        """Status the controllers keep: Deployment replicas and PDB disruptions, from the pods now."""
        namespace = obj["metadata"].get("namespace", "")
        if plural in ("deployments", "statefulsets"):
            pods = self._matching_pods(namespace, obj["spec"].get("selector"))
            ready = sum(pod_ready(p) for p in pods)
            obj["status"] = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
                             "updatedReplicas": len(pods), "observedGeneration": 1}
        elif plural == "poddisruptionbudgets":
            spec = obj["spec"]
            pods = self._matching_pods(namespace, spec.get("selector"))
            healthy = sum(pod_ready(p) for p in pods)
            if "maxUnavailable" in spec:
                desired = max(0, len(pods) - _scaled(spec["maxUnavailable"], len(pods)))
            else:
                desired = _scaled(spec.get("minAvailable", 0), len(pods))
            obj["status"] = {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": len(pods),
                             "disruptionsAllowed": max(0, healthy - desired), "observedGeneration": 1}
        return obj

    def _pdbs_of(self, pod: Obj) -> list[Obj]:
        namespace = pod["metadata"].get("namespace", "")
        labels = pod["metadata"].get("labels") or {}
        return [pdb for (ns, _), pdb in sorted(self.store["poddisruptionbudgets"].items())
                if ns == namespace and pdb["spec"].get("selector") is not None
                and matches_selector_object(pdb["spec"]["selector"], labels)]

    def _evict(self, namespace: str, name: str, body: Any) -> Obj:
        """POST pods/{name}/eviction, as pkg/registry/core/pod/storage/eviction.go decides it."""
        pod = self.store["pods"].get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        if isinstance(body, dict) and (body.get("metadata") or {}).get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        if phase not in ("Succeeded", "Failed", "Pending") and not deleting:
            pdbs = self._pdbs_of(pod)
            if len(pdbs) > 1:
                raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                               "eviction subresource does not support.")
            if pdbs:
                pdb = pdbs[0]
                status = self._computed("poddisruptionbudgets", copy.deepcopy(pdb))["status"]
                always = pdb["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                healthy_budget = status["currentHealthy"] >= status["desiredHealthy"] and status["desiredHealthy"] > 0
                if not (not pod_ready(pod) and (always or healthy_budget)) and status["disruptionsAllowed"] <= 0:
                    raise ApiError(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.")
        self._changed("pods", "DELETED", self.store["pods"].pop((namespace, name)), None)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _patch(self, plural: str, current: Obj, body: Any, content_type: str) -> Obj:
        media = content_type.split(";", 1)[0].strip().lower()
        if media == JSON_PATCH:
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "a JSON patch is a list of operations")
            return _json_patch(current, body)
        if media == MERGE:
            return _merge(current, body)
        if media == STRATEGIC and plural in BUILTIN:
            return _strategic(current, body)
        accepted = [JSON_PATCH, MERGE] + ([STRATEGIC] if plural in BUILTIN else [])
        raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted "
                       f"media types include: {', '.join(accepted)}")

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any, content_type: str,
               user_agent: str = "") -> Obj:
        plural, namespace, name, sub = _route(path)
        manager = query.get("fieldManager", [""])[0] or user_agent.split("/", 1)[0] or "unknown"
        if plural not in self.served:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}[method]
        with self.lock:
            self.counts[verb] += 1
            self.counts_by_resource[(verb, plural)] += 1
            if verb == "list" and query.get("continue"):
                self.pages += 1  # a continuation page of a LIST already counted once as a query
            for hook in list(self.hooks):
                hook(verb, plural, query)
            fault = next((f for f in self.faults if f.applies(verb, plural)), None)
        if fault is not None:
            if fault.status == "timeout":
                time.sleep(fault.delay)
            elif fault.status == 200:
                return fault.body
            else:
                raise ApiError(int(fault.status), "Injected", f"injected fault on {verb} {plural}", fault.retry_after)
        with self.lock:
            store = self.store[plural]
            if verb == "list":
                return self._list(plural, namespace, query)
            if verb == "create":
                if sub == "eviction" and plural == "pods":
                    return self._evict(namespace, name, body)
                return self._create(plural, namespace, body, manager)
            key = (namespace, name)
            if key not in store:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            if verb == "get":
                return self._computed(plural, copy.deepcopy(store[key]))
            if verb == "delete":
                gone = store.pop(key)
                self._changed(plural, "DELETED", gone, None)
                return gone
            if verb == "update":
                # Optimistic concurrency, as the API server keeps it: a replace naming another version is refused.
                sent = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if sent and sent != store[key]["metadata"].get("resourceVersion"):
                    raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": the object '
                                   "has been modified; please apply your changes to the latest version and try again")
            new = copy.deepcopy(body) if verb == "update" else self._patch(plural, store[key], body, content_type)
            track_fields(store[key], new, manager)
            old = store[key]
            store[key] = self._stamp(new)
            self._changed(plural, "MODIFIED", old, new)
            return self._computed(plural, copy.deepcopy(store[key]))

    def watch(self, path: str, query: dict[str, list[str]], write: Any) -> None:
        """Serve one watch stream through ``write(bytes)``: one JSON event a line (see the module's docstring)."""
        plural, namespace, _name, _sub = _route(path)
        if plural not in self.served:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        try:
            by_label = label_selector(query.get("labelSelector", [""])[0])
            by_field = field_selector(query.get("fieldSelector", [""])[0], FIELD_SELECTORS[plural], FIELD_PATHS,
                                      FIELD_DEFAULTS)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        with self.lock:
            self.counts["watch"] += 1
            self.counts_by_resource[("watch", plural)] += 1
            fault = next((f for f in self.faults if f.applies("watch", plural)), None)
        if fault is not None and fault.status not in ("timeout", 200):
            raise ApiError(int(fault.status), "Injected", f"injected fault on watch {plural}", fault.retry_after)

        def selected(obj: Obj | None) -> bool:
            return obj is not None and (not namespace or obj["metadata"].get("namespace", "") == namespace) \
                and by_label(obj["metadata"].get("labels") or {}) and by_field(obj)

        def event(kind: str, obj: Obj) -> bytes:
            return json.dumps({"type": kind, "object": self._computed(plural, copy.deepcopy(obj))}).encode() + b"\n"

        bookmarks = query.get("allowWatchBookmarks", [""])[0] == "true"
        deadline = time.monotonic() + float(query.get("timeoutSeconds", ["1800"])[0] or 1800)
        with self.lock:
            generation = self._generation
            start = query.get("resourceVersion", [""])[0]
            if start in ("", "0"):  # no version: every object now, as ADDED, then what follows
                lines = [event("ADDED", o) for _, o in sorted(self.store[plural].items()) if selected(o)]
                version = self.last_rv
            else:
                lines, version = [], int(start)
            self.watching += 1
        try:
            write(b"".join(lines))
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                with self.changed:
                    if version < self.floor:
                        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                                  "reason": "Expired", "message": f"too old resource version: {version} ({self.floor})"}
                        write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
                        return
                    if generation != self._generation:
                        return
                    at = bisect.bisect_right(self.history, version, key=lambda change: change[0])
                    changes = self.history[at:]
                    if not changes:
                        now = time.monotonic()
                        if now >= deadline:
                            return
                        if bookmarks and now >= next_bookmark:
                            version = max(version, self.last_rv)
                            next_bookmark = now + self.bookmark_interval
                            mark = {"kind": KINDS[plural][3], "apiVersion": "v1",
                                    "metadata": {"resourceVersion": str(version)}}
                            lines = [json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n"]
                        else:
                            self.changed.wait(min(deadline, next_bookmark) - now if bookmarks else deadline - now)
                            continue
                    else:
                        lines = [self._watch_line(change, selected, event) for change in changes
                                 if change[1] == plural]
                        version = changes[-1][0]
                write(b"".join(lines))
        finally:
            with self.lock:
                self.watching -= 1

    @staticmethod
    def _watch_line(change: tuple[int, str, str, Obj | None, Obj | None], selected: Any, event: Any) -> bytes:
        """One change as the watch that ``selected`` filters sees it (nothing: b"")."""
        rv, _plural, kind, before, after = change
        was, now_is = selected(before), selected(after)
        if kind == "ADDED" and now_is:
            return event("ADDED", after)
        if kind == "DELETED" and was:
            gone = copy.deepcopy(before)
            gone["metadata"] = {**gone["metadata"], "resourceVersion": str(rv)}
            return event("DELETED", gone)
        if kind == "MODIFIED" and (was or now_is):
            return event("MODIFIED" if was and now_is else "ADDED" if now_is else "DELETED", after)
        return b""

    def _list(self, plural: str, namespace: str, query: dict[str, list[str]]) -> Obj:
        limit = int(query.get("limit", ["0"])[0] or 0)
        token = query.get("continue", [""])[0]
        if token:
            try:
                state = json.loads(base64.b64decode(token))
                snapshot_id, start = str(state["rv"]), int(state["start"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(400, "BadRequest", f"continue key is not valid: {exc}") from exc
            if snapshot_id not in self._snapshots:
                raise ApiError(410, "Expired", EXPIRED)
            items = self._snapshots[snapshot_id]
        else:
            try:
                by_label = label_selector(query.get("labelSelector", [""])[0])
                by_field = field_selector(query.get("fieldSelector", [""])[0], FIELD_SELECTORS[plural],
                                          FIELD_PATHS, FIELD_DEFAULTS)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", str(exc)) from exc
            # Selectors read the stored objects (computed status is not selectable); only the page is copied.
            items = [
                o for (ns, _), o in sorted(self.store[plural].items())
                if (not namespace or ns == namespace) and by_label(o["metadata"].get("labels") or {}) and by_field(o)
            ]
            self.last_rv = next(self._rv)
            snapshot_id, start = str(self.last_rv), 0
        end = start + limit if limit else len(items)
        page = [self._computed(plural, copy.deepcopy(o)) for o in items[start:end]]
        meta: Obj = {"resourceVersion": snapshot_id}
        if end < len(items):
            # Later pages come from this snapshot: the list stays consistent while the store changes.
            if snapshot_id not in self._snapshots:
                self._snapshots[snapshot_id] = items
                while len(self._snapshots) > self.max_snapshots:
                    self._snapshots.popitem(last=False)
            meta["continue"] = base64.b64encode(json.dumps({"rv": snapshot_id, "start": end}).encode()).decode()
        group, version, _, kind = KINDS[plural]
        return {"apiVersion": f"{group}/{version}" if group else version, "kind": f"{kind}List",
                "metadata": meta, "items": page}


def _route(path: str) -> tuple[str, str, str, str]:
    """(plural, namespace, name, subresource) of an API path."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = ""
    if len(parts) >= 3 and parts[0] == "namespaces":  # namespaces/<ns>/<plural>...; namespaces/<ns>: a Namespace
        namespace, parts = parts[1], parts[2:]
    plural = parts[0] if parts else ""
    name = parts[1] if len(parts) > 1 else ""
    sub = parts[2] if len(parts) > 2 else ""
    return plural, namespace, name, sub


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKube
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes; Nagle would delay the second

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if self.command == "GET" and query.get("watch", [""])[0] in ("true", "1"):
            self._watch(url.path, query)
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        extra: dict[str, str] = {}
        content_type = self.headers.get("Content-Type") or ""
        try:
            # A form (a proxied Prometheus query) is handed on as text; everything else the clients send is JSON.
            body = raw.decode() if content_type.startswith("application/x-www-form-urlencoded") else (
                json.loads(raw) if raw else None)
            result = self.fake.handle(self.command, url.path, parse_qs(url.query), body, content_type,
                                      self.headers.get("User-Agent") or "")
            code = 201 if self.command == "POST" else 200
        except ApiError as exc:
            code = exc.code
            result = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": exc.message,
                      "reason": exc.reason, "code": exc.code}
            if exc.retry_after is not None:
                extra["Retry-After"] = str(exc.retry_after)
        if isinstance(result, Passthrough):
            code, payload, kind = result.status, result.body, result.content_type
        else:
            payload, kind = json.dumps(result).encode(), "application/json"
        try:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and hung up

    def _watch(self, path: str, query: dict[str, list[str]]) -> None:
        """A watch: a 200 whose body is the stream, to the end of which the connection is closed."""
        started = False

        def write(data: bytes) -> None:
            nonlocal started
            if not started:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                started = True
            if data:
                self.wfile.write(data)
                self.wfile.flush()

        self.close_connection = True
        try:
            self.fake.watch(path, query, write)
            write(b"")
        except ApiError as exc:
            if started:
                return
            payload = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": exc.message,
                                  "reason": exc.reason, "code": exc.code}).encode()
            self.send_response(exc.code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
