"""Assemble the policy pack as `pulumi policy publish` takes it: one self-contained folder.

``python -m policy.bundle OUT`` (``make policy-pack``) writes to ``OUT``:

- ``__main__.py``: ``policy/__main__.py``, the pack's entry point (the engine runs the pack's folder with
  ``runpy.run_path``, which puts that folder first on ``sys.path``);
- the modules of ``policy`` and of the domain packages (``fleetspec``, ``vocabulary``, ``gpu_knowledge``, ``engine_contracts``) the pack imports, found by following the imports
  from ``policy/__main__.py``, copied byte for byte (the checkout stays the one source of truth; nothing
  of this is kept in git);
- ``PulumiPolicy.yaml``: ``policy/PulumiPolicy.yaml`` with a virtualenv of the pack's own (``venv``)
  instead of the project's ``../.venv``;
- ``requirements.txt``: exactly the distributions the copied modules import, each pinned to the version
  ``constraints.txt`` pins, plus ``-c constraints.txt`` with the pins of what those pull in, so the pack's
  virtualenv gets the versions the project is tested with;
- ``.gitignore``: ``venv/`` and bytecode, which `pulumi policy publish` leaves out of the archive it
  uploads (it honours .gitignore files: pulumi sdk/go/common/util/archive/archive.go).

Why a copy and not a restructured ``policy/``: the rules read facts through the domain packages (labels, versions,
compatibility tables, capacity arithmetic), which the program, `gpu-rollout` and the live checks share.
Moving those modules under ``policy/`` would make the program depend on its policy pack, and a second
copy in git would drift. Pulumi publishes a folder (pulumi pkg/backend/httpstate/policypack.go: the
pack's folder as a tarball; on enable, ``installRequiredPolicy`` unpacks it and installs its
dependencies into the virtualenv PulumiPolicy.yaml names), so the folder is assembled at build time.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import sys
from pathlib import Path

import yaml

from git_revisions import repository

ROOT = Path(__file__).resolve().parent.parent  # the checkout: policy and the domain packages live here
ENTRY = ROOT / "policy" / "__main__.py"
CONSTRAINTS = ROOT / "constraints.txt"
VIRTUALENV = "venv"


def _name(distribution: str) -> str:
    """A distribution name as PEP 503 normalises it (pulumi_policy and pulumi-policy are one)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _module_file(dotted: str) -> Path | None:
    """The checkout's file for a module of one of its own packages, or None when it is not one."""
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_local(dotted: str) -> bool:
    return (ROOT / dotted.split(".")[0] / "__init__.py").is_file()


def _imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """(modules of the checkout's packages, top-level third-party modules) that ``path`` imports."""
    local: set[str] = set()
    external: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def found(dotted: str) -> None:
        if _is_local(dotted):
            local.add(dotted)
        elif dotted.split(".")[0] not in sys.stdlib_module_names:
            external.add(dotted.split(".")[0])

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found(target)
            for alias in node.names:  # `from gpu_knowledge import labels` imports the module gpu_knowledge.labels
                if _is_local(target) and _module_file(f"{target}.{alias.name}") is not None:
                    local.add(f"{target}.{alias.name}")
    return local, external


def pack_modules() -> tuple[dict[str, Path], set[str]]:
    """Every module of the checkout the pack imports (with the packages above it), and the top-level
    third-party modules those import."""
    modules: dict[str, Path] = {}
    external: set[str] = set()
    todo = [("__main__", ENTRY)]
    while todo:
        module, path = todo.pop()
        local, more = _imports(path, module)
        external |= more
        for dotted in sorted(local):
            parts = dotted.split(".")
            for depth in range(1, len(parts) + 1):  # a module needs every package above it
                name = ".".join(parts[:depth])
                if name in modules:
                    continue
                file = _module_file(name)
                if file is None:
                    raise ValueError(f"{path}: imports {name}, which is not a module of {ROOT}")
                modules[name] = file
                todo.append((name, file))
    return modules, external


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip()
    return pins


def requirements(external: set[str]) -> list[str]:
    """The distributions providing ``external`` modules, pinned from constraints.txt."""
    providers = importlib.metadata.packages_distributions()
    pins = _pins()
    wanted: set[str] = set()
    for top in external:
        if top not in providers:
            raise ValueError(f"the pack imports {top}, which no installed distribution provides")
        wanted.update(_name(d) for d in providers[top])
    missing = sorted(n for n in wanted if n not in pins)
    if missing:
        raise ValueError(f"constraints.txt pins no version of {', '.join(missing)} (make constraints)")
    return sorted(f"{name}=={pins[name]}" for name in wanted)


def _requires(distribution: str) -> list[str]:
    """The distributions ``distribution`` depends on (extras left out; other markers kept: a pin of a
    distribution that ends up not installed only constrains nothing)."""
    try:
        requires = importlib.metadata.distribution(distribution).requires or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names = []
    for requirement in requires:
        if "extra ==" in requirement.replace('"', "'").replace("extra==", "extra =="):
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if match:
            names.append(_name(match.group(0)))
    return names


def dependency_closure(names: list[str]) -> list[str]:
    """``names`` and every distribution they depend on, transitively."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _name(todo.pop())
        if name not in seen:
            seen.add(name)
            todo.extend(_requires(name))
    return sorted(seen)


def build(out: Path) -> Path:
    """Write the pack's folder to ``out`` (replacing what a previous build left there); return it."""
    out = Path(out)
    modules, external = pack_modules()
    pinned = requirements(external)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for source in modules.values():
        target = out / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    shutil.copyfile(ENTRY, out / "__main__.py")

    project = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    project["runtime"] = {"name": "python", "options": {"toolchain": "pip", "virtualenv": VIRTUALENV}}
    (out / "PulumiPolicy.yaml").write_text(yaml.safe_dump(project, sort_keys=False))

    pins = _pins()
    closure = [n for n in dependency_closure([line.split("==")[0] for line in pinned]) if n in pins]
    (out / "constraints.txt").write_text(
        "# Versions of what the pack's requirements pull in, as the project pins them (constraints.txt).\n"
        + "".join(f"{name}=={pins[name]}\n" for name in closure)
    )
    (out / "requirements.txt").write_text(
        "# What the pack imports, pinned as the project pins it; constraints.txt pins what these pull in.\n"
        "-c constraints.txt\n" + "".join(f"{line}\n" for line in pinned)
    )
    (out / ".gitignore").write_text(f"{VIRTUALENV}/\n__pycache__/\n*.pyc\n")
    return out


def git_ignored(path: Path) -> bool:
    """Whether the checkout's .gitignore files ignore ``path`` (False without git)."""
    return repository.is_ignored(ROOT, path)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m policy.bundle OUT_DIR", file=sys.stderr)
        return 2
    out = build(Path(argv[0]))
    print(f"policy pack assembled in {out}")
    if git_ignored(out):
        # pulumi's archive (sdk/go/common/util/archive/archive.go) applies every .gitignore above the pack's
        # folder too: published from here, the pack would upload without its files.
        print("it lies in a git-ignored folder: to publish, build it outside the checkout "
              "(make policy-pack POLICY_PACK_DIR=...) and run `pulumi policy publish <org>` there")
    else:
        print("publish it with `pulumi policy publish <org>` run in that folder")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
