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
    assert "needs.step.outputs.withheld != '[]'" in deploy["prod"]["if"]  # a halted train withholds nothing
    # A step that failed on a cluster it could not read still offers the prod `up`s that do not depend on it.
    assert "!cancelled()" in deploy["prod"]["if"] and "github.ref == 'refs/heads/main'" in deploy["prod"]["if"]
    assert deploy["step"]["outputs"]["withheld"] == "${{ steps.advance.outputs.withheld }}"
    # The approval is bound to what was shown: the step's plan (config digests, pack commits) is the prod job's
    # --expect, and the prod job neither skips after the approval (no still-main) nor recomputes other `up`s.
    assert deploy["step"]["outputs"]["approval"] == "${{ steps.advance.outputs.approval }}"
    (prod_step,) = [s for s in _steps(deploy["prod"]) if "fleet-step.sh prod" in s.get("run", "")]
    assert prod_step["env"]["APPROVAL"] == "${{ needs.step.outputs.approval }}"
    assert "still-main.sh" not in _runs(deploy["prod"])
    assert ".github/scripts/fleet-step.sh canary" in _runs(deploy["step"])
    assert ".github/scripts/fleet-step.sh prod" in _runs(deploy["prod"])
    step = (SCRIPTS / "fleet-step.sh").read_text()
    assert 'fleet advance --yes --stage "$stage" --json --packs "$RUNNER_TEMP/packs"' in step
    assert "withheld=$(jq -c '.withheld // []'" in step and "approval=$(jq -c '.approval // null'" in step
    assert 'args+=(--expect "$RUNNER_TEMP/approval.json")' in step
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
    # One step at a time, never cancelled; a prod approval waiting is in a group of its own, so it never holds back
    # the step that watches, halts and moves the canaries (the train's Lease keeps the two `advance`s apart).
    assert deploy["step"]["concurrency"] == {"group": "fleet", "cancel-in-progress": "false"}
    assert deploy["prod"]["concurrency"] == {"group": "fleet-prod", "cancel-in-progress": "false"}
    assert "still-main.sh" in _runs(deploy["step"])
    for job_id in ("step", "prod"):
        job = deploy[job_id]
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
    assert job["if"].startswith("github.ref == 'refs/heads/main' && ")
    first = _steps(workflow["jobs"]["stack"])[0]
    assert first["if"] == "github.ref != 'refs/heads/main'" and "exit 1" in first["run"]
    # Never beside a `fleet advance`: the rollback's `up` holds the train's Lease (no deploy job uses a per-stack
    # group since the train).
    assert "concurrency" not in job
    runs = _runs(job)
    assert "pulumi config refresh" in runs and "--reason" in runs
    assert 'gpu-rollout fleet hold --kubeconfig-dir "$RUNNER_TEMP/kubeconfigs" -- \\\n' \
           '  .venv/bin/gpu-rollout rollback "${args[@]}"' in runs
    # A rollback is a halt of its wave: recorded at once, before the approval, with no Lease waited for.
    halt = workflow["jobs"]["halt"]
    assert halt["environment"] == "canary" and job["needs"] == ["stack", "halt"] and "concurrency" not in halt
    assert 'gpu-rollout fleet halt --wave-of "$STACK" --reason "$REASON"' in _runs(halt)
    assert "!cancelled()" in job["if"]  # the rollback runs whatever the halt could reach
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


