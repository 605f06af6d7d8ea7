"""The CI/CD workflows (.github/workflows, their composite actions and scripts) pass zizmor's security audits,
with every action pinned by commit, and do what docs/cicd.md says: deploy what differs from what is deployed,
with the protected base's pack; soak, verify and propose attestations on a schedule; roll back from the
stack's protected environment. actionlint, a Go tool, checks them in `make e2e` (tests/e2e/test_workflows.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rollout.stacks import ENVIRONMENTS
from spec.base import Stage
from tests.conftest import PROJECT_DIR

WORKFLOWS = PROJECT_DIR / ".github" / "workflows"
ACTIONS = PROJECT_DIR / ".github" / "actions"
SCRIPTS = PROJECT_DIR / ".github" / "scripts"
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
    uses = [line.strip() for p in [*WORKFLOWS.glob("*.yml"), *ACTIONS.glob("*/action.yml")]
            for line in p.read_text().splitlines() if "uses:" in line and "uses: ./" not in line]
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
    # The pack and stage config of the pull request's base, never the pull request's own policy/.
    (pack,) = [s for s in steps if s.get("uses", "").endswith("/protected-pack")]
    assert pack["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert pack["with"]["stage"] == "${{ matrix.stage }}"
    assert pulumi and pulumi[0]["with"]["policyPacks"] == "${{ steps.pack.outputs.pack }}"
    assert pulumi[0]["with"]["policyPackConfigs"] == "${{ steps.pack.outputs.config }}"
    # Every stack file, from `gpu-rollout stacks`, each with its cluster's credential steps.
    assert preview["jobs"]["preview"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert "gpu-rollout stacks --json" in _runs(preview["jobs"]["stacks"])
    assert any(s.get("uses", "").endswith("/stack-access") for s in steps)
    # Forks get no secrets: the engine preview runs only on this repository's branches.
    assert "head.repo.full_name == github.repository" in preview["jobs"]["stacks"]["if"]


def test_zizmor_finds_nothing_in_the_composite_actions_either() -> None:
    done = subprocess.run(
        [str(ZIZMOR), "--offline", "--persona=pedantic", "--no-progress", str(ACTIONS)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in _steps(job))


def _ups(job: dict) -> list[dict]:
    return [s for s in _steps(job) if s.get("uses", "").startswith("pulumi/actions@") and s.get("with", {}).get("command")]


def test_prod_goes_up_only_from_the_protected_environment() -> None:
    """Each stack deploys from its stage's environment, as deploy-plan names it from the stack file: prod
    stacks from `production` (required reviewers), after the canary stacks of the same run."""
    deploy = _workflows()["deploy.yml"]["jobs"]
    assert ENVIRONMENTS == {Stage.CANARY: "canary", Stage.PROD: "production"}
    assert deploy["prod"]["environment"] == deploy["canary"]["environment"] == "${{ matrix.environment }}"
    assert deploy["prod"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.plan.outputs.prod) }}"
    assert deploy["canary"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.plan.outputs.canary) }}"
    assert deploy["prod"]["needs"] == ["plan", "canary"]
    assert "needs.canary.result == 'success' || needs.canary.result == 'skipped'" in deploy["prod"]["if"]
    for job_id in ("canary", "prod"):
        (up,) = _ups(deploy[job_id])
        assert up["with"]["stack-name"] == "${{ matrix.stack }}"
        assert "gpu-rollout verify --smoke --stack" in _runs(deploy[job_id])  # a smoke check: it attests nothing


def test_deploy_deploys_what_differs_from_what_is_deployed_with_the_protected_pack() -> None:
    workflow = _workflows()["deploy.yml"]
    deploy = workflow["jobs"]
    assert workflow["on"]["push"] == {"branches": ["main"]} and "workflow_dispatch" in workflow["on"]
    assert "paths" not in workflow["on"]["push"]  # a change to the program or the pack matters as much
    assert "gpu-rollout deploy-plan --json" in _runs(deploy["plan"])
    assert "HEAD^" not in json.dumps(workflow)  # never "what the last commit changed"
    for job_id in ("canary", "prod"):
        job = deploy[job_id]
        assert job["concurrency"] == {"group": "deploy-${{ matrix.stack }}", "cancel-in-progress": "false"}
        assert "still-to-deploy.sh" in _runs(job)
        (pack,) = [s for s in _steps(job) if s.get("uses", "").startswith("./.github/actions/protected-pack")]
        assert pack["with"]["ref"] == "${{ steps.still.outputs.pack }}"
        (up,) = _ups(job)
        assert up["with"]["policyPacks"] == "${{ steps.pack.outputs.pack }}"
        assert up["with"]["policyPackConfigs"] == "${{ steps.pack.outputs.config }}"
        access = [s for s in _steps(job) if s.get("uses", "").startswith("./.github/actions/stack-access")]
        assert access and access[0]["with"]["cloud"] == "${{ matrix.cloud }}"
    assert "concurrency" not in workflow  # one group per stack, not one for the whole workflow


def test_the_stack_access_action_reaches_aks_eks_and_existing_clusters_without_a_person() -> None:
    action = yaml.load((ACTIONS / "stack-access" / "action.yml").read_text(), Loader=yaml.BaseLoader)
    steps = action["runs"]["steps"]
    text = "\n".join(s.get("run", "") for s in steps)
    assert "kubelogin convert-kubeconfig --login azurecli" in text and "az aks install-cli" in text
    assert "aws eks update-kubeconfig" in text
    uses = {s.get("uses", "").split("@")[0]: s for s in steps if s.get("uses")}
    assert uses["Azure/login"]["if"] == "inputs.cloud == 'aks'"
    assert uses["aws-actions/configure-aws-credentials"]["with"]["role-to-assume"] == "${{ inputs.aws-role-arn }}"


def test_the_soak_schedule_verifies_each_canary_once_soaked_and_proposes_a_pull_request() -> None:
    workflow = _workflows()["soak.yml"]
    assert workflow["on"]["schedule"] and "workflow_dispatch" in workflow["on"]
    assert "gpu-rollout stacks --stage canary --json" in _runs(workflow["jobs"]["canaries"])
    attest = workflow["jobs"]["attest"]
    runs = _runs(attest)
    assert "gpu-rollout soak --stack" in runs and "--json" in runs
    (verify,) = [s for s in _steps(attest) if "gpu-rollout verify" in s.get("run", "")]
    assert "--prometheus" not in verify["run"] and "--smoke" not in verify["run"]
    assert verify["if"] == "steps.soak.outputs.ready == 'true'"
    assert verify["env"]["GPU_ROLLOUT_SIGNING_KEY"] == "${{ secrets.GPU_ROLLOUT_SIGNING_KEY }}"
    (proposal,) = [s for s in _steps(attest) if s.get("uses", "").startswith("peter-evans/create-pull-request@")]
    assert proposal["with"]["token"] == "${{ steps.app.outputs.token || secrets.ATTESTATION_PR_TOKEN || github.token }}"
    assert proposal["with"]["add-paths"] == "attestations/${{ matrix.stack }}/*.json"


def test_rollback_runs_from_the_stack_s_protected_environment_and_proposes_its_stack_file() -> None:
    workflow = _workflows()["rollback.yml"]
    assert set(workflow["on"]["workflow_dispatch"]["inputs"]) == {"stack", "to-version", "reason", "all-config"}
    job = workflow["jobs"]["rollback"]
    assert job["environment"] == "${{ fromJSON(needs.stack.outputs.stack).environment }}"
    assert job["concurrency"]["group"] == "deploy-${{ inputs.stack }}"  # never beside a deploy's `up`
    runs = _runs(job)
    assert "pulumi config refresh" in runs and "gpu-rollout rollback" in runs and "--reason" in runs
    (proposal,) = [s for s in _steps(job) if s.get("uses", "").startswith("peter-evans/create-pull-request@")]
    assert proposal["with"]["add-paths"] == "Pulumi.${{ inputs.stack }}.yaml"


@pytest.mark.parametrize(("tokens", "says"), [
    ({}, "**The required checks did not start by themselves.**"),
    ({"APP_TOKEN": "ghs_x"}, "Opened with the GitHub App's token: the required checks run on it"),
    ({"PR_TOKEN": "github_pat_x"}, "Opened with the fine-grained token ATTESTATION_PR_TOKEN"),
])
def test_a_pull_request_opened_with_the_default_token_says_its_checks_must_be_started_by_hand(
        tokens: dict[str, str], says: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "KIND": "attestation", "STACK": "canary", "APP_TOKEN": "", "PR_TOKEN": "",
           **tokens}
    done = subprocess.run([str(SCRIPTS / "pull-request-body.sh")], capture_output=True, text=True, env=env,
                          check=True)
    assert says in done.stdout and "`gpu-rollout verify --stack canary`" in done.stdout


def test_codeowners_guard_the_pack_the_attestations_and_the_workflows() -> None:
    owned = {line.split()[0] for line in (PROJECT_DIR / ".github" / "CODEOWNERS").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert {"/policy/", "/attestations/", "/.github/"} <= owned
