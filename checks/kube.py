"""The one adapter between the checks and the Kubernetes API (official ``kubernetes`` client).

Every call is bounded (a per-request timeout, a capped number of attempts and a total deadline),
retried with exponential backoff on 429, 5xx and connection errors (never sooner than the server's
``Retry-After``; a wait that would pass the total deadline gives up instead), and
turned into :mod:`checks.errors` on failure. Lists are paginated (``limit``/``continue``) and filtered
with label and field selectors on the server, so a check makes one LIST per resource kind, never one
call per node.

Objects come back as the API's JSON (dicts, camelCase keys), the same shape for core objects and for
the operator's custom resources. We use the client for what it is good at (kubeconfig, contexts, exec
logins, TLS, auth headers, URL building) and skip its typed-model deserialization, which costs more
than the request itself on lists of thousands of pods. Responses are parsed by msgspec straight from the
bytes; a LIST of a large kind (nodes, pods, Deployments, DaemonSets, PDBs) keeps only the fields the checks
read (:mod:`checks.slim`), so 80,000 pods fit in a fraction of the memory their whole objects take.

What reaches the user is said once and plainly: a credentials plugin that fails while the kubeconfig loads stops
the verb with the plugin's own message (the client would log it and carry on unauthenticated); a server that
answers 404 with no Kubernetes status is said to be no Kubernetes API; each retry is one line through the
caller's ``notify``; urllib3's warnings (TLS verification off) never print raw. What to do is said in the
stack's cloud's words (:class:`checks.kubeconfig.Advice`).
"""

from __future__ import annotations

import builtins  # annotations inside Kube, whose method `list` shadows the builtin there
import functools
import logging
import os
import random
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote

import msgspec
import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from checks.errors import (
    AccessDeniedError,
    NotKubernetesError,
    ClusterError,
    ConfigError,
    ConflictError,
    EvictionRefusedError,
    GaveUpError,
    NotFoundError,
    PermanentError,
    RetryableError,
    TooManyRequestsError,
)
from checks import kubeconfig as kubeconfig_files
from checks import slim
from checks.objects import Obj
from gpu_knowledge import kinds


@dataclass(frozen=True)
class ClientSettings:
    """How hard the adapter tries. Tests pass small values; nothing else differs."""

    request_timeout: float = 30.0  # seconds for one HTTP request (connect + read)
    attempts: int = 5  # tries per request, the first included
    backoff_base: float = 0.5  # first retry waits about this long, doubling each time
    backoff_cap: float = 8.0  # no backoff wait is longer; a longer Retry-After is honoured up to total_timeout
    total_timeout: float = 120.0  # give up when the next wait would pass this many seconds
    page_size: int = 500  # objects per LIST page (kubectl's chunk size)


