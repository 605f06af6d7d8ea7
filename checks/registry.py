"""Whether a container image exists in its registry, asked the way a kubelet pulls it: the OCI distribution API
(``HEAD /v2/<repository>/manifests/<tag>``), anonymously or with the pull secret the GPU Operator uses, through
the registry's token flow (a 401 with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``: a token for
``repository:<repository>:pull`` from the realm, with the secret's user and password where there is one) or
HTTP Basic.

Preflight's ``kernel-precompiled`` asks it for the precompiled driver image of the target branch for every kernel
and OS of a pool's nodes (``<driverRepository>/driver:<branch>-<kernel>-<os>``, :func:`driver_image`): NVIDIA
publishes them for some kernels only, and a node whose kernel has none is left without a driver. The answers are
read once, before the checks run (:func:`look_up`), so the checks stay functions of what was read.

Over urllib3 (what :mod:`checks.kube` and :mod:`checks.prometheus` run on), every request bounded, the server's
certificate checked (against ``ca_file`` where given: a mirror with a private CA). An answer is ``found`` (200),
``missing`` (404, the registry's ``MANIFEST_UNKNOWN`` or ``NAME_UNKNOWN``) or ``unknown`` with why (refused, not
reachable): never a guess.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode

import urllib3

from checks import kube as k
from checks.errors import AccessDeniedError, ClusterError, NotFoundError
from checks.objects import Obj

# What the kubelet accepts, newest first: OCI index and manifest, Docker manifest list and v2 manifest.
MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json"))
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"  # where docker.io's distribution API answers
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class Presence(StrEnum):
    FOUND = "found"
    MISSING = "missing"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ImageRef:
    """``registry/repository:tag``; ``registry`` as the image names it (``nvcr.io``, ``localhost:5000``)."""

    registry: str
    repository: str
    tag: str

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}:{self.tag}"


def parse_image(name: str) -> ImageRef:
    """``nvcr.io/nvidia/driver:580-...`` as a reference; the first path segment is a registry where it has a dot or
    a port or is ``localhost``, else the image is on Docker Hub (``library/`` for a bare name)."""
    path, _, tag = name.rpartition(":")
    if not path or "/" in tag:
        path, tag = name, "latest"
    first, _, rest = path.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return ImageRef(first, rest, tag)
    return ImageRef(DOCKER_HUB, path if "/" in path else f"library/{path}", tag)


def driver_image(repository: str, branch: str, kernel: str, os_id: str) -> ImageRef:
    """The precompiled driver image of ``branch`` for a kernel and OS: ``<repository>/driver:<branch>-<kernel>-<os>``
    (the GPU Operator's tag format; ``gpuOperator.driverRepository`` is ``repository``)."""
    return parse_image(f"{repository.rstrip('/')}/driver:{branch}-{kernel}-{os_id}")


@dataclass(frozen=True)
class Lookup:
    image: str
    presence: Presence
    detail: str  # what the registry said, or why it could not be asked


@dataclass(frozen=True)
class Login:
    """A user and password for a registry, from a pull secret (``what`` names the secret)."""

    username: str
    password: str
    what: str

    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


@dataclass
class PullSecrets:
    """Registry host -> its login, from the operator's pull secrets; ``notes``: what could not be read, and why."""

    logins: dict[str, Login] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _host(key: str) -> str:
    host = re.sub(r"^https?://", "", key).split("/", 1)[0]
    return DOCKER_HUB if host in ("index.docker.io", DOCKER_HUB_API) else host


def logins_of(secret: Obj, what: str) -> dict[str, Login]:
    """The logins of a ``kubernetes.io/dockerconfigjson`` (or ``dockercfg``) Secret, by registry host."""
    data = secret.get("data") or {}
    raw = data.get(".dockerconfigjson") or data.get(".dockercfg")
    if not isinstance(raw, str):
        return {}
    try:
        document = json.loads(base64.b64decode(raw))
    except ValueError:
        return {}
    auths = document.get("auths", document) if isinstance(document, dict) else {}
    found = {}
    for key, entry in (auths.items() if isinstance(auths, dict) else []):
        if not isinstance(entry, dict):
            continue
        user, password = entry.get("username"), entry.get("password")
        if (not user or not password) and isinstance(entry.get("auth"), str):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except ValueError:
                continue
        if user and password:
            found[_host(str(key))] = Login(str(user), str(password), what)
    return found


def read_pull_secrets(kube: k.Kube, namespace: str, names: Iterable[str]) -> PullSecrets:
    """The logins of the named pull secrets in the operator's namespace; one that cannot be read is a note (the
    lookup then goes anonymously, which public images allow)."""
    out = PullSecrets()
    for name in sorted(set(names)):
        what = f"pull secret {namespace}/{name}"
        try:
            out.logins.update(logins_of(kube.get(k.SECRETS, name, namespace), what))
        except AccessDeniedError:
            out.notes.append(f"{what} not readable (RBAC: get secrets in {namespace}); asked anonymously")
        except NotFoundError:
            out.notes.append(f"{what} does not exist; asked anonymously")
        except ClusterError as error:
            out.notes.append(f"{what} not read ({error}); asked anonymously")
    return out


def operator_pull_secrets(cluster_policy: Obj | None, nvidia_drivers: list[Obj] | None) -> set[str]:
    """The pull secrets the operator pulls the driver with: the ClusterPolicy's ``spec.driver.imagePullSecrets``
    and every NVIDIADriver's ``spec.imagePullSecrets``."""
    names: set[str] = set()
    policy_driver = ((cluster_policy or {}).get("spec") or {}).get("driver") or {}
    for source in [policy_driver, *(((d.get("spec") or {}) for d in nvidia_drivers or []))]:
        names |= {str(n) for n in source.get("imagePullSecrets") or [] if isinstance(n, str) and n}
    return names


@dataclass
class RegistryAnswers:
    """What the registry said of each image asked (by its name), and what limited the asking (preflight reads it
    before its checks run: :func:`checks.precompiled.look_up`)."""

    answers: dict[str, Lookup] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Registry:
    """Asks registries whether images exist, each answer kept (one request per image, whatever asks twice)."""

    def __init__(self, logins: Mapping[str, Login] | None = None, *, ca_file: str | None = None,
                 timeout: float = 15.0) -> None:
        self._logins = dict(logins or {})
        tls: dict[str, Any] = {"ca_certs": ca_file, "cert_reqs": "CERT_REQUIRED"} if ca_file else {}
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout), **tls)
        self._answers: dict[str, Lookup] = {}

    def use_logins(self, logins: Mapping[str, Login]) -> None:
        """Logins by registry host (the operator's pull secrets', read from the cluster)."""
        self._logins.update(logins)

    def look_up(self, image: ImageRef) -> Lookup:
        key = str(image)
        if key not in self._answers:
            self._answers[key] = self._ask(image)
        return self._answers[key]

    def _ask(self, image: ImageRef) -> Lookup:
        api = DOCKER_HUB_API if image.registry == DOCKER_HUB else image.registry
        url = f"https://{api}/v2/{image.repository}/manifests/{image.tag}"
        login = self._logins.get(image.registry)
        try:
            response = self._head(url, None)
            if response.status == 401:
                authorization = self._authorize(response.headers.get("WWW-Authenticate", ""), image, login)
                if isinstance(authorization, Lookup):
                    return authorization
                response = self._head(url, authorization)
        except urllib3.exceptions.HTTPError as error:
            return Lookup(str(image), Presence.UNKNOWN, f"registry {api} not reachable ({type(error).__name__}: "
                          f"{' '.join(str(error).split())[:200]})")
        who = f"with {login.what}" if login else "anonymously"
        if response.status == 200:
            return Lookup(str(image), Presence.FOUND, f"{api} has it (asked {who})")
        if response.status == 404:
            return Lookup(str(image), Presence.MISSING, f"{api} answers 404: no such manifest (asked {who})")
        return Lookup(str(image), Presence.UNKNOWN, f"{api} answers HTTP {response.status} (asked {who})"
                      + ("" if login else ": give the operator's pull secret a login for it"
                         if response.status in (401, 403) else ""))

    def _head(self, url: str, authorization: str | None) -> Any:
        headers = {"Accept": MANIFEST_TYPES}
        if authorization:
            headers["Authorization"] = authorization
        response = self._http.request("HEAD", url, headers=headers, redirect=True)
        if response.status == 405:  # a registry that serves manifests by GET only
            response = self._http.request("GET", url, headers=headers, redirect=True, preload_content=True)
        return response

    def _authorize(self, challenge: str, image: ImageRef, login: Login | None) -> str | Lookup:
        """The Authorization the challenge asks for, or why there is none."""
        scheme = challenge.split(" ", 1)[0].lower()
        params = dict(_CHALLENGE.findall(challenge))
        if scheme == "basic":
            if login is None:
                return Lookup(str(image), Presence.UNKNOWN, f"{image.registry} asks for a login and the operator's "
                              "pull secrets hold none for it")
            return login.basic()
        if scheme != "bearer" or "realm" not in params:
            return Lookup(str(image), Presence.UNKNOWN, f"{image.registry} answers 401 with no token challenge "
                          f"({challenge[:120] or 'no WWW-Authenticate'})")
        query = {"scope": params.get("scope") or f"repository:{image.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        headers = {"Authorization": login.basic()} if login else {}
        response = self._http.request("GET", f"{params['realm']}?{urlencode(query)}", headers=headers)
        if response.status != 200:
            who = f"with {login.what}" if login else "anonymously"
            return Lookup(str(image), Presence.UNKNOWN, f"{image.registry}'s token service refused a pull token "
                          f"{who} (HTTP {response.status})")
        try:
            document = json.loads(response.data)
            token = document.get("token") or document.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            return Lookup(str(image), Presence.UNKNOWN, f"{image.registry}'s token service gave no token")
        return f"Bearer {token}"
