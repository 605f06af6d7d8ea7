"""What a kubeconfig must hold before the client reads it, checked so that a broken one is refused in one
line naming the file (and the context, cluster, user or credentials plugin) instead of failing deep inside
the ``kubernetes`` client with a traceback, or later as an unauthenticated request.

The files are read as :mod:`kubernetes.config.kube_config` reads them: ``KUBECONFIG`` may list several
paths (``:``-separated; missing ones are skipped), entries of ``clusters``, ``contexts`` and ``users`` merge
by name with the first file's winning, and the last file that sets ``current-context`` sets it. A user's
``exec`` plugin runs from the directory of the file that declares the context's cluster, with the
plugin's own ``env`` over the process's; a command with a ``/`` is a path (relative to that directory),
any other a program looked up on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.errors import ConfigError
from fleetspec import yaml_files
from fleetspec.base import Cloud
from fleetspec.model import Cluster

MAX_FILE_BYTES = 16 * 1024 * 1024  # kubeconfigs embed certificates; none is anywhere near this
SECTIONS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))
# Fields of a cluster and of a user that the client reads, and the type each must have.
CLUSTER_FIELDS = {"server": str, "certificate-authority": str, "certificate-authority-data": str,
                  "tls-server-name": str, "proxy-url": str, "insecure-skip-tls-verify": bool}
USER_FIELDS = {"token": str, "tokenFile": str, "client-certificate": str, "client-certificate-data": str,
               "client-key": str, "client-key-data": str, "username": str, "password": str}


@dataclass(frozen=True)
class Advice:
    """What to tell a user whose kubeconfig does not reach the stack's cluster, in the words of its cloud: the
    command that writes credentials for it, how to log in to the cloud a credentials plugin asks, and an existing
    cluster's declared context. Without a stack: the commands of both clouds."""

    fetch: str = "az aks get-credentials or aws eks update-kubeconfig"
    login: str = "log in to the cloud again (az login, aws sso login)"
    declared_context: str | None = None  # cluster.existing.context

    def fix(self) -> str:
        """How to get a working kubeconfig for this cluster, in a clause."""
        if self.declared_context is not None:
            return (f"the stack declares context {self.declared_context} (cluster.existing.context): pass "
                    "--kubeconfig, set KUBECONFIG or declare cluster.existing.kubeconfig for a file that has it")
        return f"run `{self.fetch}` (it writes ~/.kube/config and sets its current context)"

    def choose_context(self) -> str:
        """How to choose a context where the kubeconfig names none."""
        if self.declared_context is not None:
            return "declare cluster.existing.context, or pass --context"
        return f"pass --context, or run `{self.fetch}`, which sets it"


def advice_for(cluster: Cluster) -> Advice:
    """The advice for a stack's cluster (:class:`Advice`)."""
    if cluster.cloud is Cloud.AKS and cluster.aks is not None:
        return Advice(f"az aks get-credentials --resource-group {cluster.aks.resourceGroup} --name "
                      f"{cluster.aks.clusterName}", "log in with `az login` (Entra ID clusters: kubelogin reads it)")
    if cluster.cloud is Cloud.EKS and cluster.eks is not None:
        return Advice(f"aws eks update-kubeconfig --name {cluster.eks.clusterName} --region {cluster.eks.region}",
                      "give the AWS CLI credentials (`aws sso login`, AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY); `aws sts get-caller-identity` checks them")
    if cluster.existing is not None:
        return Advice(declared_context=cluster.existing.context)
    return Advice()


@dataclass(frozen=True)
class Entry:
    value: Mapping[str, Any]
    file: Path  # the file that declared it (the first that did)


@dataclass
class Merged:
    entries: dict[str, dict[str, Entry]]  # section -> name -> entry
    current_context: str | None = None


def paths_of(kubeconfig: str) -> list[Path]:
    """The files a kubeconfig setting names, as the client splits and expands it (missing ones included)."""
    return [Path(os.path.expanduser(part)) for part in kubeconfig.split(os.pathsep) if part]


def validate(kubeconfig: str, context: str | None, advice: Advice | None = None) -> str:
    """The context the client will use, once every file is readable YAML of a kubeconfig's shape and the
    context, its cluster, its user and the user's credentials plugin exist; else :class:`ConfigError`, whose
    message says what to do in the words of ``advice``."""
    advice = advice or Advice()
    files = [path for path in paths_of(kubeconfig) if path.exists()]
    if not files:
        raise ConfigError(f"kubeconfig {kubeconfig}: no such file")
    merged = Merged({section: {} for section, _ in SECTIONS})
    for path in files:
        _merge(merged, path, _read(path))
    where = kubeconfig if len(files) > 1 else str(files[0])
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"kubeconfig {where} sets no current-context: {advice.choose_context()}")
    found = merged.entries["contexts"].get(name)
    if found is None:
        known = ", ".join(sorted(merged.entries["contexts"])) or "none"
        raise ConfigError(f"kubeconfig {where} has no context {name} (its contexts: {known})")
    body = found.value["context"]
    cluster = _named(merged, "clusters", body, "cluster", name, where, required=True)
    user = _named(merged, "users", body, "user", name, where, required=False)
    if cluster is not None and not isinstance(cluster.value["cluster"].get("server"), str):
        raise ConfigError(f"kubeconfig {cluster.file}: cluster {body['cluster']} of context {name} has no "
                          "server URL (clusters[].cluster.server)")
    if cluster is not None:
        _check_fields(cluster, "cluster", CLUSTER_FIELDS)
        server = cluster.value["cluster"]["server"]
        if not server.startswith(("https://", "http://")) or any(c.isspace() for c in server):
            raise ConfigError(f"kubeconfig {cluster.file}: cluster {body['cluster']}: server must be an https:// "
                              f"URL, not {server[:60]!r}" + ("..." if len(server) > 60 else ""))
    if user is not None:
        _check_fields(user, "user", USER_FIELDS)
    if user is not None and cluster is not None:
        _check_plugin(user, cluster.file.parent, name, advice)
    return name


