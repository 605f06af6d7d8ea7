"""Issue 24 point 8: `gpu-rollout init` makes a team's first canary and prod stack files from the example of its
cloud: the team's cluster, the prod stack promoted from the new canary, no example attestation, waiver or
ticket; with --trust-key the team's key is trusted instead of the example key. Nothing is written when a flag,
name or file cannot be used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rollout.cli import app
from engine_contracts import attestation
from fleetspec.load import load_stack_file
from tests.conftest import PROJECT_DIR

runner = CliRunner()

CLOUDS = {
    "aks": ["--resource-group", "rg-team", "--aks-cluster", "aks-team-1", "--location", "northeurope"],
    "eks": ["--eks-cluster", "eks-team-1", "--region", "eu-west-1", "--node-role-arn",
            "arn:aws:iam::210987654321:role/team-gpu-nodes", "--subnet", "subnet-0123", "--subnet", "subnet-4567"],
    "existing": ["--context", "team-lab"],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder as a fresh clone has it: the program, the examples and the pack's prod config."""
    folder = tmp_path / "fleet"
    (folder / "policy").mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py", *(p.name for p in PROJECT_DIR.glob("Pulumi.*.yaml"))):
        shutil.copyfile(PROJECT_DIR / name, folder / name)
    shutil.copyfile(PROJECT_DIR / "policy" / "prod.json", folder / "policy" / "prod.json")
    shutil.copytree(PROJECT_DIR / "attestations", folder / "attestations")
    shutil.copyfile(PROJECT_DIR / "Fleet.yaml", folder / "Fleet.yaml")
    return folder


def init(project: Path, *args: str):
    return runner.invoke(app, ["init", "--project-dir", str(project), *args])


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_init_writes_stacks_of_the_team_s_cluster(project: Path, cloud: str) -> None:
    result = init(project, "--cloud", cloud, "--name", "team", "--cluster", "team-gpu-1", *CLOUDS[cloud])
    assert result.exit_code == 0, result.output
    canary, prod = (load_stack_file(project / f"Pulumi.team-{stage}.yaml") for stage in ("canary", "prod"))
    for spec in (canary, prod):
        assert spec.cluster.name == "team-gpu-1" and spec.cluster.cloud.value == cloud
        assert spec.changeTicket is None  # the example's ticket is not the team's
    assert prod.promotion is not None and prod.promotion.canaryStack == "team-canary"
    assert not prod.promotion.waivers  # the example team's judgement
    assert not attestation.folder_for(project / attestation.ATTESTATION_DIR, "team-canary").exists()
    cluster = prod.cluster
    if cloud == "aks":
        assert (cluster.aks.resourceGroup, cluster.aks.clusterName) == ("rg-team", "aks-team-1")
    elif cloud == "eks":
        assert (cluster.eks.clusterName, cluster.eks.region, cluster.eks.subnetIds) == (
            "eks-team-1", "eu-west-1", ["subnet-0123", "subnet-4567"])
    else:
        assert cluster.existing.context == "team-lab"
    text = (project / "Pulumi.team-prod.yaml").read_text()
    assert text.startswith("# Made by `gpu-rollout init`") and f'version: "{prod.driver.version}"' in text
    assert "keygen" in result.stdout and json.loads((project / "policy" / "prod.json").read_text()) == \
        json.loads((PROJECT_DIR / "policy" / "prod.json").read_text())  # no --trust-key: the pack is untouched


