"""The guard's image (Dockerfile) and the workflow that builds it (.github/workflows/guard-image.yml): a base pinned
by digest, every package the project installs, a non-root user the Deployment runs as, `gpu-rollout` as entrypoint;
pushed only from main or a release tag, with build provenance attested on the digest it pushed. There is no
container runtime here: the build itself runs only in CI (actionlint and zizmor check the workflow: test_workflows)."""

from __future__ import annotations

import json
import re
import tomllib

import yaml

from components import guard
from tests.conftest import PROJECT_DIR

DOCKERFILE = (PROJECT_DIR / "Dockerfile").read_text()
WORKFLOW = yaml.load((PROJECT_DIR / ".github" / "workflows" / "guard-image.yml").read_text(), Loader=yaml.BaseLoader)
DIGEST = re.compile(r"^FROM (\S+)@sha256:[0-9a-f]{64}( AS \w+)?$")


def _instructions(name: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in DOCKERFILE.splitlines() if line.startswith(f"{name} ")]


def test_every_base_is_pinned_by_digest() -> None:
    bases = [line for line in DOCKERFILE.splitlines() if line.startswith("FROM ")]
    assert len(bases) == 2
    for line in bases:
        assert DIGEST.match(line), line
    assert not any(line.startswith("# syntax=") for line in DOCKERFILE.splitlines())  # no unpinned frontend image


def test_it_installs_every_package_the_project_declares_with_its_pins() -> None:
    project = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())
    declared = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {c.split()[0] for c in _instructions("COPY") if not c.startswith("--from")}
    assert declared <= copied, declared - copied
    assert "--constraint constraints.txt ." in DOCKERFILE


def test_it_runs_as_the_deployments_non_root_user_with_gpu_rollout_as_entrypoint() -> None:
    (user,) = _instructions("USER")
    assert user == f"{guard.RUN_AS}:{guard.RUN_AS}" and guard.RUN_AS != 0
    (entrypoint,) = _instructions("ENTRYPOINT")
    assert json.loads(entrypoint) == ["gpu-rollout"]
    assert guard.command("prod", "gpu-rollout-guard")[0] == "gpu-rollout"


def test_the_workflow_pushes_from_main_or_a_tag_and_attests_the_digest_it_pushed() -> None:
    (job,) = WORKFLOW["jobs"].values()
    assert job["if"] == "github.ref == 'refs/heads/main' || startsWith(github.ref, 'refs/tags/v')"
    assert job["permissions"] == {"contents": "read", "packages": "write", "id-token": "write",
                                  "attestations": "write"}
    steps = job["steps"]
    (build,) = [s for s in steps if s.get("id") == "build"]
    assert "--push" in build["run"] and "--provenance=mode=max" in build["run"]
    (attest,) = [s for s in steps if s.get("uses", "").startswith("actions/attest-build-provenance@")]
    assert attest["with"]["subject-digest"] == "${{ steps.build.outputs.digest }}"
    assert attest["with"]["subject-name"] == "${{ steps.build.outputs.name }}"
    assert attest["with"]["push-to-registry"] == "true"
    # The registry login reads the token from stdin, never from the command line.
    (login,) = [s for s in steps if "docker login" in s.get("run", "")]
    assert "--password-stdin" in login["run"] and "$TOKEN" in login["run"]
