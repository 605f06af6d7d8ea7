"""`gpu-rollout rollback` against the real engine: the Automation API drives the real `pulumi` CLI and file
backend, the program runs as an inline program, the policy pack is loaded by the engine (through the
launcher: the Python language host that starts a pack folder is not built here, docs/e2e.md), and the
NVIDIADriver it restores is read back from the API server. Each refusal exits non-zero and leaves the
stack's state (`pulumi stack export`) and its stack file as they were."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import policy_args
from tests.e2e.controlplane import Rest
from tests.e2e.pulumi_cli import Pulumi, Result, gpu_rollout, snapshot
from tests.rollout.json_contract import document_of

CANARY, PROD = "existing-canary", "existing-prod"
A, B = "580.173.02", "595.91.07"  # the shipped target, and a release the operator v26.7.0 also supports
NOTE_A, NOTE_B = "rollback-note-a", "rollback-note-b"  # kept secret: never printed
KEY = "gpu-driver-upgrade:"
# A secret key outside the project's namespace: the program does not read it (the canary's PDBs and
# `gpu-rollout plan` of its stack file stay as the other tests expect), the engine records it per update.
SECRET = "e2e:rollbackNote"
DRIVER_PATH = "/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-l40s-canary"


def _history(pulumi: Pulumi, stack: str) -> list[dict]:
    """Every update, newest first (the CLI lists 10 unless asked for more). The file backend gives each
    version 0: rollback numbers them 1 for the oldest, which is len(history) - index here."""
    return pulumi.json("stack", "history", "--stack", stack, "--json", "--page-size", "1000")


def _driver_of(update: dict) -> str:
    return json.loads(update["config"][KEY + "driver"]["value"])["version"]


def _up(pulumi: Pulumi, pack: Path, stack: str) -> Result:
    return pulumi.run("up", "--stack", stack, "--yes", "--non-interactive", "--skip-preview",
                      *policy_args(pack, "canary"), program=True)


def _refused(pulumi: Pulumi, stack: str, *args: str, env: dict[str, str] | None = None) -> Result:
    """Run a rollback that must be refused; assert it changed nothing."""
    before = snapshot(pulumi, stack)
    result = gpu_rollout(pulumi, "rollback", "--stack", stack, *args, env=env)
    assert result.returncode != 0, result.describe()
    assert "rollback refused:" in result.stderr, result.describe()
    assert snapshot(pulumi, stack) == before, "a refused rollback changed the stack's state or config"
    return result


@pytest.fixture(scope="module")
def rolled_back(canary_up: Result, pulumi: Pulumi, policy_pack: Path, cluster: Rest) -> dict:
    """Canary `up` on driver A, `up` on driver B (each with another secret), then `rollback --yes`;
    what each step showed, in order."""
    record: dict = {}
    # Before: every good update of the canary ran A, the current driver: nothing earlier to go back to.
    assert {_driver_of(u) for u in _history(pulumi, CANARY) if u["result"] == "succeeded"} == {A}
    record["nothing_earlier"] = _refused(pulumi, CANARY)

    pulumi.run("config", "set", "--secret", "--stack", CANARY, SECRET, NOTE_A)
    _up(pulumi, policy_pack, CANARY)
    record["history_before"] = len(_history(pulumi, CANARY))
    pulumi.run("config", "set", "--path", "--stack", CANARY, KEY + "driver.version", B)
    pulumi.run("config", "set", "--path", "--stack", CANARY, KEY + "driver.previousVersion", A)
    pulumi.run("config", "set", "--secret", "--stack", CANARY, SECRET, NOTE_B)
    _up(pulumi, policy_pack, CANARY)
    record["driver_on_b"] = cluster.get(DRIVER_PATH)["spec"]["version"]

    before = snapshot(pulumi, CANARY)
    # --all-config: the secret is no key of the GPU runtime, which alone a rollback restores by default
    # (tests/e2e/test_rollback_scope.py); --reason: the e2e project is no git checkout.
    record["dry_run"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--dry-run", "--all-config")
    record["plan_json"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--json", "--all-config")
    record["unchanged_by_plans"] = snapshot(pulumi, CANARY) == before

    record["rollback"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--yes", "--all-config", "--reason",
                                     "e2e: the project is no git checkout", "--policy-pack", str(policy_pack),
                                     "--policy-pack-config", "policy/canary.json")
    record["driver_after"] = cluster.get(DRIVER_PATH)["spec"]["version"]
    record["history_after"] = _history(pulumi, CANARY)
    record["note_after"] = pulumi.run("config", "get", "--stack", CANARY, SECRET).stdout.strip()
    record["stack_file_after"] = (pulumi.project / f"Pulumi.{CANARY}.yaml").read_text()
    return record


def test_nothing_to_roll_back_to_is_refused(rolled_back: dict) -> None:
    result = rolled_back["nothing_earlier"]
    assert result.returncode == 1, result.describe()
    assert "no earlier succeeded update ran another driver" in result.stderr


def test_rollback_shows_the_changes_and_commands_and_changes_nothing_without_yes(rolled_back: dict,
                                                                               pulumi: Pulumi) -> None:
    assert rolled_back["driver_on_b"] == B
    dry = rolled_back["dry_run"]
    assert dry.returncode == 0, dry.describe()
    target = rolled_back["history_before"]  # the update on A with ticket A
    assert f"Rollback of stack {CANARY} to update {target}" in dry.stdout
    assert f"{KEY}driver.version: {B} -> {A}" in dry.stdout
    assert f"{SECRET}: [secret] -> [secret]" in dry.stdout
    assert f"pulumi config set --path --stack {CANARY} {KEY}driver.version -- {A}" in dry.stdout
    assert f"pulumi config set --secret --stack {CANARY} {SECRET}" in dry.stdout
    pack = pulumi.project.resolve() / "policy"  # the project's pack folder, and its stage's config
    assert f"pulumi up --stack {CANARY} --policy-pack {pack} --policy-pack-config {pack / 'canary.json'}" in dry.stdout
    assert "one at a time" in dry.stdout and "maxParallelUpgrades 1" in dry.stdout
    document = document_of("rollback", rolled_back["plan_json"].stdout)
    assert document["target"]["version"] == target and document["applies"] is False
    assert {c["path"]: (c["old"], c["new"]) for c in document["changes"]}[SECRET] == (
        "[secret]", "[secret]")
    assert rolled_back["unchanged_by_plans"]
    for result in (dry, rolled_back["plan_json"], rolled_back["rollback"]):
        assert NOTE_A not in result.output and NOTE_B not in result.output


def test_rollback_yes_puts_the_nvidiadriver_back_and_adds_one_update(rolled_back: dict) -> None:
    result = rolled_back["rollback"]
    assert result.returncode == 0, result.describe()
    assert rolled_back["driver_after"] == A
    history = rolled_back["history_after"]
    newest = history[:3]  # the rollback, the update on B, the update on A
    assert len(history) == rolled_back["history_before"] + 2
    assert [u["result"] for u in newest] == ["succeeded"] * 3
    assert [_driver_of(u) for u in newest] == [A, B, A]
    assert newest[0]["environment"].get("exec.kind") == "auto.inline"  # run through the Automation API
    assert newest[0]["message"] == f"gpu-rollout rollback to update {rolled_back['history_before']}"
    # The secret went back as a secret: encrypted in the stack file and in the history, with update A's value.
    assert newest[0]["config"][SECRET]["secret"] is True
    assert rolled_back["note_after"] == NOTE_A
    assert NOTE_A not in rolled_back["stack_file_after"] and "secure:" in rolled_back["stack_file_after"]


def test_the_engine_ran_the_policy_pack_on_the_rollback(rolled_back: dict) -> None:
    output = rolled_back["rollback"].stderr  # the engine's output, as `up` printed it
    assert re.search(r"gpu-driver-upgrade@v[0-9.]+ \(local: [^)]*gpu-driver-upgrade-policy\)", output), output
    assert "[mandatory]" not in output


# ---------------------------------------------------------------------------- refusals


def test_an_update_in_progress_is_refused(canary_up: Result, pulumi: Pulumi, policy_pack: Path) -> None:
    """The file backend's lock, as the CLI writes it for an update: the real CLI refuses an `up` while it
    is there, and so does rollback, before any change."""
    state = Path(pulumi.env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    locks = state / ".pulumi" / "locks" / "organization" / "gpu-driver-upgrade" / CANARY
    locks.mkdir(parents=True, exist_ok=True)
    lock = locks / f"{uuid.uuid4()}.json"
    lock.write_text(json.dumps({"pid": 1, "username": "e2e", "hostname": "elsewhere",
                                "timestamp": "2026-12-03T07:00:00Z"}))
    try:
        blocked = _up_blocked(pulumi, policy_pack)
        assert "locked" in blocked.output, blocked.describe()
        result = _refused(pulumi, CANARY)
        assert result.returncode == 1 and "an update is in progress" in result.stderr, result.describe()
    finally:
        lock.unlink()


def _up_blocked(pulumi: Pulumi, pack: Path) -> Result:
    result = pulumi.run("up", "--stack", CANARY, "--yes", "--non-interactive", "--skip-preview",
                        *policy_args(pack, "canary"), program=True, check=False)
    assert result.returncode != 0, result.describe()
    return result


def test_secrets_that_cannot_be_decrypted_are_refused(rolled_back: dict, pulumi: Pulumi) -> None:
    result = _refused(pulumi, CANARY, env={"PULUMI_CONFIG_PASSPHRASE": "not-the-passphrase"})
    assert result.returncode == 2 and "secrets cannot be decrypted" in result.stderr, result.describe()


def test_a_stack_without_history_is_refused(pulumi: Pulumi) -> None:
    stack = "rollback-no-history"
    (pulumi.project / f"Pulumi.{stack}.yaml").write_text((pulumi.project / f"Pulumi.{CANARY}.yaml").read_text())
    pulumi.run("stack", "init", stack, "--non-interactive")
    result = _refused(pulumi, stack)
    assert result.returncode == 1 and "has no update history" in result.stderr, result.describe()


def test_to_version_that_names_no_update_is_refused(canary_up: Result, pulumi: Pulumi) -> None:
    result = _refused(pulumi, CANARY, "--to-version", "999")
    assert result.returncode == 2 and "--to-version 999: stack existing-canary has no such update" in result.stderr


def test_a_driver_the_canary_never_ran_is_refused_unless_forced(prod_up: Result, pulumi: Pulumi) -> None:
    """The prod stack's canary is named by promotion.canaryStack: pointed at a stack that never ran an
    update, no driver has canary evidence."""
    empty = "rollback-empty-canary"
    (pulumi.project / f"Pulumi.{empty}.yaml").write_text((pulumi.project / f"Pulumi.{CANARY}.yaml").read_text())
    pulumi.run("stack", "init", empty, "--non-interactive")
    key = KEY + "promotion.canaryStack"
    pulumi.run("config", "set", "--path", "--stack", PROD, key, empty)
    try:
        past = _history(pulumi, PROD)
        last_good = next(len(past) - i for i, u in enumerate(past) if u["result"] == "succeeded")
        # --all-config: the update differs only in promotion.canaryStack, which a rollback leaves alone by default
        result = _refused(pulumi, PROD, "--to-version", str(last_good), "--all-config")
        assert result.returncode == 1, result.describe()
        assert f"was never run by the canary stack '{empty}'" in result.stderr
        before = snapshot(pulumi, PROD)
        forced = gpu_rollout(pulumi, "rollback", "--stack", PROD, "--to-version", str(last_good), "--force",
                             "--dry-run", "--all-config")
        assert forced.returncode == 0, forced.describe()
        assert "canary: --force:" in forced.stdout and f"{key}: {empty} -> {CANARY}" in forced.stdout
        assert snapshot(pulumi, PROD) == before
    finally:
        pulumi.run("config", "set", "--path", "--stack", PROD, key, CANARY)
