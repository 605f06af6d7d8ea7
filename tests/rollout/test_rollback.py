"""`gpu-rollout rollback`'s decisions (pulumi_backend/history.py, over the CLI's shapes in pulumi_backend/pulumi_config.py),
fed histories shaped as `pulumi stack history --json` prints them (the Automation API's Stack.history()
parses the same document): which update it goes back to, every config change and its command, the
generation steps of image-owned pools, and each refusal with its exit code. The verb over the real CLI is
tested in tests/e2e/test_rollback.py; the CLI's shapes alone in tests/rollout/test_pulumi_config.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pulumi_backend import history, pulumi_config
from refusals.exits import Exit
from fleetspec.load import SpecError, read_stack_file, spec_from_config
from fleetspec.operator import UpgradePolicy

CHECKOUT = Path(__file__).resolve().parents[2]
A, B = "580.173.02", "595.91.07"
KEY = "gpu-driver-upgrade:"


def stack_config(name: str) -> dict[str, Any]:
    """An example stack's config as the engine sees it: {key: value} with structures parsed."""
    return {k: json.loads(v) if v[:1] in "{[" else v for k, v in read_stack_file(CHECKOUT / f"Pulumi.{name}.yaml").items()}


def cli_config(values: dict[str, Any], secrets: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The `config` of a history entry (or `pulumi config --json`): structures as their JSON text."""
    out: dict[str, dict[str, Any]] = {
        k: {"value": v if isinstance(v, str) else json.dumps(v), "secret": False} for k, v in values.items()
    }
    for key, text in (secrets or {}).items():
        out[key] = {"value": text, "secret": True}
    return out


def with_driver(values: dict[str, Any], version: str, previous: str | None) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    changed[KEY + "driver"]["version"] = version
    if previous is None:
        changed[KEY + "driver"].pop("previousVersion", None)
    else:
        changed[KEY + "driver"]["previousVersion"] = previous
    return changed


def entry(version: int, config: dict[str, dict[str, Any]], result: str = "succeeded", kind: str = "update",
          ended: bool = True) -> dict[str, Any]:
    item: dict[str, Any] = {"version": version, "kind": kind, "startTime": f"2026-12-0{version}T10:00:00.000Z",
                            "message": "", "environment": {"exec.kind": "cli"}, "config": config, "result": result}
    if ended:
        item["endTime"] = f"2026-12-0{version}T10:05:00.000Z"
        item["resourceChanges"] = {"same": 3}
    return item


CANARY_A = stack_config("existing-canary")  # driver 580.173.02, previous 570.195.03
CANARY_B = with_driver(CANARY_A, B, A)


def plan(raw_history: list[dict[str, Any]], current: dict[str, dict[str, Any]], **kwargs: Any) -> history.Plan:
    return history.plan_rollback("canary", pulumi_config.parse_history(raw_history), pulumi_config.parse_config(current),
                                 **kwargs)


def refusal(raw_history: list[dict[str, Any]], current: dict[str, dict[str, Any]], **kwargs: Any):
    with pytest.raises(history.RollbackRefused) as caught:
        plan(raw_history, current, **kwargs)
    return caught.value


# ---------------------------------------------------------------- the target and its changes


def test_goes_back_to_the_newest_good_update_on_another_driver() -> None:
    past = [entry(3, cli_config(CANARY_B)), entry(2, cli_config(CANARY_A)), entry(1, cli_config(CANARY_A))]
    result = plan(past, cli_config(CANARY_B))
    assert result.target.version == 2
    assert (result.current_driver, result.target_driver, result.owner) == (B, A, "operator")
    shown = {c.path: (c.shown(c.old), c.shown(c.new)) for c in result.changes}
    assert shown == {KEY + "driver.version": (B, A), KEY + "driver.previousVersion": (A, "570.195.03")}
    assert len(result.steps) == 1 and result.steps[0].changes == result.changes
    assert "one at a time" in result.how and "maxParallelUpgrades 1" in result.how


def test_the_operator_s_pace_is_the_target_s_upgrade_policy_else_the_model_s_default() -> None:
    past = [entry(2, cli_config(CANARY_B)), entry(1, cli_config(CANARY_A))]
    assert "maxParallelUpgrades 1, maxUnavailable 1 " in plan(past, cli_config(CANARY_B)).how  # the example's own
    unset_a, unset_b = copy.deepcopy(CANARY_A), copy.deepcopy(CANARY_B)
    for values in (unset_a, unset_b):
        del values[KEY + "gpuOperator"]["upgradePolicy"]
    default = UpgradePolicy()  # what the program writes when the config sets none
    result = plan([entry(2, cli_config(unset_b)), entry(1, cli_config(unset_a))], cli_config(unset_b))
    assert (f"maxParallelUpgrades {default.maxParallelUpgrades}, maxUnavailable {default.maxUnavailable} "
            in result.how)


def test_a_failed_update_is_skipped() -> None:
    past = [entry(3, cli_config(CANARY_B), result="failed"), entry(2, cli_config(CANARY_B)),
            entry(1, cli_config(CANARY_A))]
    assert plan(past, cli_config(CANARY_B)).target.version == 1


def test_the_commands_set_each_path_and_run_up_with_the_pack() -> None:
    result = plan([entry(2, cli_config(CANARY_B)), entry(1, cli_config(CANARY_A))], cli_config(CANARY_B))
    commands = [pulumi_config.command(c, "existing-canary", 1) for c in result.steps[0].changes]
    assert sorted(commands) == [
        f"pulumi config set --path --stack existing-canary {KEY}driver.previousVersion -- 570.195.03",
        f"pulumi config set --path --stack existing-canary {KEY}driver.version -- {A}",
    ]
    assert pulumi_config.up_command("existing-canary", "policy", "policy/canary.json") == (
        "pulumi up --stack existing-canary --policy-pack policy --policy-pack-config policy/canary.json")


def test_to_version_names_the_update() -> None:
    old = with_driver(CANARY_A, "570.195.03", None)
    past = [entry(3, cli_config(CANARY_B)), entry(2, cli_config(CANARY_A)), entry(1, cli_config(old))]
    result = plan(past, cli_config(CANARY_B), to_version=1)
    assert result.target.version == 1
    removed = [c for c in result.changes if c.removes]
    assert [c.path for c in removed] == [KEY + "driver.previousVersion"]
    assert pulumi_config.command(removed[0], "s", 1) == f"pulumi config rm --path --stack s {KEY}driver.previousVersion"


def test_paths_quote_keys_with_dots_and_index_lists() -> None:
    moved = copy.deepcopy(CANARY_A)
    moved[KEY + "nodePools"][0]["existing"]["nodeSelector"]["gpu.example.com/pool"] = "l40s-canary-2"
    result = plan([entry(2, cli_config(CANARY_A)), entry(1, cli_config(moved))], cli_config(CANARY_A), to_version=1,
                  all_config=True)  # a pool's selector is left alone unless the whole config goes back
    assert [c.path for c in result.changes] == [
        KEY + 'nodePools[0].existing.nodeSelector["gpu.example.com/pool"]']
    assert pulumi_config.split_path(result.changes[0].path) == (
        KEY + "nodePools", [0, "existing", "nodeSelector", "gpu.example.com/pool"])


def test_a_value_the_path_form_would_retype_is_flagged_and_not_applied() -> None:
    odd = copy.deepcopy(CANARY_A)
    odd[KEY + "nodePools"][0]["existing"]["nodeSelector"]["gpu.example.com/pool"] = "12345"  # --path: an integer
    result = plan([entry(2, cli_config(CANARY_A)), entry(1, cli_config(odd))], cli_config(CANARY_A), to_version=1,
                  all_config=True)
    assert [c.path for c in result.untypeable] == [KEY + 'nodePools[0].existing.nodeSelector["gpu.example.com/pool"]']
    assert "edit the stack file" in pulumi_config.command(result.untypeable[0], "s", 1)


@pytest.mark.parametrize(("value", "text"), [
    ("580.173.02", "580.173.02"), (True, "true"), (3, "3"), ("0123", "0123"),
    ("true", None), ("42", None), (1.5, None), (None, None),
])
def test_path_value_text_follows_the_cli(value: Any, text: str | None) -> None:
    assert pulumi_config.path_value_text(value) == text


# ---------------------------------------------------------------- secrets


def test_secrets_are_shown_as_secret_and_set_back_as_secrets() -> None:
    past = [entry(2, cli_config(CANARY_B, {KEY + "changeTicket": "CHG-B"})),
            entry(1, cli_config(CANARY_A, {KEY + "changeTicket": "CHG-A"}))]
    result = plan(past, cli_config(CANARY_B, {KEY + "changeTicket": "CHG-B"}), all_config=True)
    ticket = next(c for c in result.changes if c.path == KEY + "changeTicket")
    assert ticket.secret and ticket.new == "CHG-A"  # the value to set back, never shown
    assert (ticket.shown(ticket.old), ticket.shown(ticket.new)) == ("[secret]", "[secret]")
    line = pulumi_config.command(ticket, "canary", 1)
    assert "--secret" in line and "CHG-A" not in line and "CHG-B" not in line


def test_secrets_that_cannot_be_decrypted_refuse_with_exit_2() -> None:
    past = [entry(2, cli_config(CANARY_B)),
            entry(1, cli_config(CANARY_A, {KEY + "changeTicket": pulumi_config.UNDECRYPTABLE}))]
    refused = refusal(past, cli_config(CANARY_B))
    assert refused.code == Exit.INVALID
    assert "secrets cannot be decrypted" in str(refused) and KEY + "changeTicket" in str(refused)


def test_the_file_backend_s_unnumbered_updates_are_numbered_from_the_oldest() -> None:
    raw = [entry(0, cli_config(CANARY_B)), entry(0, cli_config(CANARY_A), result="failed"),
           entry(0, cli_config(CANARY_A))]  # as `pulumi stack history --json` of a file backend lists them
    assert [(u.version, u.result) for u in pulumi_config.parse_history(raw)] == [
        (3, "succeeded"), (2, "failed"), (1, "succeeded")]
    assert plan(raw, cli_config(CANARY_B)).target.version == 1


def test_a_secret_left_out_by_the_cli_reads_as_secret() -> None:
    parsed = pulumi_config.parse_config({KEY + "changeTicket": {"secret": True}})
    assert parsed[KEY + "changeTicket"] == pulumi_config.Entry("[secret]", True)


# ---------------------------------------------------------------- refusals


def test_no_history_refuses() -> None:
    refused = refusal([], cli_config(CANARY_A))
    assert refused.code == Exit.FAILED and "no update history" in str(refused)


def test_no_earlier_good_update_refuses() -> None:
    past = [entry(2, cli_config(CANARY_A)), entry(1, cli_config(CANARY_A)), entry(0, cli_config(CANARY_B),
                                                                                   result="failed")]
    refused = refusal(past, cli_config(CANARY_A))
    assert refused.code == Exit.FAILED and "no earlier succeeded update" in str(refused)


@pytest.mark.parametrize("result", ["in-progress", "succeeded"])
def test_an_update_in_progress_refuses(result: str) -> None:
    past = [entry(3, cli_config(CANARY_B), result=result, ended=False), entry(2, cli_config(CANARY_A))]
    refused = refusal(past, cli_config(CANARY_B))
    assert refused.code == Exit.FAILED and "update 3 (update) is still in progress" in str(refused)


@pytest.mark.parametrize(("version", "why"), [(9, "has no such update"), (2, "a update that failed")])
def test_to_version_must_name_a_succeeded_update(version: int, why: str) -> None:
    past = [entry(2, cli_config(CANARY_B), result="failed"), entry(1, cli_config(CANARY_A))]
    refused = refusal(past, cli_config(CANARY_B), to_version=version)
    assert refused.code == Exit.INVALID and f"--to-version {version}" in str(refused) and why in str(refused)


def test_to_version_with_the_same_config_refuses() -> None:
    refused = refusal([entry(1, cli_config(CANARY_A))], cli_config(CANARY_A), to_version=1)
    assert refused.code == Exit.FAILED and "nothing to roll back" in str(refused)


def test_a_failed_rollback_is_finished_with_to_version_not_rolled_back_from() -> None:
    failed = entry(4, cli_config(CANARY_A), result="failed")
    failed["message"] = history.ROLLBACK_MESSAGE.format(version=2)
    past = [failed, entry(3, cli_config(CANARY_B)), entry(2, cli_config(CANARY_A))]
    refused = refusal(past, cli_config(CANARY_A))  # else update 3 (driver B) would be the target
    assert refused.code == Exit.FAILED
    assert "the last update, a rollback to update 2, failed" in str(refused) and "--to-version 2 --yes" in str(refused)
    finish = plan(past, cli_config(CANARY_A), to_version=2)  # the config the failed rollback set
    assert finish.target.version == 2 and finish.changes == []
    assert [(s.title.split(":")[0], s.changes) for s in finish.steps] == [("`up` again", [])]


def test_a_refresh_is_no_update_to_go_back_to() -> None:
    past = [entry(2, cli_config(CANARY_A), kind="refresh"), entry(1, cli_config(CANARY_B))]
    assert plan(past, cli_config(CANARY_A)).target.version == 1
    refused = refusal(past, cli_config(CANARY_B), to_version=2)
    assert "a refresh that succeeded" in str(refused)


# ---------------------------------------------------------------- the canary's history


PROD_A = stack_config("existing-prod")  # promotion.canaryStack: existing-canary
PROD_B = with_driver(PROD_A, B, A)


def prod_plan(canary: list[dict[str, Any]] | None, force: bool = False) -> history.Plan:
    past = pulumi_config.parse_history([entry(2, cli_config(PROD_A)), entry(1, cli_config(PROD_B))])
    current = pulumi_config.parse_config(cli_config(PROD_A))
    assert history.canary_stack_of(current) == "existing-canary"
    return history.plan_rollback("existing-prod", past, current, canary_stack="existing-canary",
                                 canary_history=None if canary is None else pulumi_config.parse_history(canary),
                                 force=force)


def test_a_driver_the_canary_never_ran_refuses() -> None:
    with pytest.raises(history.RollbackRefused) as caught:
        prod_plan([entry(1, cli_config(CANARY_A)), entry(2, cli_config(CANARY_B), result="failed")])
    assert caught.value.code == Exit.FAILED
    assert f"driver {B} was never run by the canary stack 'existing-canary'" in str(caught.value)


def test_a_canary_stack_without_history_refuses() -> None:
    with pytest.raises(history.RollbackRefused, match="has no history here"):
        prod_plan(None)


def test_force_rolls_back_to_a_driver_the_canary_never_ran() -> None:
    result = prod_plan([entry(1, cli_config(CANARY_A))], force=True)
    assert result.target_driver == B and result.canary.startswith("--force:")


def test_a_canary_s_previous_version_is_not_a_driver_it_ran() -> None:
    """Issue 30 (a deliberate-bug audit): driver.previousVersion is config, what held pools stay pinned to, and a
    canary holds no pool. A canary whose every good update names the target only as previousVersion never ran it."""
    named = with_driver(CANARY_A, A, B)  # the canary on 580.173.02, its previousVersion naming 595.91.07
    config = pulumi_config.parse_config(cli_config(named))
    assert history.drivers_run(config) == {A}
    with pytest.raises(history.RollbackRefused) as caught:
        prod_plan([entry(2, cli_config(named)), entry(1, cli_config(with_driver(CANARY_A, A, B)))])
    assert f"driver {B} was never run by the canary stack 'existing-canary'" in str(caught.value)


def test_the_canary_ran_the_target() -> None:
    result = prod_plan([entry(2, cli_config(CANARY_A)), entry(1, cli_config(CANARY_B))])
    assert result.canary == f"the canary stack 'existing-canary' ran {B} in update(s) 1"


# ---------------------------------------------------------------- image-owned pools: generations


def eks_states() -> tuple[dict[str, Any], dict[str, Any]]:
    """Before: gpu-l40s on generation 1 (570.195.03) alone. Now: generation 2 (580.173.02) beside it."""
    now = stack_config("eks-prod")
    before = copy.deepcopy(now)
    before[KEY + "driver"] = {"owner": "image", "version": "570.195.03"}
    for pool in before[KEY + "nodePools"]:
        if pool["name"] == "gpu-l40s":
            pool["generations"] = [g for g in pool["generations"] if g["id"] == 1]
        if pool["name"] == "gpu-a10g":
            pool["generations"] = [{**g, "retired": False} for g in pool["generations"] if g["id"] == 3]
        if pool["name"] == "gpu-h100":  # its one generation runs 570.195.03: released while that was the target
            pool["rollout"]["released"] = True
    return before, now


def _spec_of(config: dict[str, pulumi_config.Entry]) -> None:
    spec_from_config({k: e.value if isinstance(e.value, str) else json.dumps(e.value) for k, e in config.items()})


def test_an_image_owned_pool_moves_back_by_generations_in_three_steps() -> None:
    before, now = eks_states()
    result = history.plan_rollback("eks-prod", pulumi_config.parse_history([entry(2, cli_config(now)),
                                                                      entry(1, cli_config(before))]),
                                   pulumi_config.parse_config(cli_config(now)))
    assert result.owner == "image" and result.target.version == 1 and len(result.steps) == 3
    first, hold, retire = (({c.path: c.new for c in s.changes}) for s in result.steps)
    pools = KEY + "nodePools"
    # 1: the kept previous generations live again (gpu-a10g's g3 un-retired), the driver back; g2/g4 stay.
    assert first[KEY + "driver.version"] == "570.195.03"
    assert first[f"{pools}[0].generations[0].retired"] is False
    assert not any("generations[1]" in path for path in first)
    # 2: the new generations held at 0 nodes.
    assert hold == {f"{pools}[0].generations[1].nodeCount": 0, f"{pools}[1].generations[1].nodeCount": 0}
    # 3: the new generations retired: their entries removed.
    assert [c.path for c in result.steps[2].changes if c.removes] == [
        f"{pools}[0].generations[1]", f"{pools}[1].generations[1]"]
    assert all(v is pulumi_config.ABSENT for v in retire.values())
    # Every intermediate config is one the spec accepts, and the last is update 1's.
    state = pulumi_config.parse_config(cli_config(now))
    for step in result.steps:
        state = pulumi_config.apply_changes(state, step.changes)
        _spec_of(state)
    assert state == pulumi_config.parse_config(cli_config(before))


def test_a_rerun_with_to_version_continues_with_the_next_step() -> None:
    before, now = eks_states()
    past = pulumi_config.parse_history([entry(2, cli_config(now)), entry(1, cli_config(before))])
    first = history.plan_rollback("eks-prod", past, pulumi_config.parse_config(cli_config(now)))
    after_step_1 = pulumi_config.apply_changes(pulumi_config.parse_config(cli_config(now)), first.steps[0].changes)
    again = history.plan_rollback("eks-prod", past, after_step_1, to_version=1)
    assert [s.title for s in again.steps] == [s.title for s in first.steps[1:]]


def test_the_spec_refuses_a_state_with_every_generation_retired() -> None:
    """The check above has teeth: a config with no live generation is refused by the spec."""
    _, now = eks_states()
    broken = copy.deepcopy(now)
    for g in broken[KEY + "nodePools"][0]["generations"]:
        g["retired"] = True
    with pytest.raises(SpecError):
        _spec_of(pulumi_config.parse_config(cli_config(broken)))


def test_a_step_whose_config_the_program_refuses_is_refused_before_any_change() -> None:
    before, now = eks_states()
    for pool in before[KEY + "nodePools"]:
        if pool["name"] == "gpu-h100":
            pool["rollout"]["released"] = False  # held, yet its only generation runs the target 570.195.03
    past = pulumi_config.parse_history([entry(2, cli_config(now)), entry(1, cli_config(before))])
    with pytest.raises(history.RollbackRefused) as caught:
        history.plan_rollback("eks-prod", past, pulumi_config.parse_config(cli_config(now)))
    assert caught.value.code == Exit.FAILED
    assert f"{KEY}nodePools[2].generations (gpu-h100): pool 'gpu-h100' is held" in str(caught.value)


# ---------------------------------------------------------------- how --yes hands the changes to the CLI


class RecordingStack:
    """Stands in for the Automation API's Stack: records the config calls the verb makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def set_all_config(self, values: dict[str, Any], *, path: bool = False) -> None:
        self.calls.append(("set-all", path, {k: (v.value, v.secret) for k, v in values.items()}))

    def set_config(self, key: str, value: Any, *, path: bool = False) -> None:
        self.calls.append(("set", path, key, value.value, value.secret))

    def remove_all_config(self, keys: list[str], *, path: bool = False) -> None:
        self.calls.append(("rm-all", path, keys))


def test_yes_batches_plain_leaves_and_sets_secrets_one_by_one_in_order() -> None:
    from rollout import rollback

    old = with_driver(CANARY_A, "570.195.03", None)
    past = [entry(2, cli_config(CANARY_B, {KEY + "changeTicket": "CHG-B"})),
            entry(1, cli_config(old, {KEY + "changeTicket": "CHG-A"}))]
    result = plan(past, cli_config(CANARY_B, {KEY + "changeTicket": "CHG-B"}), to_version=1, all_config=True)
    stack = RecordingStack()
    rollback._apply(stack, result.steps[0])  # type: ignore[arg-type]
    assert stack.calls == [  # in the order of the config (keys sorted, as the CLI writes them)
        ("set", False, KEY + "changeTicket", "CHG-A", True),
        ("rm-all", True, [KEY + "driver.previousVersion"]),
        ("set-all", True, {KEY + "driver.version": ("570.195.03", False)}),
    ]


def test_the_automation_api_s_summaries_read_like_the_cli_s_json() -> None:
    """Stack.history() hands back the SDK's UpdateSummary objects, parsed from `stack history --json`; the
    verb turns them back into that document, and the analysis reads the same updates from both."""
    from datetime import datetime

    from pulumi.automation import UpdateSummary

    from pulumi_backend import backend

    raw = [entry(0, cli_config(CANARY_B, {KEY + "changeTicket": "CHG-B"})), entry(0, cli_config(CANARY_A))]
    raw[0]["message"] = history.ROLLBACK_MESSAGE.format(version=1)
    summaries = [UpdateSummary(kind=r["kind"], start_time=datetime(2026, 12, 3, 10), message=r["message"],
                               environment=r["environment"], config=r["config"], result=r["result"],
                               end_time=datetime(2026, 12, 3, 11), version=r["version"]) for r in raw]
    via_sdk = pulumi_config.parse_history([backend.summary_to_json(s) for s in summaries])
    direct = pulumi_config.parse_history(raw)
    assert [(u.version, u.result, u.message, u.config) for u in via_sdk] == [
        (u.version, u.result, u.message, u.config) for u in direct]
    assert via_sdk[0].config[KEY + "changeTicket"] == pulumi_config.Entry("CHG-B", True)


def test_the_cli_s_error_line_is_what_a_refusal_names() -> None:
    from pulumi.automation.errors import CommandError

    from pulumi_backend import backend

    class Result:
        def __str__(self) -> str:
            return ("\n code: 255\n stdout: \n stderr: error: decrypting secrets: incorrect passphrase\n")

    refused = backend.cli_refusal("stack s's history", CommandError(Result()))  # type: ignore[arg-type]
    assert refused.code == Exit.INVALID
    assert str(refused).startswith("stack s's history: secrets cannot be decrypted (decrypting secrets: incorrect "
                                   "passphrase)")


# ---------------------------------------------------------------- what a rollback restores, and what it leaves


def with_added_pool(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with a third canary pool, as a change after the target update would add it."""
    added = copy.deepcopy(values)
    pool = copy.deepcopy(added[KEY + "nodePools"][0])
    pool.update(name="a10-canary", gpuProduct="NVIDIA-A10", nodeCount=2)
    pool["existing"]["nodeSelector"] = {"gpu.example.com/pool": "a10-canary"}
    added[KEY + "nodePools"].append(pool)
    added[KEY + "changeTicket"] = "CHG-20261210-0001"
    return added


def test_a_pool_added_after_the_target_survives_and_every_other_difference_is_listed() -> None:
    now = with_added_pool(CANARY_B)
    result = plan([entry(2, cli_config(now)), entry(1, cli_config(CANARY_A))], cli_config(now))
    assert result.target.version == 1 and not result.all_config
    assert {c.path: c.new for c in result.changes} == {KEY + "driver.version": A,
                                                       KEY + "driver.previousVersion": "570.195.03"}
    left = {c.path: (c.shown(c.old), c.shown(c.new)) for c in result.left_alone}
    assert left[KEY + "changeTicket"] == ("CHG-20261210-0001", "CHG-20261202-0143")
    assert left[KEY + "nodePools[2]"][1] == "(absent)"  # the added pool: kept, and said so
    after = pulumi_config.apply_changes(pulumi_config.parse_config(cli_config(now)), result.steps[0].changes)
    assert [p["name"] for p in after[KEY + "nodePools"].value] == ["l40s-canary", "h100-canary", "a10-canary"]
    assert after[KEY + "driver"].value["version"] == A


def test_all_config_restores_the_whole_config_and_removes_the_added_pool() -> None:
    now = with_added_pool(CANARY_B)
    result = plan([entry(2, cli_config(now)), entry(1, cli_config(CANARY_A))], cli_config(now), all_config=True)
    assert result.all_config and result.left_alone == []
    after = pulumi_config.apply_changes(pulumi_config.parse_config(cli_config(now)), result.steps[0].changes)
    assert after == pulumi_config.parse_config(cli_config(CANARY_A))
    assert [p["name"] for p in after[KEY + "nodePools"].value] == ["l40s-canary", "h100-canary"]


def test_a_held_pool_and_the_operator_chart_go_back_but_its_size_stays() -> None:
    then = copy.deepcopy(PROD_B)
    now = copy.deepcopy(PROD_A)
    now[KEY + "gpuOperator"]["kernelModuleType"] = "open"
    now[KEY + "gpuOperator"]["upgradePolicy"]["maxParallelUpgrades"] = 2  # not what runs: left alone
    pool = now[KEY + "nodePools"][0]
    pool["rollout"]["released"] = not pool["rollout"]["released"]
    pool["nodeCount"] += 1
    result = history.plan_rollback("existing-prod", pulumi_config.parse_history(
        [entry(2, cli_config(now)), entry(1, cli_config(then))]), pulumi_config.parse_config(cli_config(now)),
        to_version=1, canary_stack="existing-canary", canary_history=pulumi_config.parse_history(
            [entry(1, cli_config(CANARY_B))]))
    changed = {c.path for c in result.changes}
    assert {KEY + "gpuOperator.kernelModuleType", KEY + "nodePools[0].rollout.released",
            KEY + "driver.version"} <= changed
    left = {c.path for c in result.left_alone}
    assert {KEY + "nodePools[0].nodeCount", KEY + "gpuOperator.upgradePolicy.maxParallelUpgrades"} <= left
    assert not changed & left
    assert "maxParallelUpgrades 2" in result.how  # the pace the rollback runs under: the one the stack keeps


def test_only_differences_outside_the_gpu_runtime_refuse_and_name_all_config() -> None:
    past = [entry(2, cli_config(with_added_pool(CANARY_A))), entry(1, cli_config(CANARY_A))]
    refused = refusal(past, cli_config(with_added_pool(CANARY_A)), to_version=1)
    assert refused.code == Exit.FAILED
    assert "ran what the stack runs now on its GPU nodes" in str(refused) and "--all-config" in str(refused)


def aks_generation_states() -> tuple[dict[str, Any], dict[str, Any]]:
    """Before: the H100 pool on generation 1 (570.195.03, node image 202510.14.0) alone. Now: generation 1 gone
    after the soak, generation 2 (580.173.02, 202511.21.0) alone."""
    from tests.conftest import aks_image_owned

    now = {k: json.loads(v) if v[:1] in "{[" else v for k, v in aks_image_owned().items()}
    before = copy.deepcopy(now)
    before[KEY + "driver"]["version"] = "570.195.03"
    before[KEY + "driver"].pop("previousVersion", None)
    before[KEY + "nodePools"][0]["generations"] = before[KEY + "nodePools"][0]["generations"][:1]
    now[KEY + "nodePools"][0]["generations"] = now[KEY + "nodePools"][0]["generations"][1:]
    return before, now


def test_an_aks_generation_created_again_is_said_to_get_another_node_image() -> None:
    before, now = aks_generation_states()
    result = history.plan_rollback("prod", pulumi_config.parse_history([entry(2, cli_config(now)),
                                                                         entry(1, cli_config(before))]),
                                   pulumi_config.parse_config(cli_config(now)))
    assert result.owner == "image" and len(result.steps) == 3
    (note,) = result.notes
    pool = now[KEY + "nodePools"][0]["name"]
    assert f"pool {pool} generation 1 is created again" in note
    assert "not the recorded 202510.14.0, nor necessarily its driver 570.195.03" in note
    assert f"202511.21.0 (pool {pool} generation 2)" in note  # the image it will get, as far as the stack knows


def test_an_eks_generation_created_again_gets_its_pinned_release() -> None:
    before, now = eks_states()
    result = history.plan_rollback("eks-prod", pulumi_config.parse_history([entry(2, cli_config(now)),
                                                                             entry(1, cli_config(before))]),
                                   pulumi_config.parse_config(cli_config(now)))
    assert result.notes == []  # an EKS node group is created on its recorded releaseVersion


def test_the_stack_file_is_compared_with_the_default_branch(tmp_path: Path) -> None:
    from rollout.rollback import unmerged_stack_file
    from tests.rollout.gitrepo import GitRepo

    assert "is not a git checkout" in unmerged_stack_file(tmp_path, "canary")
    repo = GitRepo(tmp_path / "fleet")
    assert unmerged_stack_file(repo.root, "canary") is None
    repo.edit("canary", "driver", lambda d: d.update(version="580.159.04"))
    assert unmerged_stack_file(repo.root, "canary") == "Pulumi.canary.yaml differs from the default branch (main)"
    assert unmerged_stack_file(repo.root, "nothing") == "Pulumi.nothing.yaml is not on the default branch (main)"