def test_the_new_prod_stack_is_refused_until_the_team_s_key_and_attestation_exist(project: Path) -> None:
    assert init(project, "--cloud", "aks", "--name", "team", "--cluster", "team-gpu-1", *CLOUDS["aks"]).exit_code == 0
    result = runner.invoke(app, ["plan", "--project-dir", str(project), "--stack", "team-prod", "--json"])
    assert result.exit_code == 1
    refused = [v["message"] for v in json.loads(result.stdout)["violations"] if v["enforcement"] == "mandatory"]
    # The shipped policy/prod.json trusts no key (issue 30: the example key is trusted by the examples' config only).
    assert not any("example key" in m for m in refused)
    assert any("no attestation attestations/team-canary/" in m for m in refused)
    # The canary is a change to a production cluster too: refused for its change ticket alone, which init did not
    # carry over from the example (no --change-ticket here).
    canary = runner.invoke(app, ["plan", "--project-dir", str(project), "--stack", "team-canary", "--json"])
    refused = [v["message"] for v in json.loads(canary.stdout)["violations"] if v["enforcement"] == "mandatory"]
    assert canary.exit_code == 1 and refused == ["the canary stage must name a change ticket (changeTicket): the "
                                                 "canary is a change to a production cluster too"]


def test_trust_key_replaces_the_example_key(project: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert runner.invoke(app, ["keygen", "--out", str(keys), "--comment", "team CI"]).exit_code == 0
    entry = json.loads((keys / "attestation-signing-key.pub.json").read_text())
    result = init(project, "--cloud", "existing", "--name", "team", "--cluster", "team-lab", *CLOUDS["existing"],
                  "--change-ticket", "CHG-1", "--trust-key", str(keys / "attestation-signing-key.pub.json"))
    assert result.exit_code == 0, result.output
    pack = json.loads((project / "policy" / "prod.json").read_text())
    trusted = pack["canary-attested"]["trustedKeys"]
    # Scoped to the team's own prod stack: one team's key never admits a driver into another team's prod.
    assert trusted == [{**entry, "scope": ["organization/gpu-driver-upgrade/team-prod"]}]
    assert pack["canary-attested"]["enforcementLevel"] == "mandatory"
    assert "for organization/gpu-driver-upgrade/team-prod only" in result.stdout
    assert load_stack_file(project / "Pulumi.team-prod.yaml").changeTicket == "CHG-1"
    # plan judges by this project's policy/prod.json, which no longer trusts the example key.
    planned = runner.invoke(app, ["plan", "--project-dir", str(project), "--stack", "team-prod", "--json"])
    assert not any("trusts the example key" in v["message"] for v in json.loads(planned.stdout)["violations"])
    # A second pair made later is not told to replace a key the project no longer trusts.
    again = init(project, "--cloud", "existing", "--name", "team-b", "--cluster", "team-lab-b", *CLOUDS["existing"])
    assert again.exit_code == 0 and "trusts your own key already" in again.stdout and "example key" not in again.stdout


def test_a_second_team_s_key_is_scoped_to_its_own_prod_and_the_first_team_s_is_kept(project: Path,
                                                                                     tmp_path: Path) -> None:
    entries = {}
    for team in ("team-a", "team-b"):
        keys = tmp_path / team
        assert runner.invoke(app, ["keygen", "--out", str(keys), "--comment", f"{team} CI"]).exit_code == 0
        entries[team] = json.loads((keys / "attestation-signing-key.pub.json").read_text())
        result = init(project, "--cloud", "existing", "--name", team, "--cluster", f"{team}-lab", *CLOUDS["existing"],
                      "--trust-key", str(keys / "attestation-signing-key.pub.json"))
        assert result.exit_code == 0, result.output
    trusted = json.loads((project / "policy" / "prod.json").read_text())["canary-attested"]["trustedKeys"]
    assert trusted == [{**entries[t], "scope": [f"organization/gpu-driver-upgrade/{t}-prod"]} for t in entries]
    # The same key trusted again for another prod stack keeps its entry and gains that stack.
    again = init(project, "--cloud", "existing", "--name", "team-a2", "--cluster", "a2-lab", *CLOUDS["existing"],
                 "--trust-key", str(tmp_path / "team-a" / "attestation-signing-key.pub.json"))
    assert again.exit_code == 0, again.output
    trusted = json.loads((project / "policy" / "prod.json").read_text())["canary-attested"]["trustedKeys"]
    assert [k["scope"] for k in trusted] == [["organization/gpu-driver-upgrade/team-b-prod"],
                                             ["organization/gpu-driver-upgrade/team-a-prod",
                                              "organization/gpu-driver-upgrade/team-a2-prod"]]


def test_init_adds_its_stacks_to_the_fleet_and_fleet_plan_reads_them(project: Path) -> None:
    before = (project / "Fleet.yaml").read_text()
    result = init(project, "--cloud", "existing", "--name", "team", "--cluster", "team-lab", *CLOUDS["existing"])
    assert result.exit_code == 0, result.output
    after = (project / "Fleet.yaml").read_text()
    # The comments and every other line are kept; the canary joins the canary wave, prod gets a wave of its own.
    assert [line for line in after.splitlines() if "team-" not in line and "gpu-rollout init" not in line
            and line not in ("    maxConcurrent: 1", "    waitFor:", "      verify: smoke")] == \
        [line for line in before.splitlines() if "stacks: [canary, eks-canary, existing-canary]" not in line
         and line not in ("    maxConcurrent: 1", "    waitFor:", "      verify: smoke")]
    assert "    stacks: [canary, eks-canary, existing-canary, team-canary]" in after.splitlines()
    waves = yaml.safe_load(after)["waves"]
    assert waves[0]["stacks"][-1] == "team-canary" and waves[-1] == {
        "name": "team-prod", "stacks": ["team-prod"], "maxConcurrent": 1, "waitFor": {"verify": "smoke"}}
    assert "Fleet.yaml: team-canary joined the canary wave" in result.stdout
    planned = runner.invoke(app, ["fleet", "plan", "--project-dir", str(project), "--json"])
    assert planned.exit_code in (0, 1), planned.output  # a verdict, not the fleet file's refusal (exit 2)
    assert "team-prod" in planned.stdout and "is in no wave" not in planned.output


def test_a_fleet_file_init_cannot_edit_safely_is_left_alone_and_the_lines_are_shown(project: Path) -> None:
    block = (project / "Fleet.yaml").read_text().replace(
        "    stacks: [canary, eks-canary, existing-canary]\n",
        "    stacks:\n      - canary\n      - eks-canary\n      - existing-canary\n")
    (project / "Fleet.yaml").write_text(block)
    result = init(project, "--cloud", "existing", "--name", "team", "--cluster", "team-lab", *CLOUDS["existing"])
    assert result.exit_code == 0, result.output
    assert (project / "Fleet.yaml").read_text() == block
    assert "add both stacks to Fleet.yaml" in result.stdout and "- name: team-prod" in result.stdout


@pytest.mark.parametrize(("args", "named"), [
    (["--cloud", "aks", "--name", "team", "--cluster", "c"], ("--resource-group: needed for --cloud aks",
                                                            "--location: needed for --cloud aks")),
    (["--cloud", "existing", "--canary", "canary", "--prod", "team-prod", "--context", "x"],
     ("Pulumi.canary.yaml exists", "attestations/canary already holds attestations")),
    (["--cloud", "existing", "--name", "bad name", "--context", "x"], ("is not a stack name",)),
])
def test_refusals_write_nothing(project: Path, args: list[str], named: tuple[str, ...]) -> None:
    before = sorted(p.name for p in project.iterdir())
    result = init(project, *args)
    assert result.exit_code == 2 and result.stdout == ""
    for part in named:
        assert part in result.stderr
    assert sorted(p.name for p in project.iterdir()) == before


def test_the_example_key_is_never_the_key_to_trust(project: Path, tmp_path: Path) -> None:
    example = tmp_path / "example.pub.json"
    pack = json.loads((PROJECT_DIR / "policy" / "examples" / "prod.json").read_text())
    example.write_text(json.dumps({k: v for k, v in pack["canary-attested"]["trustedKeys"][0].items()
                                   if k in ("id", "publicKey", "comment")}))
    result = init(project, "--cloud", "existing", "--name", "team", "--context", "x", "--trust-key", str(example))
    assert result.exit_code == 2 and "is the example key" in result.stderr
    assert not (project / "Pulumi.team-prod.yaml").exists()
