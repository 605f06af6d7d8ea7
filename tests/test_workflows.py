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
from rollout import github_doctor
from rollout.github_doctor import READ_ONLY_ENVIRONMENT
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
    # ... and those get only the preview environment's read-only identities (docs/cicd.md).
    job = preview["jobs"]["preview"]
    assert job["environment"] == READ_ONLY_ENVIRONMENT
    (access,) = [s for s in _steps(job) if s.get("uses", "").endswith("/stack-access")]
    assert access["with"]["azure-client-id"] == "${{ vars.AZURE_PREVIEW_CLIENT_ID }}"
    assert access["with"]["aws-role-arn"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"
    assert access["with"]["existing-kubeconfig"] == "${{ secrets.PREVIEW_KUBECONFIG }}"
    assert pulumi[0]["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_PREVIEW_TOKEN }}"}  # no passphrase


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
    # The job that reads the soak signs it, in the environment of its own, with a canary identity that only reads.
    assert attest["environment"] == "attest"
    (access,) = [s for s in _steps(attest) if s.get("uses", "").endswith("/stack-access")]
    assert access["with"]["azure-client-id"] == "${{ vars.AZURE_ATTEST_CLIENT_ID }}"
    assert access["with"]["aws-role-arn"] == "${{ vars.AWS_ATTEST_ROLE_ARN }}"
    assert access["with"]["existing-kubeconfig"] == "${{ secrets.ATTEST_KUBECONFIG }}"
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
    # From main's checkout: a dispatch on a branch is refused with the reason before anything is installed.
    assert job["if"] == "github.ref == 'refs/heads/main'"
    first = _steps(workflow["jobs"]["stack"])[0]
    assert first["if"] == "github.ref != 'refs/heads/main'" and "exit 1" in first["run"]
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




# ---------------------------------------------------------------- who may hold which credential, in every workflow

MAIN_ONLY = "github.ref == 'refs/heads/main'"
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment",
                       "issue_comment", "workflow_run")


def _environment(job: dict) -> str | None:
    found = job.get("environment")
    return found.get("name") if isinstance(found, dict) else found


def _writes(job: dict) -> bool:
    """A job of any environment but the read-only one (a computed one included) holds write credentials."""
    return _environment(job) is not None and _environment(job) != READ_ONLY_ENVIRONMENT


def _secrets(job: dict) -> set[str]:
    return set(re.findall(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)", json.dumps(job))) - {"GITHUB_TOKEN"}


def _top_level_or(condition: str) -> bool:
    depth = 0
    for at, char in enumerate(condition):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and condition.startswith("||", at):
            return True
    return False


def runs_from_main_only(condition: str | None) -> bool:
    """Whether a job's ``if`` holds it to main: the guard first, and nothing after it that could stand alone
    (a top-level ``||``)."""
    text = (condition or "").strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2].strip()
    if text == MAIN_ONLY:
        return True
    return text.startswith(MAIN_ONLY + " && ") and not _top_level_or(text[len(MAIN_ONLY):])


@pytest.mark.parametrize(("condition", "guarded"), [
    ("github.ref == 'refs/heads/main'", True),
    ("${{ github.ref == 'refs/heads/main' }}", True),
    ("github.ref == 'refs/heads/main' && needs.a.result == 'success'", True),
    ("github.ref == 'refs/heads/main' && (always() || cancelled())", True),
    (None, False),
    ("needs.a.result == 'success'", False),
    ("needs.a.result == 'success' && github.ref == 'refs/heads/main'", False),  # first, where it is seen
    ("github.ref == 'refs/heads/main' && a || always()", False),  # (main && a) || always(): any branch
    ("github.ref == 'refs/heads/mainline'", False),
])
def test_the_main_guard_is_recognised_only_where_it_holds(condition: str | None, guarded: bool) -> None:
    assert runs_from_main_only(condition) is guarded


def test_every_job_that_uses_a_write_environment_runs_from_main_only() -> None:
    """Every workflow, those added later included: a job of any environment but `preview` runs only for
    refs/heads/main, guarded in the job (each environment's deployment-branch policy holds it too, docs/cicd.md)."""
    writing = [(name, job_id, job) for name, workflow in _workflows().items()
               for job_id, job in workflow["jobs"].items() if _writes(job)]
    assert {(name, job_id) for name, job_id, _ in writing} >= {
        ("deploy.yml", "step"), ("deploy.yml", "prod"), ("soak.yml", "attest"), ("rollback.yml", "rollback")}
    for name, job_id, job in writing:
        assert runs_from_main_only(job.get("if")), f"{name}: job {job_id} ({_environment(job)}) is not held to main"


