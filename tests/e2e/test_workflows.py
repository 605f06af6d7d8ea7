"""actionlint (built from its Go module by e2e/build.sh) passes the CI/CD workflows: expressions, job
graph, matrix, action inputs against each action's metadata it knows, shell of every run step."""

from __future__ import annotations

import subprocess

from tests.e2e.controlplane import BIN_DIR
from tests.conftest import PROJECT_DIR


def test_actionlint_passes_the_workflows() -> None:
    workflows = sorted((PROJECT_DIR / ".github" / "workflows").glob("*.y*ml"))  # every one, those added later too
    assert {"deploy.yml", "preview.yml", "rollback.yml", "soak.yml", "repository-settings.yml",
            "fleet-halt.yml", "fleet-resume.yml", "release-node.yml"} <= {w.name for w in workflows}
    done = subprocess.run(
        [str(BIN_DIR / "actionlint"), "-no-color", *map(str, workflows)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_does_find_a_broken_workflow(tmp_path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
    done = subprocess.run([str(BIN_DIR / "actionlint"), "-no-color", str(bad)], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "matrix" in done.stdout
