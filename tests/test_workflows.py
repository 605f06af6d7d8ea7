"""The CI/CD workflows (.github/workflows) pass zizmor's security audits, with every action pinned by commit.
actionlint, a Go tool, checks them in `make e2e` (tests/e2e/test_workflows.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import PROJECT_DIR

WORKFLOWS = PROJECT_DIR / ".github" / "workflows"
ZIZMOR = Path(sys.executable).parent / "zizmor"


def _workflows() -> dict[str, dict]:
    return {p.name: yaml.load(p.read_text(), Loader=yaml.BaseLoader) for p in sorted(WORKFLOWS.glob("*.yml"))}


def test_zizmor_finds_nothing_even_pedantic() -> None:
    done = subprocess.run(
        [str(ZIZMOR), "--offline", "--persona=pedantic", "--no-progress", str(WORKFLOWS)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr


def test_every_action_is_pinned_by_commit_with_its_version_named() -> None:
    uses = [line.strip() for p in WORKFLOWS.glob("*.yml") for line in p.read_text().splitlines() if "uses:" in line]
    assert uses
    for line in uses:
        assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line


def test_every_job_declares_least_privilege_permissions() -> None:
    for name, workflow in _workflows().items():
        assert workflow["permissions"] == {}, name  # nothing by default
        for job_id, job in workflow["jobs"].items():
            assert "permissions" in job, (name, job_id)
            assert "write-all" not in str(job["permissions"]), (name, job_id)


def test_previews_post_the_diff_and_run_the_pack_with_the_stage_config() -> None:
    preview = _workflows()["preview.yml"]
    steps = [s for job in preview["jobs"].values() for s in job["steps"]]
    assert any("gpu-rollout diff" in s.get("run", "") and "--markdown" in s.get("run", "") for s in steps)
    pulumi = [s for s in steps if s.get("uses", "").startswith("pulumi/actions@")]
    assert pulumi and pulumi[0]["with"]["policyPacks"] == "policy"
    assert pulumi[0]["with"]["policyPackConfigs"] == "policy/${{ matrix.stage }}.json"
    # Forks get no secrets: the engine preview runs only on this repository's branches.
    assert "head.repo.full_name == github.repository" in preview["jobs"]["preview"]["if"]


def test_prod_goes_up_only_from_the_protected_environment() -> None:
    deploy = _workflows()["deploy.yml"]["jobs"]
    assert deploy["prod"]["environment"] == "production"
    ups = {
        job_id: [s["with"]["stack-name"] for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
        for job_id, job in deploy.items()
    }
    assert ups["prod"] == ["prod"] and ups["canary"] == ["canary"]
    assert all("prod" not in stacks for job_id, stacks in ups.items() if job_id != "prod")
    assert any("gpu-rollout verify --stack canary" in s.get("run", "") for s in deploy["canary"]["steps"])
