"""docs/architecture.md opens with the map of packages; the map, pyproject.toml and the tree agree.

Every top-level product package is in the map, in the layers contract that `lint-imports` enforces, in the
packages setuptools installs and in mypy's files; the map lists them in the contract's order, top to bottom."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import PROJECT_DIR
from tests.product_source import PACKAGES

ROW = re.compile(r"^\| `(?P<package>[a-z_]+)/` \|", re.M)


def _pyproject() -> dict:
    return tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())


def _packages_on_disk() -> list[str]:
    return list(PACKAGES)


def _mapped() -> list[str]:
    text = (PROJECT_DIR / "docs" / "architecture.md").read_text()
    section = text[text.index("## Where things live"):]
    section = section[:section.index("\n## ", 1)]
    return [m["package"] for m in ROW.finditer(section)]


def _layers() -> list[str]:
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers" and "rollout" in c["layers"]]
    assert len(layered) == 1, "one layers contract over the top-level packages"
    return [name.strip() for layer in layered[0]["layers"] for name in layer.split("|")]


def test_architecture_opens_with_the_map():
    text = (PROJECT_DIR / "docs" / "architecture.md").read_text()
    first_section = next(line for line in text.splitlines() if line.startswith("## "))
    assert first_section == "## Where things live"


def test_every_package_is_in_the_map_and_in_the_layers_contract_in_order():
    on_disk = _packages_on_disk()
    assert sorted(_mapped()) == on_disk, "docs/architecture.md's map and the tree disagree"
    assert _layers() == _mapped(), "the map lists the packages in the layers contract's order, top to bottom"


def test_pyproject_installs_lints_and_types_every_package():
    project = _pyproject()
    on_disk = set(_packages_on_disk())
    installed = {name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert installed == on_disk
    assert set(project["tool"]["importlinter"]["root_packages"]) == on_disk
    assert set(project["tool"]["mypy"]["files"]) == on_disk


def test_the_readme_layout_names_every_package():
    readme = (PROJECT_DIR / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 1)]
    named = {line.split("/")[0] for line in layout.splitlines() if re.match(r"^[a-z_]+/", line)}
    assert set(PACKAGES) <= named, f"README's layout misses {sorted(set(PACKAGES) - named)}"
