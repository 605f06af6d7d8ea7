"""The project's product source, for tests that scan it for a fact spelled outside its one home."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PROJECT_DIR

# The top-level packages of the product: every package of the checkout but the tests and the project's own tools
# (scripts/, benchmarks/). Read from the tree, so a new package is never missed (tests/test_package_map.py checks
# pyproject.toml and docs/architecture.md against the same list).
PACKAGES = tuple(sorted(init.parent.name for init in PROJECT_DIR.glob("*/__init__.py")
                        if init.parent.name not in {"tests", "scripts", "benchmarks"}))
# Every product package and entry point, and the tools that use them; workload/ is shipped to a pod alone (some
# scans leave it out).
PRODUCT = ("__main__.py", *PACKAGES, "scripts", "benchmarks")


def product_files(*, home: Path, leave_out: tuple[str, ...] = ()) -> list[Path]:
    """Every product .py file but ``home`` (the fact's own module) and the entries of ``leave_out``."""
    files: list[Path] = []
    for entry in PRODUCT:
        if entry in leave_out:
            continue
        path = PROJECT_DIR / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if f.relative_to(PROJECT_DIR) != home]
