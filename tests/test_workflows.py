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

from promotion_train.stacks import ENVIRONMENTS
from fleetspec.base import Stage
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
    (pack,) = [s for s in steps if "protected-pack.sh" in s.get("run", "")]
    assert pack["env"]["BASE"] == "${{ github.event.pull_request.base.sha }}"
    assert pulumi and pulumi[0]["with"]["policyPacks"] == "${{ runner.temp }}/base-pack/pack"
    assert pulumi[0]["with"]["policyPackConfigs"] == "${{ runner.temp }}/base-pack/${{ matrix.stage }}.json"
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
    """The fleet's step runs from the canary environment and brings up canary stacks only; a prod `up` it withholds
    runs in a job of the protected `production` environment (required reviewers), only when there is one."""
    deploy = _workflows()["deploy.yml"]["jobs"]
    assert ENVIRONMENTS == {Stage.CANARY: "canary", Stage.PROD: "production"}
    assert deploy["step"]["environment"] == ENVIRONMENTS[Stage.CANARY]
    assert deploy["prod"]["environment"] == ENVIRONMENTS[Stage.PROD]
    assert deploy["prod"]["needs"] == "step"
    assert "needs.step.outputs.withheld != '[]'" in deploy["prod"]["if"]
    assert "needs.step.result == 'success'" in deploy["prod"]["if"]  # never after a halted or failed step
    assert deploy["step"]["outputs"]["withheld"] == "${{ steps.advance.outputs.withheld }}"
    assert ".github/scripts/fleet-step.sh canary" in _runs(deploy["step"])
    assert ".github/scripts/fleet-step.sh prod" in _runs(deploy["prod"])
    step = (SCRIPTS / "fleet-step.sh").read_text()
    assert 'gpu-rollout fleet advance --yes --stage "$stage" --json --packs "$RUNNER_TEMP/packs"' in step
    assert "withheld=$(jq -c '.withheld // []'" in step
    assert not _ups(deploy["step"]) and not _ups(deploy["prod"])  # every `up` is the train's (the Automation API)
    assert "verify" not in _runs(deploy["step"])  # fleet advance verifies; nothing here attests


def test_deploy_takes_one_step_of_the_train_per_run_with_the_protected_packs() -> None:
    workflow = _workflows()["deploy.yml"]
    deploy = workflow["jobs"]
    assert workflow["on"]["push"] == {"branches": ["main"]} and "workflow_dispatch" in workflow["on"]
    assert workflow["on"]["schedule"] == [{"cron": "17 * * * *"}]  # rollouts end and windows open between pushes
    assert "paths" not in workflow["on"]["push"]  # a change to the program or the pack matters as much
    assert "HEAD^" not in json.dumps(workflow)  # never "what the last commit changed"
    assert "concurrency" not in workflow
    for job_id in ("step", "prod"):
        job = deploy[job_id]
        assert job["concurrency"] == {"group": "fleet", "cancel-in-progress": "false"}  # one step at a time
        assert "still-main.sh" in _runs(job)
        assert '.github/scripts/protected-packs.sh "$RUNNER_TEMP/packs"' in _runs(job)
        (access,) = [s for s in _steps(job) if s.get("uses", "").startswith("./.github/actions/fleet-access")]
        assert access["with"]["kubeconfig-dir"] == "${{ runner.temp }}/kubeconfigs"
    packs = (SCRIPTS / "protected-packs.sh").read_text()
    assert "gpu-rollout deploy-plan --json" in packs and ".packRef" in packs
    pack = (SCRIPTS / "protected-pack.sh").read_text()
    assert "python\" -m policy.bundle" in pack and 'git worktree add --force --detach "$base" "$ref"' in pack
    assert 'fleet-kubeconfigs.sh "$KUBECONFIG_DIR"' in (ACTIONS / "fleet-access" / "action.yml").read_text()


def test_the_fleet_access_action_reaches_every_cloud_of_the_fleet_without_a_person() -> None:
    action = yaml.load((ACTIONS / "fleet-access" / "action.yml").read_text(), Loader=yaml.BaseLoader)
    steps = action["runs"]["steps"]
    uses = {s.get("uses", "").split("@")[0]: s for s in steps if s.get("uses")}
    assert uses["Azure/login"]["if"] == "steps.clouds.outputs.aks == 'true'"
    assert uses["aws-actions/configure-aws-credentials"]["with"]["role-to-assume"] == "${{ inputs.aws-role-arn }}"
    script = (SCRIPTS / "fleet-kubeconfigs.sh").read_text()
    assert "kubelogin convert-kubeconfig --login azurecli" in script and "aws eks update-kubeconfig" in script
    assert '"$HOME/.kube/config"' in "\n".join(s.get("run", "") for s in steps)  # the existing clusters' contexts


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
    # validation.prometheus's bearer-env credential comes from the environment secret the docs name.
    assert verify["env"]["PROMETHEUS_TOKEN"] == "${{ secrets.PROMETHEUS_TOKEN }}"
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