@dataclass(frozen=True)
class Resource:
    """A kind as the API addresses it (``gpu_knowledge.kinds``), or one of its subresources as RBAC names it."""

    kind: kinds.Kind
    subresource: str | None = None  # for messages only: a request names its subresource in its path
    shape: Any = None  # the fields a LIST keeps (checks.slim); None: whole objects

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        kind = self.kind
        base = f"/api/{kind.version}" if not kind.group else f"/apis/{kind.group}/{kind.version}"
        if kind.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{kind.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    @property
    def kind_name(self) -> str:
        """``plural[/subresource][.group]``, as RBAC rules and kubectl name it."""
        name = f"{self.kind.plural}/{self.subresource}" if self.subresource else self.kind.plural
        return f"{name}.{self.kind.group}" if self.kind.group else name


NODES = Resource(kinds.NODE, shape=slim.Node)
PODS = Resource(kinds.POD, shape=slim.Pod)
POD_PROXY = Resource(kinds.POD, "proxy")  # for messages: RBAC grants the proxy as this subresource
POD_EVICTION = Resource(kinds.POD, "eviction")  # RBAC: create pods/eviction
SERVICE_PROXY = Resource(kinds.SERVICE, "proxy")  # RBAC: create services/proxy (an in-cluster Prometheus)
EVENTS = Resource(kinds.EVENT)
DEPLOYMENTS = Resource(kinds.DEPLOYMENT, shape=slim.Workload)
DAEMONSETS = Resource(kinds.DAEMON_SET, shape=slim.Workload)
PDBS = Resource(kinds.POD_DISRUPTION_BUDGET, shape=slim.Budget)
CLUSTER_POLICIES = Resource(kinds.CLUSTER_POLICY)
NVIDIA_DRIVERS = Resource(kinds.NVIDIA_DRIVER)
CONFIGMAPS = Resource(kinds.CONFIG_MAP)  # only the stack's records in kube-system
LEASES = Resource(kinds.LEASE)  # only the fleet train's lease (checks/lease.py)
SECRETS = Resource(kinds.SECRET)  # only the webhook's URL (announcements/)
NAMESPACES = Resource(kinds.NAMESPACE)  # only kube-system, whose uid verify attests (checks/identity.py)
SECRETS = Resource(kinds.SECRET)  # only the operator's driver pull secrets, read by preflight (checks/registry.py)

MERGE_PATCH = "application/merge-patch+json"
FORM = "application/x-www-form-urlencoded"
_WHOLE = msgspec.json.Decoder()


@functools.cache
def _list_decoder(shape: Any) -> msgspec.json.Decoder[Any]:
    """A decoder of a LIST response that keeps only ``shape``'s fields of each item."""
    document = TypedDict(f"{shape.__name__}List", {"metadata": slim.ListMeta | None,  # type: ignore[misc]
                                                   "items": list[shape] | None}, total=False)
    return msgspec.json.Decoder(document)


class _WatchEvent(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"{}")


_EVENT = msgspec.json.Decoder(_WatchEvent)


@functools.cache
def _object_decoder(shape: Any) -> msgspec.json.Decoder[Any]:
    """A decoder of one object that keeps only ``shape``'s fields."""
    return msgspec.json.Decoder(shape)


FIELD_MANAGER = "gpu-rollout"
MAX_PLUGIN_MESSAGE = 600  # characters of a failed credentials plugin's own message quoted


class _Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: builtins.list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _client_errors() -> Iterator[builtins.list[str]]:
    """What the client logs as errors while it loads a kubeconfig: it logs a credentials plugin's failure on the
    root logger and goes on without credentials. Recorded here, so none of it prints as ``ERROR:root:``."""
    root, handler = logging.getLogger(), _Recorded()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)


def _plugin_failure(messages: builtins.list[str], config_file: str, context: str,
                    advice: kubeconfig_files.Advice) -> ConfigError:
    text = " ".join(" ".join(messages).split()).removeprefix("exec: ")
    if len(text) > MAX_PLUGIN_MESSAGE:
        text = text[:MAX_PLUGIN_MESSAGE] + "..."
    return ConfigError(f"context {context} of kubeconfig {config_file}: its credentials plugin failed ({text}); "
                       f"{advice.login}, then {advice.fix()}")


def connect(kubeconfig: str | None = None, context: str | None = None, settings: ClientSettings | None = None,
            advice: kubeconfig_files.Advice | None = None, notify: Callable[[str], None] | None = None,
            in_cluster: bool = False) -> Kube:
    """An adapter from ``kubeconfig`` (else ``KUBECONFIG``, else ~/.kube/config, else in-cluster; ``in_cluster``:
    the pod's ServiceAccount whatever else there is, as `gpu-rollout guard --in-cluster` runs) and
    ``context`` (else the kubeconfig's current context). The CLI decides which of its flags and the
    stack's ``cluster.existing`` fill these; no environment variable is read here but ``KUBECONFIG``.
    ``advice`` words what to do about a kubeconfig that does not work for the stack's cloud; ``notify``
    hears each retry and note, one line each."""
    advice = advice or kubeconfig_files.Advice()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    configuration = k8s_client.Configuration()
    where = "in-cluster service account"
    try:
        if in_cluster:
            if kubeconfig or context:
                raise ConfigError("--in-cluster uses the pod's ServiceAccount: give no --kubeconfig or --context")
            k8s_config.load_incluster_config(client_configuration=configuration)
        elif path or default.exists():
            config_file = path or str(default)
            # Refuse a broken file in one line naming it, before the client trips over it.
            context = kubeconfig_files.validate(config_file, context, advice)
            with _client_errors() as logged:
                k8s_config.load_kube_config(config_file=config_file, context=context,
                                            client_configuration=configuration)
            if logged:  # a credentials plugin failed: every request would go out unauthenticated
                raise _plugin_failure(logged, config_file, context, advice)
            where = f"context {context} of kubeconfig {config_file}"
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            if context:
                raise ConfigError(f"--context {context} needs a kubeconfig; none was found (in-cluster has none)")
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            raise ConfigError(f"no kubeconfig: {advice.fix()}; or pass --kubeconfig, set KUBECONFIG, or run inside "
                              "the cluster")
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError) as exc:
        # What the client raises on a value of the wrong type or shape in the file: the input, not a defect.
        where = path or str(default)
        raise ConfigError(f"cannot use kubeconfig {where}" + (f" context {context}" if context else "")
                          + f": {' '.join(str(exc).split()) or type(exc).__name__}") from None
    # Retries are ours (bounded, each said through notify); urllib3's own would multiply the attempts.
    configuration.retries = False
    adapter = Kube(k8s_client.ApiClient(configuration), settings or ClientSettings(), notify=notify, advice=advice)
    adapter.where = f"{configuration.host} ({where})"
    # urllib3 warns with its own file and line (on every request where TLS is not verified): never raw on the
    # terminal; what matters of it is said once, in words.
    warnings.filterwarnings("ignore", category=urllib3.exceptions.HTTPWarning)
    if not configuration.host.startswith("https://"):
        adapter.notify(f"note: {configuration.host} is reached without TLS (plain http in the kubeconfig)")
    elif not configuration.verify_ssl:
        adapter.notify(f"note: the TLS certificate of {configuration.host} is not verified "
                       "(insecure-skip-tls-verify in the kubeconfig)")
    return adapter


