"""`gpu-rollout diff` on temporary git repositories with real commits: what each kind of change shows (rows
and risks, not whole strings), added and removed stack files, the default base, and bad flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from policy.evaluate import Violation
from policy.findings import Level
from preview import diff as compare
from rollout import diff as verb
from rollout import documents
from rollout.cli import app
from engine_contracts import attestation
from tests.conftest import PROJECT_DIR, stack_config
from tests.rollout.gitrepo import GIT_ENV, GitRepo
from tests.rollout.json_contract import document_of, error_of

runner = CliRunner()


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "fleet")


def rows(report: compare.Report, stack: str) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    (found,) = [s for s in report.stacks if s.stack == stack]
    return {(c.subject, c.field): (c.base, c.head) for c in found.changes}


def stack_diff(report: compare.Report, stack: str) -> compare.StackDiff:
    (found,) = [s for s in report.stacks if s.stack == stack]
    return found


def invoke(repo: GitRepo, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["diff", "--project-dir", str(repo.root), *args], env=GIT_ENV)
    return result.exit_code, result.stdout, result.stderr


# ---------------------------------------------------------------- what a change shows


def test_a_driver_bump_shows_the_stack_pool_and_nvidiadriver_versions(repo: GitRepo) -> None:
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    base = repo.commit("canary on 580.159.04")
    repo.edit("canary", "driver", lambda d: d.update(version="580.173.02"))  # the work tree, uncommitted

    report = verb.build(repo.root, base, None, None)

    assert [s.stack for s in report.stacks] == ["canary"]  # every other stack file is as it was
    assert "prod" in report.unchanged
    found = rows(report, "canary")
    assert found[("driver", "version")] == ("580.159.04", "580.173.02")
    assert found[("pool gpucanary", "driver")] == ("580.159.04", "580.173.02")
    assert found[("NVIDIADriver gpu-gpucanary", "version")] == ("580.159.04", "580.173.02")
    assert ("driver", "owner") not in found  # unchanged facts are not rows
    assert report.head == {"revision": "work tree", "commit": None}
    assert report.base["commit"] == base


def test_releasing_a_prod_pool_moves_its_driver_and_its_state(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.pool("prod", "gpua100", lambda p: p["rollout"].update(released=True))
    head = repo.commit("release gpua100")

    report = verb.build(repo.root, base, head, ["prod"])

    found = rows(report, "prod")
    assert found[("pool gpua100", "driver")] == ("570.195.03", "580.173.02")
    assert found[("pool gpua100", "state")] == ("held", "released")
    assert found[("NVIDIADriver gpu-gpua100", "state")] == ("held", "released")
    assert ("pool gpuh100", "state") not in found
    # The held pool's advisory (its R570 driver is not one the operator lists) is gone at head: fixed.
    fixed = {(v.policy, v.resource) for v in stack_diff(report, "prod").fixed}
    assert ("operator-supports-driver", "gpu-gpua100") in fixed
    assert ("operator-supports-driver", "gpu-gpuh100") not in fixed  # still held on R570
    # No attestation file in this repository: the pool's move is a risk in plain words.
    (risk,) = [r for r in stack_diff(report, "prod").risks if r.kind == compare.RiskKind.UNATTESTED_DRIVER]
    assert risk.text.startswith("prod pool gpua100 moves to 580.173.02, which the canary has not attested")


def test_an_ami_bump_shows_the_generation_and_node_image(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")

    def newer_ami(pool: dict) -> None:
        pool["generations"][-1]["releaseVersion"] = "1.33.5-20251204"

    repo.pool("eks-prod", "gpu-a10g", newer_ami)

    report = verb.build(repo.root, base, None, None)

    found = rows(report, "eks-prod")
    assert found[("pool gpu-a10g", "node image")] == ("1.33.5-20251120", "1.33.5-20251204")
    assert found[("pool gpu-a10g", "generation 4")] == ("580.173.02 on 1.33.5-20251120", "580.173.02 on 1.33.5-20251204")
    # The AMI release is updated in place (EKS rolls the node group): no replacement verdict.
    assert not [v for v in stack_diff(report, "eks-prod").introduced if v.policy == "cloud-pool-not-replaced"]


def test_changing_a_replace_only_field_is_a_new_mandatory_violation_with_its_remedy(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.pool("eks-prod", "gpu-l40s", lambda p: p["eks"].update(instanceTypes=["g6e.24xlarge"]))

    diff = stack_diff(verb.build(repo.root, base, None, ["eks-prod"]), "eks-prod")

    # Head is rendered against base's outputs as its last deployment, so the pack's own rule sees the step.
    introduced = {(v.policy, v.resource, v.enforcement.value) for v in diff.introduced}
    assert ("cloud-pool-not-replaced", "gpu-l40s-g2", "mandatory") in introduced
    (risk,) = [r for r in diff.risks if r.policy == "cloud-pool-not-replaced" and "gpu-l40s-g2" in r.text]
    assert risk.kind == compare.RiskKind.NEW_VIOLATION and risk.enforcement == "mandatory"
    assert "instanceTypes g6e.12xlarge -> g6e.24xlarge" in risk.text and "new generation" in risk.text
    assert ("pool gpu-l40s", "replace-only gpu-l40s-g2 instanceTypes") in {(c.subject, c.field) for c in diff.changes}
    assert diff.fixed == ()


def test_a_pool_added_is_one_row_with_its_facts(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")

    def add_pool(pools: list[dict]) -> None:
        extra = json.loads(json.dumps(pools[0]))
        extra["name"] = "gput4b"
        pools.append(extra)

    repo.edit("prod", "nodePools", add_pool)

    found = rows(verb.build(repo.root, base, None, ["prod"]), "prod")

    old, new = found[("pool gput4b", "")]
    assert old is None and new is not None
    assert "driver 580.173.02" in new and "state released" in new and "cloud pools gput4b" in new
    assert ("NVIDIADriver gpu-gput4b", "") in found


def test_a_model_image_and_cuda_change_are_rows(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")

    def newer_server(models: list[dict]) -> None:
        models[0].update(image="vllm/vllm-openai:v0.11.0", cudaVersion="12.6")

    repo.edit("prod", "models", newer_server)

    report = verb.build(repo.root, base, None, ["prod"])

    found = rows(report, "prod")
    # Base is judged as deployed and head as the step from it: a change no rule cares about moves no verdict.
    assert (stack_diff(report, "prod").introduced, stack_diff(report, "prod").fixed) == ((), ())
    assert found[("model llm-chat", "image")] == ("vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.11.0")
    assert found[("model llm-chat", "CUDA")] == ("12.8", "12.6")


def test_a_stack_file_added_and_one_removed(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    (repo.root / "Pulumi.staging.yaml").write_text((repo.root / "Pulumi.canary.yaml").read_text())
    repo.git("rm", "-q", "Pulumi.existing-canary.yaml")
    head = repo.commit("staging in, existing-canary out")

    report = verb.build(repo.root, base, head, None)

    added, removed = stack_diff(report, "staging"), stack_diff(report, "existing-canary")
    assert added.status == compare.Status.ADDED and removed.status == compare.Status.REMOVED
    assert rows(report, "staging")[("driver", "")][0] is None
    assert "version 580.173.02" in str(rows(report, "staging")[("driver", "")][1])
    assert rows(report, "existing-canary")[("driver", "")][1] is None
    assert [r.kind for r in removed.risks] == [compare.RiskKind.STACK_REMOVED]
    assert removed.file == f"{base}:Pulumi.existing-canary.yaml"
    assert added.file == f"{head}:Pulumi.staging.yaml"


def test_only_comment_changes_leave_a_stack_unchanged(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    path = repo.root / "Pulumi.prod.yaml"
    path.write_text("# reviewed again\n" + path.read_text())

    report = verb.build(repo.root, base, None, None)

    assert report.stacks == () and "prod" in report.unchanged


# ---------------------------------------------------------------- revisions


def test_the_default_base_is_the_merge_base_with_the_default_branch(repo: GitRepo) -> None:
    fork = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "-b", "feature")
    repo.pool("prod", "gpua100", lambda p: p["rollout"].update(released=True))
    repo.commit("release gpua100 on a branch")
    repo.git("checkout", "-q", "main")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    repo.commit("main moves on")
    repo.git("checkout", "-q", "feature")

    report = verb.build(repo.root, None, None, None)

    assert report.base["commit"] == fork  # not main's tip: canary's change on main is not this branch's
    assert [s.stack for s in report.stacks] == ["prod"]


def test_no_default_branch_is_a_clear_error(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "fleet", branch="trunk")
    code, _, err = invoke(repo, "--markdown")
    assert code == 2
    assert "--base" in err and "no default branch" in err and "origin/HEAD" in err


def test_an_unknown_stack_lists_the_stacks_there_are(repo: GitRepo) -> None:
    code, out, err = invoke(repo, "--stack", "prdo", "--json")
    assert code == 2 and "no stack file Pulumi.prdo.yaml" in err and "its stacks: canary, eks-canary" in err
    assert error_of(out, 2, "invalid-input")["message"] == err.strip()


@pytest.mark.parametrize(("flag", "value"), [("--base", "no-such-rev"), ("--head", "no-such-rev"), ("--base", "--all")])
def test_a_bad_revision_exits_2_naming_the_flag_and_the_revision(repo: GitRepo, flag: str, value: str) -> None:
    code, out, err = invoke(repo, f"{flag}={value}", "--json")
    assert code == 2 and error_of(out, 2, "invalid-input")["message"].startswith(flag)
    assert flag in err and value in err


def test_an_unknown_stack_exits_2_naming_it(repo: GitRepo) -> None:
    code, _, err = invoke(repo, "--base", "HEAD", "--stack", "staging")
    assert code == 2 and "--stack" in err and "Pulumi.staging.yaml" in err


def test_a_project_outside_git_exits_2(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: x\n")
    result = runner.invoke(app, ["diff", "--project-dir", str(tmp_path), "--base", "HEAD"], env=GIT_ENV)
    assert result.exit_code == 2 and "not in a git repository" in result.stderr


def test_an_unreadable_stack_file_at_a_revision_is_named_at_that_revision(repo: GitRepo) -> None:
    (repo.root / "Pulumi.prod.yaml").write_text("config: [unclosed\n")
    broken = repo.commit("broken prod")
    code, _, err = invoke(repo, "--base", "HEAD~1", "--head", broken)
    assert code == 2
    assert f"{broken}:Pulumi.prod.yaml" in err and "not valid YAML" in err and "gpu-rollout-diff-" not in err


def test_a_base_the_program_refuses_is_a_note_and_head_shown_whole(repo: GitRepo) -> None:
    repo.edit("prod", "driver", lambda d: d.update(owner="nobody"))
    base = repo.commit("a base the program refuses")
    repo.edit("prod", "driver", lambda d: d.update(owner="operator"))

    diff = stack_diff(verb.build(repo.root, base, None, ["prod"]), "prod")

    assert diff.status == compare.Status.CHANGED
    assert diff.note is not None and "driver.owner" in diff.note and f"{base}:Pulumi.prod.yaml" in diff.note
    assert ("driver", "") in {(c.subject, c.field) for c in diff.changes}


def test_markdown_and_json_together_are_refused(repo: GitRepo) -> None:
    code, _, err = invoke(repo, "--base", "HEAD", "--markdown", "--json")
    assert code == 2 and "not both" in err


# ---------------------------------------------------------------- output


def test_json_is_one_stable_document(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))

    code, out, _ = invoke(repo, "--base", base, "--json")

    assert code == 0
    document = document_of("diff", out)
    assert set(document) == {"schemaVersion", "base", "head", "stacks", "unchanged"}
    (stack,) = document["stacks"]
    assert set(stack) == {"stack", "file", "status", "changes", "violations", "risks", "note"}
    assert {"subject": "driver", "field": "version", "base": "580.173.02", "head": "580.159.04"} in stack["changes"]
    assert set(stack["violations"]) == {"introduced", "fixed", "standing"}


def test_markdown_is_one_comment_with_a_table_and_the_risks(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.pool("eks-prod", "gpu-l40s", lambda p: p["eks"].update(instanceTypes=["g6e.24xlarge"]))

    code, out, _ = invoke(repo, "--base", base, "--markdown")

    assert code == 0  # risks and new mandatory verdicts are reported, not an exit code (rollout/diff.py)
    lines = out.splitlines()
    assert lines[0].startswith("### ") and base[:12] in lines[0]
    assert "#### `eks-prod` (changed: `Pulumi.eks-prod.yaml`)" in lines
    header = lines.index("| what | field | base | head |")
    assert lines[header + 1] == "|---|---|---|---|"
    risks = lines[lines.index("**Risks**") + 1:]
    assert any(line.startswith("- gpu-l40s-g2: instanceTypes g6e.12xlarge -> g6e.24xlarge") for line in risks)


def test_markdown_cells_cannot_break_the_table_or_inject_markup() -> None:
    side = compare.StackView("x", "prod", {("model m", "image"): "a|b`<img>`"}, {})
    other = compare.StackView("x", "prod", {("model m", "image"): "c"}, {})
    report = compare.Report({"revision": "a", "commit": None}, {"revision": "b", "commit": None},
                            (compare.compare("x", "Pulumi.x.yaml", side, other),))
    (row,) = [line for line in compare.markdown(report).splitlines() if line.startswith("| model m")]
    assert row.count(" | ") == 3 and "a\\|b'<img>'" in row  # one code span per cell, the pipe escaped


# ---------------------------------------------------------------- one process, many renderings


def test_renderings_in_one_process_match_a_fresh_process(repo: GitRepo) -> None:
    """The mock runtime and the program's modules live on between renderings: a stack rendered after others
    in this process must read exactly as it does in a process of its own."""
    base = repo.git("rev-parse", "HEAD")
    repo.pool("prod", "gpua100", lambda p: p["rollout"].update(released=True))
    repo.pool("eks-prod", "gpu-l40s", lambda p: p["eks"].update(instanceTypes=["g6e.24xlarge"]))

    together = verb.build(repo.root, base, None, None)  # eks-prod's two sides, then prod's, in this process
    again = verb.build(repo.root, base, None, ["prod"])
    alone = subprocess.run(
        [sys.executable, "-m", "rollout", "diff", "--project-dir", str(repo.root), "--base", base, "--stack",
         "prod", "--json"], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV},
    )

    assert [s.stack for s in together.stacks] == ["eks-prod", "prod"]
    fresh = document_of("diff", alone.stdout)["stacks"]
    in_process = {name: json.loads(documents.dumps(verb.document(report)))["stacks"] for name, report in
                  (("together", together), ("again", again))}
    assert fresh == [s for s in in_process["together"] if s["stack"] == "prod"] == in_process["again"]
    assert fresh[0]["changes"]  # a real comparison, not two empty ones


def test_an_attested_driver_is_no_risk_and_an_unattested_one_says_why() -> None:
    def side(driver: str) -> compare.StackView:
        return compare.StackView("prod", "prod", {("pool gpuh100", "driver"): driver}, {"gpuh100": driver})

    def unattested(driver: str) -> str | None:
        return None if driver == "580.173.02" else "no attestations/595.91.07.json"

    attested = compare.compare("prod", "Pulumi.prod.yaml", side("570.195.03"), side("580.173.02"), unattested)
    missing = compare.compare("prod", "Pulumi.prod.yaml", side("570.195.03"), side("595.91.07"), unattested)
    unmoved = compare.compare("prod", "Pulumi.prod.yaml", side("595.91.07"), side("595.91.07"), unattested)

    assert [r.kind for r in attested.risks] == [] == [r.kind for r in unmoved.risks]
    (risk,) = missing.risks
    assert risk.text == "prod pool gpuh100 moves to 595.91.07, which the canary has not attested " \
        "(no attestations/595.91.07.json)"


def test_an_unattested_driver_is_looked_up_in_the_stacks_own_canary_folder(tmp_path: Path) -> None:
    """The diff reads attestations/<canary>/<driver>.json of the canary the prod stack names, like the gate."""
    from engine_contracts import attestation
    from tests.policy.attested import canary_attestation

    attestation.write(tmp_path / attestation.ATTESTATION_DIR, canary_attestation())  # existing-canary's
    of_canary = verb._unattested(tmp_path)
    assert of_canary("existing-canary")("580.173.02") is None
    assert of_canary("acme/gpu-driver-upgrade/existing-canary")("580.173.02") is None
    assert of_canary("canary")("580.173.02") == "no attestations/canary/580.173.02.json"  # another fleet's canary
    assert of_canary(None)("580.173.02") == "the stack names no promotion.canaryStack"
    assert verb._declared_canary(stack_config("eks-prod")) == "eks-canary"
    assert verb._declared_canary(stack_config("eks-canary")) is None  # no promotion block
    # Config the spec refuses (here: only a promotion block) names no canary; the diff reports it elsewhere.
    assert verb._declared_canary({"gpu-driver-upgrade:promotion": '{"canaryStack": "eks-canary"}'}) is None


def test_a_promoted_stack_reads_its_canary_as_plan_does(repo: GitRepo) -> None:
    """The diff answers a prod stack's reference to its canary from its own rendering of the canary file on
    the same side; `plan` renders that file itself. Both must see the same thing."""
    from policy.evaluate import from_registered
    from rollout import plan

    base = repo.git("rev-parse", "HEAD")
    (repo.root / "Pulumi.prod2.yaml").write_text((repo.root / "Pulumi.prod.yaml").read_text())

    diff = stack_diff(verb.build(repo.root, base, None, ["prod2"]), "prod2")
    rendered = plan.run("prod2", repo.root / "Pulumi.prod2.yaml", repo.root)
    alone = compare.view("prod2", from_registered(rendered.resources), rendered.outputs, plan.policy_report(rendered))

    assert diff.status == compare.Status.ADDED
    assert [(c.subject, c.head) for c in diff.changes] == [(c.subject, c.head) for c in compare.changes(None, alone)]
    assert {(v.policy, v.resource, v.message) for v in diff.introduced} == \
        {(v.policy, v.resource, v.message) for v in alone.violations}
    assert any(v.policy == "canary-attested" for v in alone.violations)  # the canary reference was read


# ---------------------------------------------------------------- generated stack files (issue 12 point 5)

from hypothesis import event, given, settings  # noqa: E402 - the generated-input section only
from hypothesis import strategies as st  # noqa: E402

from refusals.exits import Exit  # noqa: E402
from fleetspec.load import SpecError, load_stack_file  # noqa: E402
from tests.rollout.test_no_traceback import EXAMPLE, SETTINGS, huge, mutations  # noqa: E402

FUZZ = settings(SETTINGS, max_examples=20)


@pytest.fixture(scope="module")
def fuzz_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    return GitRepo(tmp_path_factory.mktemp("fuzz") / "fleet")


def _refused(content: bytes, folder: Path) -> bool:
    """The loader refuses ``content`` as a stack file (the shape of a stack, not the program's own checks)."""
    path = folder / "Pulumi.generated.yaml"
    path.write_bytes(content)
    try:
        load_stack_file(path)
    except SpecError:
        return True
    return False


@FUZZ
@given(content=mutations(EXAMPLE, huge(5 * 1024)), side=st.sampled_from(["head", "base"]))
def test_any_stack_file_on_either_side_gives_an_outcome_never_a_traceback(fuzz_repo: GitRepo, content: bytes,
                                                                           side: str) -> None:
    """A generated prod stack file at head (the work tree) or at base (a commit): a head the loader refuses
    exits 2 with its reasons and prints nothing on stdout; a base it refuses is a note (exit 0); a file that
    loads renders (0). Never exit 70, never a traceback."""
    path = fuzz_repo.root / "Pulumi.prod.yaml"
    valid = (PROJECT_DIR / "Pulumi.prod.yaml").read_bytes()
    path.write_bytes(content if side == "base" else valid)
    base = fuzz_repo.commit("generated base" if side == "base" else "valid base")
    path.write_bytes(content if side == "head" else valid)
    refused, too_big = _refused(content, fuzz_repo.root.parent), len(content) > 4 * 1024 * 1024
    event(f"{side}: {'too big' if too_big else 'refused' if refused else 'loads'}")
    try:
        result = runner.invoke(app, ["diff", "--project-dir", str(fuzz_repo.root), "--base", base, "--stack",
                                     "prod", "--json"], env=GIT_ENV)
    finally:
        path.write_bytes(valid)
    assert result.exit_code != Exit.INTERNAL, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if too_big:  # refused unread, whichever side: the flag and the file are named
        assert result.exit_code == Exit.INVALID and f"--{side}:" in result.stderr, result.stderr
    elif refused and side == "head":
        assert result.exit_code == Exit.INVALID, result.output
        assert error_of(result.stdout, Exit.INVALID, "invalid-input")["problems"], result.stdout  # the keys, on stdout too
        assert result.stderr.startswith("invalid config"), result.stderr
    elif refused:
        assert result.exit_code == Exit.OK, result.stderr
        assert f"{base}:Pulumi.prod.yaml: " in json.loads(result.stdout)["stacks"][0]["note"]
    else:
        assert result.exit_code in (Exit.OK, Exit.INVALID), result.output  # INVALID: the program refuses it


def test_verdicts_are_introduced_fixed_or_standing_by_policy_resource_and_level() -> None:
    def side(*violations: Violation) -> compare.StackView:
        return compare.StackView("prod", "prod", {("driver", "version"): "580.173.02"}, {}, violations)

    kept = Violation("canary-attested", Level.MANDATORY, "promotion", "no attestation for 580.173.02")
    kept_reworded = Violation("canary-attested", Level.MANDATORY, "promotion", "no attestation for 595.91.07")
    gone = Violation("operator-supports-driver", Level.ADVISORY, "gpu-gpuh100", "R570 not listed")
    new = Violation("cloud-pool-not-replaced", Level.MANDATORY, "gpuh100", "vmSize changes")
    raised = Violation("held-pool-pinned", Level.ADVISORY, "gpua100", "may grow")

    diff = compare.compare("prod", "Pulumi.prod.yaml", side(kept, gone, raised),
                           side(kept_reworded, new, replace(raised, enforcement=Level.MANDATORY)))

    assert [v.policy for v in diff.standing] == ["canary-attested"]  # a message quoting versions is the same verdict
    assert [v.policy for v in diff.fixed] == ["operator-supports-driver", "held-pool-pinned"]
    assert [(v.policy, v.enforcement) for v in diff.introduced] == [
        ("cloud-pool-not-replaced", Level.MANDATORY), ("held-pool-pinned", Level.MANDATORY)]
    assert diff.newly_mandatory == diff.introduced


def test_two_findings_of_one_policy_on_one_resource_are_never_collapsed() -> None:
    # plan reports both; diff must too (a driver bump: the kept finding rewords, a second one appears).
    def side(*violations: Violation) -> compare.StackView:
        return compare.StackView("prod", "prod", {("driver", "version"): "580.173.02"}, {}, violations)

    trusts_example = Violation("canary-attested", Level.MANDATORY, "promotion", "the gate trusts the example key")
    no_attestation = Violation("canary-attested", Level.MANDATORY, "promotion", "no attestation for 595.91.07")
    diff = compare.compare("prod", "Pulumi.prod.yaml", side(trusts_example), side(no_attestation, trusts_example))
    assert diff.standing == (trusts_example,) and diff.introduced == (no_attestation,) and diff.fixed == ()
    both_gone = compare.compare("prod", "Pulumi.prod.yaml", side(trusts_example, no_attestation), side())
    assert both_gone.fixed == (trusts_example, no_attestation) and both_gone.introduced == ()


# ---------------------------------------------------------------- issue 20: the gate's inputs in the PR diff


def test_a_change_of_only_a_generations_driver_shows_its_row(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.pool("eks-prod", "gpu-l40s", lambda p: p["generations"][1].update(driverVersion="580.159.04"))

    report = verb.build(repo.root, base, None, ["eks-prod"])

    found = rows(report, "eks-prod")
    assert found[("pool gpu-l40s", "generation 2")] == ("580.173.02 on 1.33.5-20251120", "580.159.04 on 1.33.5-20251120")
    assert found[("pool gpu-l40s", "driver")] == ("580.173.02", "580.159.04")


def test_a_waiver_shows_as_a_row_of_its_pool(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.edit("existing-prod", "promotion", lambda p: p["waivers"].update(
        {"h100-serving": {"accept": ["nvswitch", "served-traffic"], "reason": "no HGX canary yet (CHG-9)"}}))

    found = rows(verb.build(repo.root, base, None, ["existing-prod"]), "existing-prod")

    assert found[("pool h100-serving", "gate waiver")] == ("-", "accepts nvswitch, served-traffic: no HGX canary "
                                                            "yet (CHG-9)")


def test_a_change_of_the_trusted_keys_is_a_risk_naming_the_policy(repo: GitRepo) -> None:
    """The PR that adds an attestation cannot also trust a new key unseen: the diff names each key added or
    removed in the prod pack config, whether or not a stack file changed."""
    (repo.root / "policy").mkdir()
    # A config that trusts a key (the examples' own: the shipped policy/prod.json trusts none).
    shipped = json.loads((PROJECT_DIR / "policy" / "examples" / "prod.json").read_text())
    (repo.root / "policy" / "prod.json").write_text(json.dumps(shipped))
    base = repo.commit("the prod pack config")
    forger = attestation.trusted_key_of(attestation.generate_signing_key().public_key(), "my laptop")
    shipped["canary-attested"]["trustedKeys"] = [forger.entry()]  # the example key out, another one in
    (repo.root / "policy" / "prod.json").write_text(json.dumps(shipped))

    report = verb.build(repo.root, base, None, None)

    assert report.stacks == ()
    assert [(c.kind, c.policy, c.text) for c in report.pack] == [
        ("trusted-key", "canary-attested",
         f"prod: canary-attested now trusts key {forger.id} (my laptop): every attestation it signs can "
         "open prod (policy/prod.json)"),
        ("trusted-key", "canary-attested",
         f"prod: canary-attested no longer trusts key {attestation.EXAMPLE_KEY_ID} "
         f"({shipped_comment()}): attestations it signed stop admitting drivers (policy/prod.json)"),
    ]
    code, out, _ = invoke(repo, "--base", base, "--markdown")
    assert code == 0 and "#### The policy pack" in out and f"now trusts key {forger.id}" in out
    assert json.loads(documents.dumps(verb.document(report)))["pack"][0]["kind"] == "trusted-key"


def shipped_comment() -> str:
    return json.loads((PROJECT_DIR / "policy" / "examples" / "prod.json").read_text())["canary-attested"]["trustedKeys"][0][
        "comment"]
