"""The fake API server: an in-memory store behind ``ThreadingHTTPServer`` on 127.0.0.1.

Stateful: creates, patches, deletes and evictions change what the next request sees. Deployment and
PodDisruptionBudget status are computed from the pods on every read, as the controllers would keep
them. Every request is counted by verb, and faults (429, 500, 403, slow responses) can be injected.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import threading
import time
from datetime import datetime, timezone
from collections import Counter
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
    "deployments": ("apps", "v1", True, "Deployment"),
    "daemonsets": ("apps", "v1", True, "DaemonSet"),
    "poddisruptionbudgets": ("policy", "v1", True, "PodDisruptionBudget"),
    "clusterpolicies": ("nvidia.com", "v1", False, "ClusterPolicy"),
    "nvidiadrivers": ("nvidia.com", "v1alpha1", False, "NVIDIADriver"),
}
WRITE_VERBS = ("create", "update", "patch", "delete")


@dataclass
class Fault:
    """Answer matching requests with ``status`` (or a slow answer for "timeout"), ``times`` times.

    ``skip`` lets that many matching requests through first (e.g. fail the 3rd patch).
    """

    status: int | str
    verb: str | None = None
    plural: str | None = None
    times: int = 1
    skip: int = 0
    retry_after: float | None = None
    delay: float = 1.0
    seen: int = field(default=0, init=False)

    def applies(self, verb: str, plural: str) -> bool:
        if (self.verb and self.verb != verb) or (self.plural and self.plural != plural) or self.times <= 0:
            return False
        self.seen += 1
        if self.seen <= self.skip:
            return False
        self.times -= 1
        return True


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


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


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        self._rv = itertools.count(1000)
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeKube:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
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

    def update(self, plural: str, name: str, patch: Obj, namespace: str = "") -> Obj:
        """Merge-patch an object behind the API's back (the operator or the kubelet acting)."""
        with self.lock:
            key = (namespace, name)
            self.store[plural][key] = self._stamp(_merge(self.store[plural][key], patch))
            return copy.deepcopy(self.store[plural][key])

    def remove(self, plural: str, name: str, namespace: str = "") -> None:
        with self.lock:
            del self.store[plural][(namespace, name)]

    # ------------------------------------------------------------ the API's behaviour

    def _stamp(self, obj: Obj) -> Obj:
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        return obj

    def _create(self, plural: str, namespace: str, obj: Obj) -> Obj:
        group, version, namespaced, kind = KINDS[plural]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.store[plural]:
            raise ApiError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind
        meta.setdefault("uid", f"uid-{next(self._rv)}")
        meta.setdefault("creationTimestamp", _now_iso())
        self.store[plural][key] = self._stamp(obj)
        return copy.deepcopy(obj)

    def _matching_pods(self, namespace: str, selector: Obj | None) -> list[Obj]:
        return [
            p for (ns, _), p in self.store["pods"].items()
            if ns == namespace and matches_selector_object(selector, p["metadata"].get("labels") or {})
        ]

    def _computed(self, plural: str, obj: Obj) -> Obj:
        """Status the controllers keep: Deployment replicas and PDB disruptions, from the pods now."""
        namespace = obj["metadata"].get("namespace", "")
        if plural == "deployments":
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

    def _evict(self, namespace: str, name: str) -> Obj:
        pod = self.store["pods"].get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        labels = pod["metadata"].get("labels") or {}
        for (ns, _), pdb in self.store["poddisruptionbudgets"].items():
            if ns != namespace or not matches_selector_object(pdb["spec"].get("selector"), labels):
                continue
            status = self._computed("poddisruptionbudgets", copy.deepcopy(pdb))["status"]
            if status["disruptionsAllowed"] < 1 and pod_ready(pod):
                raise ApiError(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption budget.")
        del self.store["pods"][(namespace, name)]
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any, content_type: str) -> Obj:
        plural, namespace, name, sub = _route(path)
        if plural not in self.served:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}[method]
        with self.lock:
            self.counts[verb] += 1
            self.counts_by_resource[(verb, plural)] += 1
            if verb == "list" and query.get("continue"):
                self.pages += 1  # a continuation page of a LIST already counted once as a query
            fault = next((f for f in self.faults if f.applies(verb, plural)), None)
        if fault is not None:
            if fault.status == "timeout":
                time.sleep(fault.delay)
            else:
                raise ApiError(int(fault.status), "Injected", f"injected fault on {verb} {plural}")
        with self.lock:
            store = self.store[plural]
            if verb == "list":
                return self._list(plural, namespace, query)
            if verb == "create":
                if sub == "eviction" and plural == "pods":
                    return self._evict(namespace, name)
                return self._create(plural, namespace, body)
            key = (namespace, name)
            if key not in store:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            if verb == "get":
                return self._computed(plural, copy.deepcopy(store[key]))
            if verb == "delete":
                return store.pop(key)
            if verb == "update":
                store[key] = self._stamp(copy.deepcopy(body))
            elif "json-patch" in content_type:
                store[key] = self._stamp(_json_patch(store[key], body))
            else:
                store[key] = self._stamp(_merge(store[key], body))
            return self._computed(plural, copy.deepcopy(store[key]))

    def _list(self, plural: str, namespace: str, query: dict[str, list[str]]) -> Obj:
        try:
            by_label = label_selector(query.get("labelSelector", [""])[0])
            by_field = field_selector(query.get("fieldSelector", [""])[0])
        except ValueError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        # Selectors read the stored objects (computed status is not selectable); only the page is copied.
        items = [
            o for (ns, _), o in sorted(self.store[plural].items())
            if (not namespace or ns == namespace) and by_label(o["metadata"].get("labels") or {}) and by_field(o)
        ]
        start = int(base64.b64decode(query["continue"][0]).decode()) if query.get("continue") else 0
        limit = int(query.get("limit", ["0"])[0]) or len(items) or 1
        page = [self._computed(plural, copy.deepcopy(o)) for o in items[start:start + limit]]
        meta: Obj = {"resourceVersion": str(next(self._rv))}
        if start + limit < len(items):
            meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
        group, version, _, kind = KINDS[plural]
        return {"apiVersion": f"{group}/{version}" if group else version, "kind": f"{kind}List",
                "metadata": meta, "items": page}


def _route(path: str) -> tuple[str, str, str, str]:
    """(plural, namespace, name, subresource) of an API path."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = ""
    if len(parts) >= 2 and parts[0] == "namespaces":
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
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        extra: dict[str, str] = {}
        try:
            body = json.loads(raw) if raw else None
            result = self.fake.handle(self.command, url.path, parse_qs(url.query), body,
                                      self.headers.get("Content-Type") or "")
            code = 201 if self.command == "POST" else 200
        except ApiError as exc:
            code = exc.code
            result = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": exc.message,
                      "reason": exc.reason, "code": exc.code}
            fault = next((f for f in self.fake.faults if f.retry_after is not None), None)
            if code == 429 and fault is not None:
                extra["Retry-After"] = str(fault.retry_after)
        payload = json.dumps(result).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and hung up

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
