"""CODEOWNERS covers everything a deploying job runs or reads (the program, the pack and what it imports, the checks,
the CLI, the build and pins, Fleet.yaml, the workflows): every file of the checkout outside the documentation and
test tiers and the stack files has a code owner, so a new top-level path fails here until a line covers it. The
matcher (git_revisions/codeowners.py) reads the file as GitHub does."""

from __future__ import annotations

import subprocess

import pytest

from git_revisions.codeowners import parse
from rollout.github_doctor import OUTSIDE_DEPLOYS, decides_a_deploy, uncovered
from tests.conftest import PROJECT_DIR

CODEOWNERS = PROJECT_DIR / ".github" / "CODEOWNERS"


def _tracked() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    return [name for name in listing.stdout.split("\0") if name]


def test_every_file_that_decides_a_deploy_has_a_code_owner() -> None:
    owners = parse(CODEOWNERS.read_text())
    assert owners.problems == ()
    files = _tracked()
    assert uncovered(owners, files) == [], "add a CODEOWNERS line for each (or, if no deploying job runs it, " \
                                           "to OUTSIDE_DEPLOYS in rollout/github_doctor.py)"
    # What the issue names, by path: the program, the pack and what it imports, the checks, the CLI, the build and
    # pins, the fleet file, the workflows.
    for path in ("__main__.py", "Pulumi.yaml", "components/gpu_operator.py", "policy/pack.py", "checks/kube.py",
                 "rollout/cli/__init__.py", "promotion_train/deploy_plan.py", "Makefile", "pyproject.toml",
                 "constraints.txt", "Fleet.yaml", ".github/workflows/deploy.yml", ".github/CODEOWNERS",
                 "gpu_knowledge/__init__.py", "fleetspec/base.py", "vocabulary/errors.py",
                 "engine_contracts/attestation.py", "attestations/README.md"):
        assert decides_a_deploy(path) and owners.owners_of(path) == ("@gpu-fleet/gate-owners",), path


def test_a_new_top_level_path_is_caught_until_a_line_covers_it() -> None:
    owners = parse(CODEOWNERS.read_text())
    assert uncovered(owners, [*_tracked(), "release_tools/cut.py", "bootstrap.sh"]) == ["bootstrap.sh",
                                                                                       "release_tools/"]
    covered = parse(CODEOWNERS.read_text() + "/release_tools/ @x\n/bootstrap.sh @x\n")
    assert uncovered(covered, ["release_tools/cut.py", "bootstrap.sh"]) == []


def test_only_the_documentation_and_test_tiers_and_the_stack_files_are_left_to_ordinary_review() -> None:
    assert OUTSIDE_DEPLOYS == ("docs/", "tests/", "benchmarks/", "e2e/", "scripts/", ".ci/", "README.md")
    assert not decides_a_deploy("Pulumi.prod.yaml") and decides_a_deploy("Pulumi.yaml")
    assert not decides_a_deploy("docs/cicd.md") and decides_a_deploy("docs.py")


@pytest.mark.parametrize(("lines", "path", "owners"), [
    ("/policy/ @a", "policy/prod.json", ("@a",)),
    ("/policy/ @a", "policy/x/y.py", ("@a",)),
    ("/policy/ @a", "sub/policy/x.py", ()),  # anchored
    ("policy/ @a", "sub/policy/x.py", ("@a",)),  # a folder pattern without a leading slash: anywhere
    ("/Makefile @a", "Makefile", ("@a",)),
    ("/Makefile @a", "sub/Makefile", ()),
    ("Makefile @a", "sub/Makefile", ("@a",)),
    ("/docs @a", "docs/x/y.md", ("@a",)),  # a name covers the folder it names
    ("/docs/* @a", "docs/x.md", ("@a",)),
    ("/docs/* @a", "docs/x/y.md", ()),  # * stays in one folder
    ("/docs/** @a", "docs/x/y.md", ("@a",)),
    ("*.py @a", "rollout/cli/x.py", ("@a",)),
    ("* @a\n/docs/", "docs/x.md", ()),  # the last match decides: no owners
    ("* @a\n/docs/ @b", "rollout/x.py", ("@a",)),
    ("# a comment\n/x/ @a # trailing", "x/y", ("@a",)),
])
def test_patterns_match_as_github_reads_them(lines: str, path: str, owners: tuple[str, ...]) -> None:
    assert parse(lines).owners_of(path) == owners


def test_lines_github_skips_are_problems() -> None:
    found = parse("!/policy/ @a\n/p[ab]/ @a\n/ok/ @a\n")
    assert len(found.problems) == 2 and found.problems[0].startswith("line 1:")
    assert found.owners_of("policy/x") == () and found.owners_of("ok/x") == ("@a",)