class Kube:
    """Bounded, retried, paginated reads and patches over one ``ApiClient``."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        settings: ClientSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        notify: Callable[[str], None] | None = None,
        advice: kubeconfig_files.Advice | None = None,
    ) -> None:
        self.api = api_client
        self.settings = settings or ClientSettings()
        self.where = str(getattr(api_client.configuration, "host", "") or "the cluster")  # for messages
        self._sleep = sleep
        self._monotonic = monotonic
        self.notify: Callable[[str], None] = notify or (lambda _line: None)  # a retry, a note: one line each
        self.advice = advice or kubeconfig_files.Advice()

    # ------------------------------------------------------------ reads

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """Every matching object, page by page. Raises rather than return a partial list."""
        return self.list_at(resource, namespace, label_selector, field_selector)[0]

    def list_at(
        self,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        """:meth:`list`, and the list's ``resourceVersion``: where a watch of the same objects starts."""
        query: list[tuple[str, object]] = [("limit", self.settings.page_size)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        items: list[Obj] = []
        token: str | None = None
        restarted = False
        while True:
            page_query = query + ([("continue", token)] if token else [])
            try:
                doc = self._request("GET", resource.path(namespace), page_query, verb="list", resource=resource,
                                    namespace=namespace,
                                    decoder=_list_decoder(resource.shape) if resource.shape is not None else _WHOLE)
            except _Expired:
                # The continue token outlived the server's snapshot: start over once, never splice pages.
                if restarted:
                    raise GaveUpError(f"list {resource.kind_name}: the list changed too fast to page through") from None
                items, token, restarted = [], None, True
                continue
            items.extend(doc.get("items") or [])
            token = (doc.get("metadata") or {}).get("continue") or None
            if not token:
                return items, str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def watch(self, resource: Resource, resource_version: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int = 300) -> Iterator[tuple[str, Obj]]:
        """The changes after ``resource_version``, as (type, object) while the server streams them: ``ADDED``,
        ``MODIFIED``, ``DELETED`` (objects in the resource's slim shape, as :meth:`list` keeps them) and
        ``BOOKMARK`` (only ``metadata.resourceVersion``: where to start again). Ends when the server closes the
        stream (``timeout_seconds`` at the latest); :class:`Expired` (410 Gone) when ``resource_version`` is older
        than the server keeps, so the caller lists again. Opening the stream is bounded and retried as every request
        is; a stream that breaks is the caller's to open again from the last version it saw."""
        query: builtins.list[tuple[str, object]] = [
            ("watch", "true"), ("allowWatchBookmarks", "true"), ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        what = f"watch {resource.kind_name}" + (f" in namespace {namespace}" if namespace else "")
        response = self._request("GET", resource.path(namespace), query, verb="watch", resource=resource,
                                 namespace=namespace, stream=timeout_seconds)
        decoder = _object_decoder(resource.shape) if resource.shape is not None else _WHOLE
        raw = response.response  # urllib3's, read line by line as the server writes
        try:
            pending = b""
            while True:
                try:
                    chunk = raw.read1(65536) if hasattr(raw, "read1") else raw.read(65536)
                except urllib3.exceptions.HTTPError as exc:
                    raise RetryableError(f"{what}: the stream broke ({_unreachable(exc, self.where)})") from exc
                if not chunk:
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        event = _EVENT.decode(line)
                        kind = event.type
                        obj = (_WHOLE if kind == "ERROR" else decoder).decode(event.object)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise RetryableError(f"{what}: the server sent a line that is no watch event") from exc
                    if not isinstance(obj, dict):
                        raise RetryableError(f"{what}: the server sent an event whose object is no object")
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        message = str(obj.get("message") or obj.get("reason") or "")
                        if code == 410:
                            raise Expired(f"{what}: {message or 'resource version too old'}")
                        raise (RetryableError if code == 429 or code >= 500 else PermanentError)(
                            f"{what}: HTTP {code} ({message})")
                    yield kind, obj
        finally:
            raw.release_conn()

    def list_optional(self, resource: Resource, **kwargs: Any) -> builtins.list[Obj] | None:
        """Like :meth:`list`, but None when the resource type itself is not served (CRD not installed)."""
        try:
            return self.list(resource, **kwargs)
        except NotFoundError:
            return None

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        """One object; :class:`NotFoundError` when there is none."""
        return self._request("GET", resource.path(namespace, name), [], verb="get", resource=resource,
                             namespace=namespace)

    # ------------------------------------------------------------ writes

    def create(self, resource: Resource, body: Obj, namespace: str | None = None) -> Obj:
        """Create ``body``; :class:`ConflictError` when an object of that name exists (someone was first)."""
        return self._request("POST", resource.path(namespace), [("fieldManager", FIELD_MANAGER)], verb="create",
                             resource=resource, namespace=namespace, body=body, content_type="application/json")

    def replace(self, resource: Resource, name: str, body: Obj, namespace: str | None = None) -> Obj:
        """Replace the object with ``body``; with ``metadata.resourceVersion`` set, :class:`ConflictError` when the
        object changed since it was read (optimistic concurrency, as a lock needs)."""
        return self._request("PUT", resource.path(namespace, name), [("fieldManager", FIELD_MANAGER)], verb="update",
                             resource=resource, namespace=namespace, body=body, content_type="application/json")

    def patch(self, resource: Resource, name: str, body: Any, namespace: str | None = None,
              content_type: str = MERGE_PATCH) -> Obj:
        """A merge patch by default. Label merge patches are idempotent, so retrying them is safe."""
        # fieldManager names us in the object's managedFields (audit: who set the skip label).
        return self._request("PATCH", resource.path(namespace, name), [("fieldManager", FIELD_MANAGER)],
                             verb="patch", resource=resource,
                             namespace=namespace, body=body, content_type=content_type)

    def evict(self, namespace: str, pod: str) -> None:
        """Evict ``pod`` through the Eviction API, so its PodDisruptionBudgets decide. A refusal (429) raises
        :class:`EvictionRefusedError` at once, never retried here and never forced by a delete: the caller
        asks again later. Other failures are retried as every request is."""
        body = {"apiVersion": kinds.EVICTION.api_version, "kind": kinds.EVICTION.kind,
                "metadata": {"name": pod, "namespace": namespace}}
        try:
            self._request("POST", PODS.path(namespace, pod, "eviction"), [], verb="create", resource=POD_EVICTION,
                          namespace=namespace, body=body, content_type="application/json", retry_throttled=False)
        except TooManyRequestsError as exc:
            raise EvictionRefusedError(str(exc)) from exc

    def proxy(self, namespace: str, pod: str, port: int, path: str, body: Any = None) -> Obj:
        """A request to ``pod``'s ``port`` through the API server's pod proxy (``pods/<pod>:<port>/proxy``):
        GET, or POST of ``body`` as JSON; with the adapter's bounds, retries and error mapping (RBAC: the
        ``pods/proxy`` subresource)."""
        url = PODS.path(namespace, f"{pod}:{port}", f"proxy/{path.lstrip('/')}")
        method, verb = ("POST", "create") if body is not None else ("GET", "get")
        return self._request(method, url, [], verb=verb, resource=POD_PROXY, namespace=namespace, body=body,
                             content_type="application/json" if body is not None else None)

    def service_proxy(self, namespace: str, service: str, port: str, path: str,
                      form: builtins.list[tuple[str, str]], *, scheme: str = "http",
                      headers: dict[str, str] | None = None) -> Obj:
        """A POST of ``form`` (form-encoded) to ``path`` of a Service's ``port`` through the API server's service
        proxy (``services/[https:]<name>:<port>/proxy``: ``scheme`` is how the API server reaches the port), with
        ``headers`` passed on, and the adapter's bounds, retries and error mapping (RBAC: ``create`` on
        ``services/proxy``). A form in the body, not the URL, so no proxy refuses a long query."""
        prefix = "https:" if scheme == "https" else ""
        url = Resource(kinds.SERVICE).path(namespace, f"{prefix}{service}:{port}", f"proxy/{path.lstrip('/')}")
        return self._request("POST", url, [], verb="create", resource=SERVICE_PROXY, namespace=namespace,
                             content_type=FORM, form=form, headers=headers)

    def bearer_token(self) -> str | None:
        """The kubeconfig identity's bearer token (a token, or what its credentials plugin gave), fresh; None
        for an identity without one (a client certificate)."""
        configuration = self.api.configuration
        hook = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None:
            hook(configuration)
        value = (getattr(configuration, "api_key", None) or {}).get("authorization") or ""
        return str(value).removeprefix("Bearer ").strip() or None

    # ------------------------------------------------------------ the one place requests are made

    def _request(self, method: str, path: str, query: builtins.list[tuple[str, object]], *, verb: str, resource: Resource,
                 namespace: str | None, body: Any = None, content_type: str | None = None,
                 decoder: msgspec.json.Decoder[Any] = _WHOLE, retry_throttled: bool = True,
                 form: builtins.list[tuple[str, str]] | None = None, headers: dict[str, str] | None = None,
                 stream: int | None = None) -> Any:
        settings = self.settings
        start = self._monotonic()
        last: RetryableError | None = None
        for attempt in range(settings.attempts):
            try:
                return self._once(method, path, query, verb, resource, namespace, body, content_type, decoder, form,
                                  headers, stream)
            except RetryableError as exc:
                if not retry_throttled and isinstance(exc, TooManyRequestsError):
                    raise
                last = exc
            if attempt + 1 >= settings.attempts:
                break
            delay = min(settings.backoff_cap, settings.backoff_base * (2**attempt) * random.uniform(0.75, 1.0))
            if last.retry_after is not None:
                delay = max(delay, last.retry_after)  # asking again sooner would only be refused again
            if self._monotonic() - start + delay > settings.total_timeout:
                break
            self.notify(f"{last}; retrying in {delay:.1f} s (attempt {attempt + 2} of {settings.attempts})")
            self._sleep(delay)
        raise GaveUpError(f"{verb} {resource.kind_name} gave up after {attempt + 1} attempt(s): {last}") from last

    def _once(self, method: str, path: str, query: builtins.list[tuple[str, object]], verb: str, resource: Resource,
              namespace: str | None, body: Any, content_type: str | None, decoder: msgspec.json.Decoder[Any],
              form: builtins.list[tuple[str, str]] | None = None, extra: dict[str, str] | None = None,
              stream: int | None = None) -> Any:
        headers = {**(extra or {}), "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = self.api.param_serialize(
            method=method, resource_path=path, query_params=query, header_params=headers, body=body,
            post_params=form, auth_settings=["BearerToken"],
        )
        what = f"{verb} {resource.kind_name}" + (f" in namespace {namespace}" if namespace else "")
        try:
            # A watch (``stream``: its timeoutSeconds) waits on the server between events: a read is bounded by the
            # stream's own end, a little later, so a connection that died without a word is noticed and reopened.
            timeout: Any = (self.settings.request_timeout, stream + 30.0) if stream is not None \
                else self.settings.request_timeout
            response = self.api.call_api(*request, _request_timeout=timeout)
            if stream is not None and 200 <= response.status < 300:
                return response
            data = response.read()
        except urllib3.exceptions.HTTPError as exc:  # timeouts, refused or dropped connections
            raise RetryableError(f"{what}: {_unreachable(exc, self.where)}") from exc
        except k8s_client.ApiException as exc:  # the client reports TLS failures this way
            raise PermanentError(f"{what}: {exc.reason}") from exc
        status = response.status
        if 200 <= status < 300:
            try:
                doc = decoder.decode(data or b"{}")
            except msgspec.ValidationError as exc:
                # JSON, but not the shape of a list: no object at all (a proxy's answer), or a field of the wrong type.
                whole = _WHOLE.decode(data or b"{}")
                if isinstance(whole, dict):
                    raise PermanentError(f"{what}: the server sent an object of an unexpected shape: {exc}") from exc
                doc = whole
            except msgspec.DecodeError as exc:
                raise RetryableError(f"{what}: the server sent a body that is not JSON") from exc
            if not isinstance(doc, dict):
                raise RetryableError(f"{what}: the server sent JSON that is not an object")
            return doc
        raise _error_for(status, response.headers, data, what, verb, resource, namespace, self.where,
                         self.advice)


class Expired(PermanentError):
    """410 Gone: a continue token expired, or a watch asked for a version older than the server keeps."""


_Expired = Expired


def _unreachable(exc: urllib3.exceptions.HTTPError, where: str) -> str:
    """Why a request got no answer, in words first, urllib3's name for it after."""
    name = type(exc).__name__
    if isinstance(exc, urllib3.exceptions.NameResolutionError):
        return f"the server's name does not resolve ({where}; {name})"
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # a subclass of ConnectTimeoutError, so first
        return f"the connection was refused or failed ({where}; {name})"
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return f"no connection within the timeout ({where}; {name})"
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return f"no answer within the timeout ({where}; {name})"
    return f"{name}: {' '.join(str(exc).split())[:300]}"


def _is_kubernetes_status(data: bytes | None) -> bool:
    """Whether an error body is a Kubernetes ``Status``, which every API server answers an error with."""
    try:
        doc = _WHOLE.decode(data or b"")
    except msgspec.DecodeError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == "Status"


def _status_message(data: bytes | None) -> str:
    try:
        doc = _WHOLE.decode(data or b"{}")
    except msgspec.DecodeError:
        return (data or b"")[:200].decode("utf-8", "replace")
    if not isinstance(doc, dict):
        return ""
    if doc.get("errorType") and doc.get("error"):  # Prometheus's own answer, passed through a service proxy
        return f"{doc['errorType']}: {doc['error']}"[:300]
    return str(doc.get("message") or doc.get("reason") or "")[:300]


def _error_for(status: int, headers: Any, data: bytes | None, what: str, verb: str, resource: Resource,
               namespace: str | None, where: str = "the server",
               advice: kubeconfig_files.Advice | None = None) -> ClusterError:
    message = _status_message(data)
    advice = advice or kubeconfig_files.Advice()
    if status == 401:
        return AccessDeniedError(
            f"{what}: the credentials were rejected (401 Unauthorized): the token or client certificate is "
            f"missing, expired or not trusted by this cluster; {advice.login}, then {advice.fix()}, or check "
            "--kubeconfig/--context" + (f" ({message})" if message else "")
        )
    # Only a core kind's own path tells: every API server serves those and answers their errors with a Status,
    # while an API group that is not installed (a CRD) gets a plain "404 page not found", and a proxied pod or
    # service answers with its own body.
    if status == 404 and not resource.kind.group and resource.subresource is None and not _is_kubernetes_status(data):
        return NotKubernetesError(
            f"{what}: {where} answered 404 without a Kubernetes status, so it is no Kubernetes API server: check the "
            "kubeconfig's server URL (the cluster's API endpoint, with no path)" + (f" ({message[:120]})" if message else "")
        )
    if status == 403:
        scope = f"in namespace {namespace}" if namespace else "cluster-wide"
        return AccessDeniedError(
            f"{what}: forbidden (403); the identity needs RBAC permission to '{verb}' '{resource.kind_name}' {scope}"
            + (f" ({message})" if message else "")
        )
    if status == 404:
        return NotFoundError(f"{what}: not found" + (f" ({message})" if message else ""))
    if status == 409:
        return ConflictError(f"{what}: conflict ({message})")
    if status == 410:
        return _Expired(f"{what}: {message or 'resource expired'}")
    if status == 429 or status >= 500:
        retry_after = None
        try:
            retry_after = float(headers.get("Retry-After")) if headers and headers.get("Retry-After") else None
        except (TypeError, ValueError):
            retry_after = None
        kind = TooManyRequestsError if status == 429 else RetryableError
        return kind(f"{what}: HTTP {status}" + (f" ({message})" if message else ""), retry_after)
    return PermanentError(f"{what}: HTTP {status}" + (f" ({message})" if message else ""))
