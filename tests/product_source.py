"""The project's product source, for tests that scan it for a fact spelled outside its one home."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PROJECT_DIR

# Every product package and entry point; workload/ is shipped to a pod alone (some scans leave it out).
PRODUCT = ("__main__.py", "fleetspec", "vocabulary", "gpu_knowledge", "engine_contracts", "renderers", "components", "preview", "policy", "checks", "rollout", "workload", "scripts",
           "benchmarks")


def product_files(*, home: Path, leave_out: tuple[str, ...] = ()) -> list[Path]:
    """Every product .py file but ``home`` (the fact's own module) and the entries of ``leave_out``."""
    files: list[Path] = []
    for entry in PRODUCT:
        if entry in leave_out:
            continue
        path = PROJECT_DIR / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if f.relative_to(PROJECT_DIR) != home]
