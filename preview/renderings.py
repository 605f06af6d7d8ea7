"""A stack file's offline rendering, kept across runs: everything the program registered and exported
(:class:`preview.run.ProgramRun`), stored under a key of everything that determines it, so an unchanged input is
rendered once. `plan` and `diff` read three kinds: the stack's own (its resources are the report), the canary's
(the outputs a prod stack's StackReference reads) and the last deployment's (the stack file at the base revision:
its outputs, and its custom resources, which `plan` marks each change against, :mod:`preview.changes`).

The key (:func:`rendering_key`) is a sha256 over: the stack name and its config (the stack file as the engine
reads it); the outputs given to the program's StackReferences (its last deployment, other stacks'); the program
(its ``__main__.py`` and every file of each package of this checkout it imports, followed from its import
statements, and of the mock runtime, ``preview/run.py``, with theirs); the attestations folder the program reads
(``attestations/``: every file's path and bytes); the Python version and every installed distribution with its
version (the SDKs); and the environment variables the program or the SDKs read (``PULUMI_*`` but the config,
which the preview drops; ``AAD_LOGIN_METHOD``, ``GPU_ROLLOUT_ORGANIZATION``; and :data:`SDK_ENVIRONMENT`, which the
Kubernetes provider's ``kubeconfig`` and the AWS region default to). The attestations folder is walked through
symbolic links, as the program reads it. The program runs as a dry run, so it reads no clock. Change any of them
and the key changes: an entry is never stale, only unused.

Where: ``$GPU_ROLLOUT_CACHE_DIR``, else ``gpu-rollout/renderings/`` in the user's cache folder
(``$XDG_CACHE_HOME``, else ``~/.cache``). Never in the checkout: an entry is believed as the rendering of its key,
and a checkout's files are whatever a change committed (a forged entry beside the stack file would decide plan's
verdict). The folder holds a ``.gitignore`` of ``*`` all the same. One JSON file per key; deleting the folder, or
any file in it, only costs a rendering. An entry that cannot be read, is not JSON or is not for its key is rendered again and rewritten; a
folder that cannot be written is used for nothing. Writes go to a temporary file renamed into place, so a
concurrent or interrupted run never leaves half an entry under a key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pulumi.output import UNKNOWN, Unknown
from pulumi.runtime import rpc as pulumi_rpc

from engine_contracts.attestation import ATTESTATION_DIR
from preview import run as mock_runtime
from preview.changes import Rendered
from renderers.kubelogin import LOGIN_ENV
from renderers.manifests import ORGANIZATION_ENV

CACHE_ENV = "GPU_ROLLOUT_CACHE_DIR"
CACHE_FOLDER = Path("gpu-rollout", "renderings")  # in the user's cache folder
FORMAT = 3  # of an entry (2: the custom resources too; 3: the whole run); part of the key, so a new format never reads an old entry
# When an entry is written, the oldest go beyond either bound (the newest entry always stays): a 150-pool stack's
# rendering is about 2.6 MB, so the count alone would let a folder grow past half a gigabyte.
MAX_ENTRIES = 256
MAX_BYTES = 256 * 1024 * 1024
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")  # an entry's name: its key
_TEMPORARY = ".entry-"  # the prefix of a write in progress
STALE_TEMPORARY_SECONDS = 3600  # a temporary file this old is no write in progress: an interrupted one

_IMPORT = re.compile(r"^\s*(?:from\s+([A-Za-z_]\w*)|import\s+([A-Za-z_][\w., \t]*))", re.MULTILINE)


def cache_dir() -> Path | None:
    """``$GPU_ROLLOUT_CACHE_DIR``, else the user's cache folder's ``gpu-rollout/renderings`` (the module's
    docstring: never the checkout); None where no absolute one is known (no home: a relative ``~`` would land in
    the working folder), and then nothing is kept."""
    given = os.environ.get(CACHE_ENV, "").strip()
    if given:
        return Path(given)
    user_cache = os.environ.get("XDG_CACHE_HOME", "").strip()
    folder = Path(user_cache) if user_cache else Path(os.path.expanduser("~")) / ".cache"
    return folder / CACHE_FOLDER if folder.is_absolute() else None


def _imported(text: str) -> set[str]:
    """The top-level names a module's import statements name (a docstring line that reads like one adds a name
    at worst: a package hashed needlessly, never one missed)."""
    names = set()
    for from_name, import_names in _IMPORT.findall(text):
        if from_name:
            names.add(from_name)
        for part in import_names.split(","):
            words = part.strip().split()
            if words:
                names.add(words[0].split(".")[0])
    return names


def program_digest(program: Path, source_dir: Path = mock_runtime.SOURCE_DIR) -> str:
    """sha256 over the program, the mock runtime and every file of each package of ``source_dir`` they import,
    transitively (by package: a package's every module counts, imported or not)."""
    seen: set[str] = set()
    texts: dict[Path, bytes] = {}
    pending = [program.resolve(), Path(mock_runtime.__file__).resolve()]
    while pending:
        path = pending.pop()
        if path in texts:
            continue
        texts[path] = path.read_bytes()
        for name in sorted(_imported(texts[path].decode("utf-8", "replace")) - seen):
            seen.add(name)
            package = source_dir / name
            if (package / "__init__.py").is_file():
                pending.extend(sorted(package.rglob("*.py")))
    digest = hashlib.sha256()
    for path in sorted(texts):
        digest.update(f"{path}\0{len(texts[path])}\0".encode())
        digest.update(texts[path])
    return digest.hexdigest()


def _folder_digest(folder: Path) -> str:
    """sha256 over every file's path (relative to ``folder``) and bytes, through symbolic links (the program reads
    ``attestations/<canary>/`` whatever it links to; a folder seen before is not walked again)."""
    files: list[tuple[str, str]] = []
    seen: set[str] = set()
    for top, folders, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            folders[:] = []
            continue
        seen.add(real)
        files.extend((os.path.relpath(os.path.join(top, name), folder), os.path.join(top, name)) for name in names)
    digest = hashlib.sha256()
    for relative, path in sorted(files):
        data = Path(path).read_bytes()
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def installed_distributions() -> list[str]:
    """Every distribution on the import path with its version, as its metadata folder names it
    (``pulumi-3.272.0.dist-info``): one folder listing per path entry, not a read of each distribution."""
    found: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found.update(name for name in names if name.endswith((".dist-info", ".egg-info")))
    return sorted(found)


# What the SDKs the program uses read from the environment into a resource's inputs, beyond PULUMI_*: the
# Kubernetes provider's kubeconfig when none is given, the AWS region (tests/preview/test_renderings.py reads the
# installed SDKs' sources and fails on a name missing here).
SDK_ENVIRONMENT = ("KUBECONFIG", "AWS_REGION", "AWS_DEFAULT_REGION")


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if (k.startswith("PULUMI_") and not k.startswith("PULUMI_CONFIG") and k != "PULUMI_ACCESS_TOKEN")
            or k in (LOGIN_ENV, ORGANIZATION_ENV, *SDK_ENVIRONMENT)}