def _read(path: Path) -> Mapping[str, Any]:
    try:
        document = yaml_files.read(path, MAX_FILE_BYTES)
    except yaml_files.YamlFileError as exc:
        raise ConfigError(f"kubeconfig {path} is {exc}") from None
    if not isinstance(document, Mapping):
        raise ConfigError(f"kubeconfig {path} must be a YAML mapping (apiVersion, clusters, contexts, users), "
                          f"not {_kind(document)}")
    return document


def _merge(merged: Merged, path: Path, document: Mapping[str, Any]) -> None:
    for section, body in SECTIONS:
        entries = document.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise ConfigError(f"kubeconfig {path}: {section} must be a list, not {_kind(entries)}")
        for index, entry in enumerate(entries):
            at = f"{section}[{index}]"
            if not isinstance(entry, Mapping):
                raise ConfigError(f"kubeconfig {path}: {at} must be a mapping with name and {body}, not {_kind(entry)}")
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                raise ConfigError(f"kubeconfig {path}: {at} has no name")
            if not isinstance(entry.get(body), Mapping):
                raise ConfigError(f"kubeconfig {path}: {at} ({name}) must have a {body} mapping, not "
                                  f"{_kind(entry.get(body))}")
            merged.entries[section].setdefault(name, Entry(entry, path))
    if "current-context" in document:
        current = document["current-context"]
        if current is not None and not isinstance(current, str):
            raise ConfigError(f"kubeconfig {path}: current-context must be a context's name, not {_kind(current)}")
        merged.current_context = current or None


def _named(merged: Merged, section: str, context: Mapping[str, Any], key: str, name: str, where: str, *,
           required: bool) -> Entry | None:
    """The entry the context names under ``key`` (its cluster or user)."""
    wanted = context.get(key)
    if wanted is None and not required:
        return None
    if not isinstance(wanted, str) or not wanted:
        raise ConfigError(f"kubeconfig {where}: context {name} names no {key}")
    entry = merged.entries[section].get(wanted)
    if entry is None:
        raise ConfigError(f"kubeconfig {where}: context {name} names {key} {wanted}, which is not in its "
                          f"{section}")
    return entry


def _check_fields(entry: Entry, body: str, fields: Mapping[str, type]) -> None:
    for key, kind in fields.items():
        value = entry.value[body].get(key)
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"kubeconfig {entry.file}: {body} {entry.value['name']}: {key} must be "
                              f"{_kind(kind())}, not {_kind(value)}")


def _check_plugin(user: Entry, cwd: Path, context: str, advice: Advice) -> None:
    """The user's ``exec`` credentials plugin (az's kubelogin, aws eks get-token ...) can be started."""
    body = user.value["user"]
    plugin = body.get("exec")
    if plugin is None:
        return
    name = user.value["name"]
    where = f"kubeconfig {user.file}: user {name} of context {context}"
    if not isinstance(plugin, Mapping):
        raise ConfigError(f"{where}: exec must be a mapping with a command, not {_kind(plugin)}")
    command = plugin.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f"{where}: exec has no command (users[].user.exec.command)")
    if not isinstance(plugin.get("apiVersion"), str):
        raise ConfigError(f"{where}: exec has no apiVersion (e.g. client.authentication.k8s.io/v1beta1)")
    for key, kind in (("args", list), ("env", list)):
        if plugin.get(key) is not None and not isinstance(plugin[key], kind):
            raise ConfigError(f"{where}: exec.{key} must be a list, not {_kind(plugin[key])}")
    env_path = os.environ.get("PATH")
    for item in plugin.get("env") or []:
        if not (isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)):
            raise ConfigError(f"{where}: exec.env entries must be {{name, value}} strings, not {item!r:.80}")
        if item["name"] == "PATH":
            env_path = item["value"]
    if "/" in command:
        target = Path(command) if os.path.isabs(command) else cwd / command
        found = target.is_file() and os.access(target, os.X_OK)
    else:
        found = shutil.which(command, path=env_path) is not None
    if not found:
        raise ConfigError(f"{where}: its credentials plugin {command!r} is not installed or not on PATH "
                          f"(install it, or fetch the credentials again: {advice.fetch})")


def _kind(value: object) -> str:
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)