def test_codeowners_guard_the_pack_the_attestations_and_the_workflows() -> None:
    owned = {line.split()[0] for line in (PROJECT_DIR / ".github" / "CODEOWNERS").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert {"/policy/", "/attestations/", "/.github/"} <= owned


def test_halt_resume_and_release_node_are_workflows_on_main() -> None:
    """`fleet halt` without approval (pausing is always safe), `fleet resume` and `release-node` after the production
    approval; each job that uses an environment runs from main only."""
    workflows = _workflows()
    halt = workflows["fleet-halt.yml"]
    assert set(halt["on"]) == {"workflow_dispatch"}
    (job,) = halt["jobs"].values()
    assert job["environment"] == "canary" and "gpu-rollout fleet halt --reason" in _runs(job)
    for name, verb in (("fleet-resume.yml", "gpu-rollout fleet resume"), ("release-node.yml", "gpu-rollout release-node")):
        jobs = workflows[name]["jobs"]
        assert set(workflows[name]["on"]) == {"workflow_dispatch"}
        assert jobs["approval"]["environment"] == "production" and jobs["approval"]["permissions"] == {}
        (acting,) = [j for j in jobs.values() if verb in _runs(j)]
        assert acting["needs"] == "approval"
    for name, workflow in workflows.items():
        for job_id, job in workflow["jobs"].items():
            if job.get("environment") in ("canary", "production") and name in (
                    "fleet-halt.yml", "fleet-resume.yml", "release-node.yml", "deploy.yml", "rollback.yml"):
                assert "github.ref == 'refs/heads/main'" in job.get("if", ""), (name, job_id)


def test_one_cluster_without_a_kubeconfig_stops_only_what_depends_on_it(tmp_path: Path) -> None:
    """fleet-kubeconfigs.sh under `set -e`: a cluster whose credentials fail is named, the others are written."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    stacks = {"stacks": [{"stack": "canary", "cloud": "aks", "aksResourceGroup": "rg", "aksClusterName": "weu"},
                         {"stack": "eks-canary", "cloud": "eks", "eksClusterName": "use1", "eksRegion": "us-east-1"}]}
    fake = {"gpu-rollout": f"#!/bin/sh\necho '{json.dumps(stacks)}'\n",
            "az": "#!/bin/sh\necho 'ERROR: cluster weu unreachable' >&2\nexit 1\n",
            "kubelogin": "#!/bin/sh\nexit 0\n",
            "aws": "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --kubeconfig ] && echo ok > \"$2\"; shift; done\n"}
    for name, text in fake.items():
        path = (tmp_path / ".venv" / "bin" / name) if name == "gpu-rollout" else (bin_dir / name)
        path.write_text(text)
        path.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run([str(SCRIPTS / "fleet-kubeconfigs.sh"), str(tmp_path / "kubeconfigs")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "kubeconfigs").iterdir()) == ["eks-canary"]
    assert "::warning::no kubeconfig for stack canary (exit 1)" in done.stdout
    assert "no kubeconfig for: canary" in summary.read_text()


def test_the_approved_step_waits_for_the_lease_and_passes_the_plan_it_was_approved_for(tmp_path: Path) -> None:
    """fleet-step.sh prod: the approved plan goes to --expect; refused because the step job holds the Lease, it
    tries again instead of failing the approved job."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    refused = {"schemaVersion": 1, "error": {"code": 1, "kind": "refused", "problems": [], "message":
               "fleet advance refused: another `fleet advance` holds the train's lease kube-system/x"}}
    done = {"schemaVersion": 1, "applies": True, "next": "wait", "ups": [{"stack": "prod", "ok": True, "detail": "ok"}],
            "withheld": [], "approval": None, "blocked": [], "unread": []}
    (tmp_path / "refused.json").write_text(json.dumps(refused))
    (tmp_path / "done.json").write_text(json.dumps(done))
    script = (f"#!/bin/sh\necho \"$*\" >> {calls}\n"
              f"if [ $(wc -l < {calls}) -lt 2 ]; then cat {tmp_path}/refused.json; exit 1; fi\n"
              f"cat {tmp_path}/done.json\n")
    (tmp_path / ".venv" / "bin" / "gpu-rollout").write_text(script)
    (tmp_path / ".venv" / "bin" / "gpu-rollout").chmod(0o755)
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {"PATH": "/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output), "GITHUB_SHA": "c0ffee",
           "GITHUB_STEP_SUMMARY": str(summary), "APPROVAL": '{"commit": "c0ffee", "doneWaves": [], "ups": []}',
           "LEASE_RETRY": "0"}
    ran = subprocess.run([str(SCRIPTS / "fleet-step.sh"), "prod"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and all(f"--expect {tmp_path}/approval.json" in line for line in lines)
    assert json.loads((tmp_path / "approval.json").read_text())["commit"] == "c0ffee"
    assert "withheld=[]" in output.read_text() and "- up `prod`: done: ok" in summary.read_text()