def rendering_key(config: dict[str, str], stack: str, program: Path, previous_outputs: dict[str, Any] | None,
                  stack_outputs: dict[str, dict[str, Any]] | None) -> str:
    """The sha256 of everything that determines the rendering (the module's docstring); TypeError where the
    given outputs are not JSON."""
    document = {
        "format": FORMAT, "stack": stack, "config": config, "previous": previous_outputs, "referenced": stack_outputs,
        "program": program_digest(program), "attestations": _folder_digest(program.parent / ATTESTATION_DIR),
        "python": sys.version, "distributions": installed_distributions(), "environment": _environment(),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True, allow_nan=False).encode()).hexdigest()


Rendering = tuple[dict[str, Any], list[Rendered]]  # the outputs, and the custom resources


def _unknown_as_json(value: Any) -> str:
    """A value a preview cannot know yet (``pulumi.output.Unknown``: a component's output computed by the cloud)
    as the engine's wire format carries it, its one marker string; anything else JSON cannot hold is a TypeError."""
    if isinstance(value, Unknown):
        return pulumi_rpc.UNKNOWN
    raise TypeError(f"{type(value).__name__} is not JSON")


def _unknowns_restored(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unknowns_restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknowns_restored(v) for v in value]
    return UNKNOWN if value == pulumi_rpc.UNKNOWN else value


def _parsed(data: bytes) -> Any:
    """An entry's JSON, each unknown marker an unknown again (walked only where the text holds one)."""
    entry = json.loads(data)
    return _unknowns_restored(entry) if pulumi_rpc.UNKNOWN.encode() in data else entry


def _run_as_json(run: mock_runtime.ProgramRun) -> dict[str, Any]:
    return {"stack": run.stack, "outputs": run.outputs, "resources": [
        {"type": r.type, "name": r.name, "inputs": r.inputs, "custom": r.custom, "urn": r.urn, "outputs": r.outputs,
         "dependencies": list(r.dependencies), "provider": r.provider, "adopt": r.adopt} for r in run.resources]}


def _resource_of_json(value: Any) -> mock_runtime.RegisteredResource | None:
    if not isinstance(value, dict):
        return None
    text = ("type", "name", "urn", "provider", "adopt")
    if not all(isinstance(value.get(k), str) for k in text) or not isinstance(value.get("custom"), bool) or \
            not isinstance(value.get("inputs"), dict) or not isinstance(value.get("outputs"), dict) or \
            not isinstance(value.get("dependencies"), list) or \
            not all(isinstance(urn, str) for urn in value["dependencies"]):
        return None
    return mock_runtime.RegisteredResource(
        value["type"], value["name"], value["inputs"], value["custom"], value["urn"], value["outputs"],
        tuple(value["dependencies"]), value["provider"], value["adopt"])