def test_no_job_a_pull_request_starts_reads_a_secret_a_deploying_job_reads() -> None:
    """A pull request's jobs run code nobody reviewed: they use no write environment and read no secret that any
    job of a write environment reads (a secret by another name in the preview environment: its own, read-only)."""
    workflows = _workflows()
    deploying = set().union(*(_secrets(job) for w in workflows.values() for job in w["jobs"].values() if _writes(job)))
    assert {"PULUMI_ACCESS_TOKEN", "GPU_ROLLOUT_SIGNING_KEY", "EXISTING_KUBECONFIG"} <= deploying
    started = [(name, job_id, job) for name, w in workflows.items() if set(w["on"]) & set(PULL_REQUEST_EVENTS)
               for job_id, job in w["jobs"].items()]
    assert started  # preview.yml
    for name, job_id, job in started:
        assert not _writes(job), f"{name}: job {job_id} uses the write environment {_environment(job)}"
        assert not _secrets(job) & deploying, f"{name}: job {job_id} reads {sorted(_secrets(job) & deploying)}"


def test_the_signing_key_is_read_by_the_attest_job_alone() -> None:
    readers = [(name, job_id, job) for name, w in _workflows().items() for job_id, job in w["jobs"].items()
               if "GPU_ROLLOUT_SIGNING_KEY" in _secrets(job)]
    assert [(name, job_id) for name, job_id, _ in readers] == [("soak.yml", "attest")]
    assert all(_environment(job) == "attest" for _, _, job in readers)
    # No other job uses the attest environment, whose secrets are the key and the read-only canary identity.
    users = [(name, job_id) for name, w in _workflows().items() for job_id, job in w["jobs"].items()
             if _environment(job) == "attest"]
    assert users == [("soak.yml", "attest")]


def test_the_repository_settings_are_checked_every_week_read_only() -> None:
    workflow = _workflows()["repository-settings.yml"]
    assert workflow["on"]["schedule"] == [{"cron": "41 6 * * 1"}] and "workflow_dispatch" in workflow["on"]
    job = workflow["jobs"]["doctor"]
    assert job["permissions"] == {"contents": "read"}
    (app,) = [s for s in _steps(job) if s.get("uses", "").startswith("actions/create-github-app-token@")]
    granted = {k: v for k, v in app["with"].items() if k.startswith("permission-")}
    assert granted == {"permission-administration": "read", "permission-environments": "read",
                       "permission-secrets": "read", "permission-contents": "read"}
    assert "gpu-rollout doctor github" in _runs(job)


@pytest.mark.parametrize(("stack_file", "previewed"), [
    ("config:\n  gpu-driver-upgrade:driver: {}\n", True),  # Pulumi Cloud's own secrets
    ("encryptionsalt: v1:abc\nconfig: {}\n", False),
    ("secretsprovider: passphrase\nconfig: {}\n", False),
    ("secretsprovider: awskms://alias/x\nconfig: {}\n", True),
])
def test_a_stack_a_passphrase_decrypts_gets_no_engine_preview(tmp_path: Path, stack_file: str, previewed: bool) -> None:
    (tmp_path / "Pulumi.s.yaml").write_text(stack_file)
    out, summary = tmp_path / "out", tmp_path / "summary"
    env = {"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
    subprocess.run([str(SCRIPTS / "previewable.sh"), "https://api.pulumi.com", "s"], cwd=tmp_path, env=env,
                   check=True)
    assert out.read_text() == f"configured={'true' if previewed else 'false'}\n"
    assert ("passphrase" in (summary.read_text() if summary.exists() else "")) is not previewed
    subprocess.run([str(SCRIPTS / "previewable.sh"), "", "s"], cwd=tmp_path, env=env, check=True)
    assert out.read_text().endswith("configured=false\n")  # no backend: no engine preview


def test_the_doctor_checks_every_environment_the_workflows_use_and_the_preview_s_secrets() -> None:
    """`gpu-rollout doctor github` knows the environments and the preview's secrets by name: the workflows'."""
    named = {_environment(job) for w in _workflows().values() for job in w["jobs"].values() if _environment(job)}
    computed = {name for name in named if "${{" in name}  # rollback's: a stage's environment (ENVIRONMENTS)
    assert "${{ fromJSON(needs.stack.outputs.stack).environment }}" in computed
    assert (named - computed) | set(ENVIRONMENTS.values()) <= set(github_doctor.ENVIRONMENTS)
    assert {"preview", "attest", "settings"} <= named
    assert _secrets(_workflows()["preview.yml"]["jobs"]["preview"]) == github_doctor.PREVIEW_SECRETS