def _run_of_json(entry: Any, stack: str) -> mock_runtime.ProgramRun | None:
    """The run an entry holds; None where any part is missing or of the wrong kind."""
    if not isinstance(entry, dict) or entry.get("stack") != stack or not isinstance(entry.get("outputs"), dict) or \
            not isinstance(entry.get("resources"), list):
        return None
    resources = [_resource_of_json(r) for r in entry["resources"]]
    if any(r is None for r in resources):
        return None
    return mock_runtime.ProgramRun(stack, [r for r in resources if r is not None], entry["outputs"])


def _read(path: Path, key: str, stack: str) -> mock_runtime.ProgramRun | None:
    try:
        entry = _parsed(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    return _run_of_json(entry.get("run"), stack)


def custom_resources(run: mock_runtime.ProgramRun) -> list[Rendered]:
    """A run's custom resources as :mod:`preview.changes` compares them."""
    return [Rendered(r.type, r.name, r.inputs, r.adopt) for r in run.custom_resources]


def _write(folder: Path, key: str, data: bytes) -> None:
    """Store ``data``, an entry's JSON, under ``key``; the oldest beyond :data:`MAX_ENTRIES` or
    :data:`MAX_BYTES` go."""
    temporary: Path | None = None
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".gitignore").write_text("# gpu-rollout's renderings (safe to delete)\n*\n", encoding="utf-8")
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=_TEMPORARY, suffix=".tmp", delete=False) as handle:
            temporary = Path(handle.name)
            handle.write(data)
        os.replace(temporary, folder / f"{key}.json")
        _prune(folder)
    except OSError:
        # A read-only, full or vanished folder: the rendering stands, uncached, and no half-written file stays.
        if temporary is not None:
            try:
                temporary.unlink(missing_ok=True)
            except OSError:
                pass


def _prune(folder: Path) -> None:
    """Keep the newest entries (by last use) within :data:`MAX_ENTRIES` and :data:`MAX_BYTES`, and remove what
    interrupted writes left. Only the folder's own files: ``$GPU_ROLLOUT_CACHE_DIR`` may name a folder that holds
    others."""
    found = []
    for path in folder.iterdir():
        try:
            status = path.stat()
        except OSError:
            continue  # removed meanwhile by another run
        if path.name.startswith(_TEMPORARY) and path.name.endswith(".tmp"):
            if time.time() - status.st_mtime > STALE_TEMPORARY_SECONDS:
                path.unlink(missing_ok=True)
        elif _ENTRY.fullmatch(path.name):
            found.append((status.st_mtime_ns, status.st_size, path))
    kept = total = 0
    for _, size, path in sorted(found, key=lambda entry: entry[0], reverse=True):
        total += size
        if kept and (kept >= MAX_ENTRIES or total > MAX_BYTES):
            path.unlink(missing_ok=True)
        else:
            kept += 1


def rendered_run(config: dict[str, str], stack: str, program: Path, previous_outputs: dict[str, Any] | None = None,
                 stack_outputs: dict[str, dict[str, Any]] | None = None) -> mock_runtime.ProgramRun:
    """What ``program`` registers and exports run on ``config`` as ``stack`` (``preview.run.run_program``), from
    the cache when an entry has this key, else rendered and stored. It is what JSON holds of it either way, so a
    cached run and a fresh one hand the caller the same values. A program that raises (a SpecError for bad
    config) raises every time: only a rendering is kept."""
    folder = cache_dir()
    try:
        key = None if folder is None else rendering_key(config, stack, program, previous_outputs, stack_outputs)
    except (TypeError, ValueError):  # outputs given that JSON cannot hold: render, keep nothing
        key = None
    if folder is None or key is None:
        return mock_runtime.run_program(config, stack, program, previous_outputs, stack_outputs)
    cached = _read(folder / f"{key}.json", key, stack)
    if cached is not None:
        try:
            os.utime(folder / f"{key}.json")  # used: the last to be pruned
        except OSError:
            pass
        return cached
    run = mock_runtime.run_program(config, stack, program, previous_outputs, stack_outputs)
    try:
        data = json.dumps({"key": key, "run": _run_as_json(run)}, allow_nan=False, default=_unknown_as_json).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold: the run stands, uncached
        return run
    kept = _run_of_json(_parsed(data)["run"], stack)
    if kept is None:
        return run
    _write(folder, key, data)
    return kept


def rendered(config: dict[str, str], stack: str, program: Path, previous_outputs: dict[str, Any] | None = None,
             stack_outputs: dict[str, dict[str, Any]] | None = None) -> Rendering:
    """The outputs and custom resources of :func:`rendered_run`."""
    run = rendered_run(config, stack, program, previous_outputs, stack_outputs)
    return run.outputs, custom_resources(run)


def rendered_outputs(config: dict[str, str], stack: str, program: Path,
                     previous_outputs: dict[str, Any] | None = None,
                     stack_outputs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The outputs of :func:`rendered`."""
    return rendered(config, stack, program, previous_outputs, stack_outputs)[0]


__all__ = ["CACHE_ENV", "CACHE_FOLDER", "Rendering", "cache_dir", "installed_distributions", "program_digest",
           "rendered", "rendered_outputs", "rendering_key"]
