"""`gpu-rollout simulate`: from the stack (no cluster reached), from the live cluster (read-only, a constant number
of LISTs), its exit codes and the stack-file change it prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from policy.evaluate import mandatory
from rollout.plan import policy_report
from tests.conftest import PROJECT_DIR, as_planned, change, edited
from tests.fakekube.server import FakeKube
from tests.rollout.json_contract import document_of

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def write_stack(tmp_path: Path, config: dict[str, str], name: str = "prod") -> Path:
    """A stack file holding ``config`` (the engine's flat map, objects as JSON, which YAML reads back)."""
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(json.dumps({"config": config}), encoding="utf-8")
    return path


def cached(stack: str = "prod") -> dict[str, str]:
    """The example stack with every model's weights in a cache: its rollout completes."""
    return edited(stack, "models", lambda models: [m.update(weightsCached=True) for m in models])


def test_from_the_stack_it_predicts_and_recommends_without_a_cluster(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))  # would fail, were it read
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, cached())), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 0, result.output
    doc = document_of("simulate", result.stdout)
    assert doc["source"] == "stack" and doc["predicted"]["seconds"] > 0
    assert [w["name"] for w in doc["predicted"]["waves"]] == ["wave 1", "wave 2", "wave 3"]
    assert doc["predicted"]["seconds"] >= doc["lowerBound"]["seconds"] and doc["ratio"] >= 1
    assert {m["model"] for m in doc["predicted"]["models"]} >= {"inference/llm-chat"}
    recommended = doc["recommended"]
    # Per-pool mode (operator v26.7.0, one NVIDIADriver per pool): each pool its own pair, as its own keys.
    assert recommended["perPool"] is True and recommended["maxParallelUpgrades"] is None
    pairs = {p["pools"][0]: p["confirmed"] for p in recommended["perPolicy"]}
    assert set(pairs) == {"gput4", "gpua100", "gpuh100"} and all(v["maxParallelUpgrades"] >= 1 for v in pairs.values())
    assert recommended["stackChange"] == [
        {"key": f"gpu-driver-upgrade:nodePools[{index}].upgradePolicy.{key}", "value": pairs[pool][key], "pool": pool}
        for index, pool in enumerate(("gput4", "gpua100", "gpuh100"))
        for key in ("maxParallelUpgrades", "maxUnavailable")]
    assert recommended["predicted"]["seconds"] >= doc["lowerBound"]["seconds"] and recommended["ratio"] >= 1
    # Within what the pack admits (one node at a time on each of the example's pools): a larger bound, which the
    # recommendation (held to the pack) still never beats; the step between the bounds is the pack's rules.
    within = doc["withinPackBound"]
    assert within["seconds"] > doc["lowerBound"]["seconds"]
    assert {p["pool"]: (p["packAdmits"], p["maxNodesOutAtOnce"]) for p in within["pools"]} == {
        pool: (pairs[pool]["maxParallelUpgrades"], pairs[pool]["maxParallelUpgrades"]) for pool in pairs}
    assert all(p["packAdmits"] is None for p in doc["lowerBound"]["pools"])
    assert recommended["predicted"]["seconds"] >= within["seconds"]
    assert recommended["withinPackRatio"] == round(recommended["predicted"]["seconds"] / within["seconds"], 2)
    assert 1 <= recommended["withinPackRatio"] < recommended["ratio"]


def test_in_cluster_policy_mode_it_recommends_the_one_policy_every_pool_takes(tmp_path: Path) -> None:
    config = change(cached(), "gpuOperator", lambda o: o.update(useNvidiaDriverCrd=False))
    doc = document_of("simulate", invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)),
                                         "--project-dir", str(PROJECT_DIR), "--json").stdout)
    recommended = doc["recommended"]
    assert recommended["perPool"] is False and recommended["maxParallelUpgrades"] >= 1
    assert recommended["stackChange"] == [
        {"key": "gpu-driver-upgrade:gpuOperator.upgradePolicy.maxParallelUpgrades",
         "value": recommended["maxParallelUpgrades"]},
        {"key": "gpu-driver-upgrade:gpuOperator.upgradePolicy.maxUnavailable", "value": recommended["maxUnavailable"]},
    ]


def _grown(pools: list[dict[str, Any]]) -> None:
    """Spare nodes in every prod pool, so the pack admits more than one node at a time, by pool."""
    for pool in pools:
        pool["nodeCount"] = {"gput4": 6, "gpua100": 12, "gpuh100": 6}[pool["name"]]


def _applied(config: dict[str, str], stack_change: list[dict[str, Any]]) -> dict[str, str]:
    """``config`` with each `nodePools[i].upgradePolicy.<key>` of a stack change set, as `pulumi config set --path`
    would set it."""
    pools = json.loads(config["gpu-driver-upgrade:nodePools"])
    for entry in stack_change:
        where, path = entry["key"].removeprefix("gpu-driver-upgrade:nodePools[").split("].upgradePolicy.")
        *blocks, key = path.split(".")
        policy = pools[int(where)].setdefault("upgradePolicy", {})
        for block in blocks:
            policy = policy.setdefault(block, {})
        policy[key] = entry["value"]
    return {**config, "gpu-driver-upgrade:nodePools": json.dumps(pools)}


def test_the_recommendation_per_pool_is_what_the_pack_admits_and_beats_the_one_policy(tmp_path: Path) -> None:
    config = change(cached(), "nodePools", _grown)
    doc = document_of("simulate", invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)),
                                         "--project-dir", str(PROJECT_DIR), "--json").stdout)
    recommended = doc["recommended"]
    values = {p["pools"][0]: p["confirmed"]["maxParallelUpgrades"] for p in recommended["perPolicy"]}
    assert len(set(values.values())) > 1, values  # the pools differ: one policy would hold them all to the least
    assert recommended["predicted"]["seconds"] < doc["predicted"]["seconds"]
    assert recommended["ratio"] < doc["ratio"]
    # The stack with the change applied: the pack's capacity rules find nothing, the stack's own values are sent.
    applied = _applied(config, recommended["stackChange"])
    run = as_planned("prod", applied)
    capacity = {"parallelism-within-spare-capacity", "canary-one-node-at-a-time", "spare-capacity"}
    assert [v for v in policy_report(run) if v.policy in capacity] == []
    sent = {r.inputs["metadata"]["name"]: r.inputs["spec"]["upgradePolicy"]["maxParallelUpgrades"]
            for r in run.of_type("kubernetes:nvidia.com/v1alpha1:NVIDIADriver")}
    assert sent == {f"gpu-{pool}": value for pool, value in values.items()}
    # One more node at once on the pool the pack holds tightest is refused by the pack: the value was its largest.
    tightest = min(values, key=lambda pool: values[pool])
    index = ("gput4", "gpua100", "gpuh100").index(tightest)
    over = _applied(applied, [{"key": f"gpu-driver-upgrade:nodePools[{index}].upgradePolicy.{key}",
                               "value": values[tightest] + 1} for key in ("maxParallelUpgrades", "maxUnavailable")])
    assert [v.policy for v in policy_report(as_planned("prod", over)) if v.policy in capacity] == [
        "parallelism-within-spare-capacity"]
    # simulate says the same of both stacks: the applied one within what the pack admits, the other beyond it.
    judged = {}
    for name, stack in (("applied", applied), ("over", over)):
        result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, stack)), "--project-dir",
                        str(PROJECT_DIR), "--json")
        judged[name] = document_of("simulate", result.stdout)["beyondThePack"]
    assert judged["applied"] == []
    assert len(judged["over"]) == 1 and judged["over"][0].startswith(
        f"NVIDIADriver gpu-{tightest} may take {values[tightest] + 1} node(s) of {tightest} at once; the policy "
        f"pack admits {values[tightest]} (parallelism-within-spare-capacity")
    assert "fails `gpu-rollout plan`" in result.stderr
    text = invoke("simulate", "--stack-file", str(write_stack(tmp_path, over)), "--project-dir", str(PROJECT_DIR))
    assert f"beyond what the policy pack admits (a stack that sends these values fails `gpu-rollout plan`): " \
           f"{judged['over'][0]}" in " ".join(text.stdout.split())


def test_a_pool_whose_drains_outlast_pod_deletion_gets_a_longer_timeout_with_its_parallelism(tmp_path: Path) -> None:
    # Replicas back 150 s after an eviction, pod deletion giving up at 240 s: a node that waits two loads for its
    # PDB fails, so at the configured timeout the pools roll few nodes at once.
    config = change(change(change(cached(), "nodePools", _grown), "models",
                           lambda models: [m.update(loadSeconds=150) for m in models]),
                    "gpuOperator", lambda o: o["upgradePolicy"]["podDeletion"].update(timeoutSeconds=240))
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    doc = document_of("simulate", result.stdout)
    recommended = doc["recommended"]
    timeouts = {e["pool"]: e["value"] for e in recommended["stackChange"]
                if e["key"].endswith(".upgradePolicy.podDeletion.timeoutSeconds")}
    assert timeouts and all(240 < t <= 900 for t in timeouts.values()), timeouts
    for policy in recommended["perPolicy"]:
        assert policy["confirmed"]["podDeletionTimeoutSeconds"] == timeouts.get(policy["pools"][0])
        if policy["pools"][0] in timeouts:
            assert "podDeletion.timeoutSeconds 240 stops a node on a PDB" in policy["reason"]
    assert recommended["ratio"] < doc["ratio"]
    # Applied: the pack finds nothing to refuse, each NVIDIADriver carries its pool's timeout, and the stack
    # predicts, as configured, exactly the rollout that confirmed the recommendation.
    applied = _applied(config, recommended["stackChange"])
    run = as_planned("prod", applied)
    judged = {"parallelism-within-spare-capacity", "canary-one-node-at-a-time", "spare-capacity",
              "eviction-respects-pdb"}
    assert [v for v in policy_report(run) if v.policy in judged] == []
    sent = {r.inputs["metadata"]["name"]: r.inputs["spec"]["upgradePolicy"]["podDeletion"]["timeoutSeconds"]
            for r in run.of_type("kubernetes:nvidia.com/v1alpha1:NVIDIADriver")}
    assert sent == {f"gpu-{pool}": timeouts.get(pool, 240) for pool in ("gput4", "gpua100", "gpuh100")}
    again = document_of("simulate", invoke("simulate", "--stack-file", str(write_stack(tmp_path, applied)),
                                           "--project-dir", str(PROJECT_DIR), "--json").stdout)
    assert again["predicted"]["seconds"] == recommended["predicted"]["seconds"]
    text = invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)), "--project-dir",
                  str(PROJECT_DIR)).stdout
    assert "upgradePolicy.podDeletion.timeoutSeconds:" in text


def test_a_refused_pool_policy_exits_2_naming_the_key_and_changes_nothing(tmp_path: Path) -> None:
    config = change(edited("prod", "gpuOperator", lambda o: o.update(useNvidiaDriverCrd=False)), "nodePools",
                    lambda pools: pools[1].update(upgradePolicy={"maxParallelUpgrades": 2}))
    path = write_stack(tmp_path, config)
    before = path.read_bytes()
    result = invoke("simulate", "--stack-file", str(path), "--project-dir", str(PROJECT_DIR))
    assert result.exit_code == 2
    assert "nodePools[1].upgradePolicy" in result.stderr and "ClusterPolicy mode" in result.stderr
    assert result.stdout == "" and path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def test_the_table_prints_the_stack_change(tmp_path: Path) -> None:
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, cached())), "--project-dir",
                    str(PROJECT_DIR))
    assert result.exit_code == 0, result.output
    assert "gpu-driver-upgrade:nodePools[1].upgradePolicy.maxParallelUpgrades:" in result.stdout
    assert "lower bound" in result.stdout and "as configured" in result.stdout


def test_a_pdb_keeping_every_replica_exits_1_naming_it(tmp_path: Path) -> None:
    config = edited("prod", "models", lambda models: [m.update(weightsCached=True, minAvailable=m["replicas"])
                                                      for m in models])
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 1
    doc = document_of("simulate", result.stdout)
    first = doc["predicted"]["stalls"][0]
    assert first["cause"] == "pdb" and first["state"] == "pod-deletion-required" and first["pdb"].endswith("-pdb")
    assert doc["recommended"]["maxParallelUpgrades"] is None and "stackChange" not in doc["recommended"]
    assert "the rollout stops for good" in result.stderr


def test_parallel_overrides_the_configured_policy(tmp_path: Path) -> None:
    path = str(write_stack(tmp_path, cached()))
    doc = json.loads(invoke("simulate", "--stack-file", path, "--project-dir", str(PROJECT_DIR), "--parallel", "2",
                            "--json").stdout)
    assert {p["maxParallelUpgrades"] for p in doc["policies"]} == {2}


def test_the_seed_makes_it_repeatable(tmp_path: Path) -> None:
    path = str(write_stack(tmp_path, cached()))
    runs = [json.loads(invoke("simulate", "--stack-file", path, "--project-dir", str(PROJECT_DIR), "--seed", seed,
                              "--json").stdout)["predicted"]["seconds"] for seed in ("5", "5", "6")]
    assert runs[0] == runs[1] != runs[2]


def test_kubeconfig_without_from_cluster_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("simulate", "--stack", "prod", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert result.exit_code == 2 and "--from-cluster" in result.output


def test_an_image_owned_stack_has_nothing_to_simulate() -> None:
    result = invoke("simulate", "--stack", "eks-prod")
    assert result.exit_code == 2 and "node image owns the driver" in result.stderr


def test_from_the_cluster_reads_in_a_constant_number_of_lists_and_writes_nothing(prod: FakeKube,
                                                                                 kubeconfig: Path) -> None:
    result = invoke("simulate", "--stack", "prod", "--from-cluster", "--kubeconfig", str(kubeconfig), "--json")
    assert result.exit_code in (0, 1), result.output
    doc = document_of("simulate", result.stdout)
    assert doc["source"] == "cluster"
    assert sum(p["nodes"] for p in doc["predicted"]["pools"]) == 16
    assert prod.writes == 0
    assert prod.counts["list"] - prod.pages <= 10 and set(prod.counts) == {"list"}


def test_from_the_cluster_a_single_replica_without_a_pdb_goes_to_zero(prod: FakeKube, kubeconfig: Path,
                                                                      prod_spec) -> None:
    """Runbook: the cluster's own GPU Deployment with one replica and no PDB is gone while its node drains."""
    from tests.fakekube.fixtures import model_container, pod

    node = sorted(n["metadata"]["name"] for n in prod.objects("nodes")
                  if n["metadata"]["labels"].get("gpu-driver-upgrade.io/pool") == "gpuh100")[-1]
    container = {**model_container(prod_spec.models[0]), "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    prod.add({"kind": "Deployment", "metadata": {"name": "solo", "namespace": "lab"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "solo"}},
                       "template": {"metadata": {"labels": {"app": "solo"}}, "spec": {"containers": [container]}}}})
    prod.add(pod("solo-1", "lab", node, {"app": "solo"}, [container], owner=("ReplicaSet", "solo-1")))
    doc = json.loads(invoke("simulate", "--stack", "prod", "--from-cluster", "--kubeconfig", str(kubeconfig),
                            "--json").stdout)
    solo = next(m for m in doc["predicted"]["models"] if m["model"] == "lab/solo")
    assert solo["minAvailable"] == 1 and solo["lowestAvailable"] == 0


def test_the_shipped_operator_owned_examples_predict_a_rollout_that_keeps_every_model() -> None:
    # The examples' models cache their weights, so a rescheduled replica is back before podDeletion times out.
    for stack in ("canary", "prod", "existing-canary", "existing-prod"):
        result = invoke("simulate", "--stack", stack, "--project-dir", str(PROJECT_DIR), "--json")
        assert result.exit_code == 0, (stack, result.output[-2000:])


def test_the_same_fleet_downloading_its_weights_stops_on_a_pdb(tmp_path: Path) -> None:
    # A replica that downloads its weights takes longer than podDeletion.timeoutSeconds to come back: the next
    # eviction the PDB allows comes too late, and the node goes to upgrade-failed.
    uncached = edited("prod", "models", lambda models: [m.update(weightsCached=False) for m in models])
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, uncached)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    assert result.exit_code == 1, result.output[-2000:]


# ---------------------------------------------------------------- issue 32: the change, the dwell, 100 columns


def test_it_predicts_the_change_s_released_waves_and_the_whole_rollout_with_its_dwell(tmp_path: Path) -> None:
    """The prod example releases wave 1 (gput4) and holds waves 2 and 3: this change takes wave 1's upgrades; the
    whole rollout takes every wave's and a rollout.waveDwellHours between each two, which a run of every wave leaves
    out."""
    doc = document_of("simulate", invoke("simulate", "--stack-file", str(write_stack(tmp_path, cached())),
                                         "--project-dir", str(PROJECT_DIR), "--json").stdout)
    plan, waves = doc["schedule"], {w["name"]: w for w in doc["predicted"]["waves"]}
    assert (plan["thisChange"]["waves"], plan["held"]["waves"]) == ([1], [2, 3])
    assert (plan["thisChange"]["pools"], plan["held"]["pools"]) == (["gput4"], ["gpua100", "gpuh100"])
    took = {name: w["endSeconds"] - w["startSeconds"] for name, w in waves.items()}
    assert abs(plan["thisChange"]["seconds"] - took["wave 1"]) < 0.2
    assert abs(plan["upgradeSeconds"] - sum(took.values())) < 0.5
    dwell = plan["waveDwellHours"] * 3600
    assert dwell > 0 and abs(plan["wholeRolloutSeconds"] - (sum(took.values()) + 2 * dwell)) < 0.5


def test_released_all_at_once_the_change_takes_every_wave_and_the_dwell_between(tmp_path: Path) -> None:
    config = edited("prod", "nodePools", lambda pools: [p["rollout"].update(released=True) for p in pools])
    config = {**config, "gpu-driver-upgrade:rollout": json.dumps({"waveDwellHours": 24,
                                                                  "earlyReleaseReason": "test: every wave at once"})}
    doc = document_of("simulate", invoke("simulate", "--stack-file", str(write_stack(tmp_path, config)),
                                         "--project-dir", str(PROJECT_DIR), "--json").stdout)
    plan = doc["schedule"]
    assert plan["held"]["waves"] == [] and plan["thisChange"]["waves"] == [1, 2, 3]
    assert abs(plan["thisChange"]["seconds"] - plan["wholeRolloutSeconds"]) < 0.5
    assert abs(plan["wholeRolloutSeconds"] - plan["upgradeSeconds"] - 2 * 24 * 3600) < 0.5


def test_the_report_reads_at_100_columns_without_a_word_split(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", "--stack-file", str(write_stack(tmp_path, cached())), "--project-dir",
                                 str(PROJECT_DIR)], env={"COLUMNS": "100"})
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and max(map(len, lines)) <= 100
    text = " ".join(result.stdout.split())
    # The stalls' states and details and the recommendation's reasons, whole: no word folded across lines.
    for word in ("pod-deletion-required", "disruptions", "parallelism-within-spare-capacity"):
        assert word in text
        assert not any(line.rstrip().endswith(word[: len(word) // 2]) for line in lines)
    assert "this change: wave 1 (gput4) in " in text and "held: waves 2, 3 (gpua100, gpuh100)" in text
    assert "recommended: each pool its own: the most nodes at once its simulation alone keeps every model" in text
    assert "the smallest" not in text
    assert "within what the policy pack admits: a lower bound of " in text
    assert "(limited by nodes at once: gput4 1 (the pack), gpua100 1 (the pack), gpuh100 1 (the pack))" in text
    assert " within what the pack admits); as configured " in text


def test_one_value_for_every_policy_says_how_it_was_chosen(tmp_path: Path) -> None:
    config = change(cached(), "gpuOperator", lambda o: o.update(useNvidiaDriverCrd=False))
    result = runner.invoke(app, ["simulate", "--stack-file", str(write_stack(tmp_path, config)), "--project-dir",
                                 str(PROJECT_DIR)], env={"COLUMNS": "100"})
    text = " ".join(result.stdout.split())
    assert "recommended: one value for every policy (gpuOperator.upgradePolicy is the stack's one): the fewest of " \
           "the policies' own (" in text


# ---------------------------------------------------------------- simulate and plan's pack on the same stacks

_PARALLELISM_RULES = ("canary-one-node-at-a-time", "parallelism-within-spare-capacity")


def _variant(stage: str, per_pool: bool, parallel: int, unavailable: int | str, canary_role: bool = False,
             rolls: bool = True) -> dict[str, str]:
    """An example stack with the stack's upgrade policy set to ``parallel`` / ``unavailable`` (prod grown to three
    times its nodes, so the pack admits more than one at a time), per pool or under one ClusterPolicy this stack
    patches (so the pack sees it)."""
    def operator(o: dict[str, Any]) -> None:
        o["upgradePolicy"].update(maxParallelUpgrades=parallel, maxUnavailable=unavailable, autoUpgrade=rolls)
        if not per_pool:
            o.update(useNvidiaDriverCrd=False, clusterPolicy="patch")

    def pools(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            entry.pop("upgradePolicy", None)
            if stage == "prod":
                entry["nodeCount"] *= 3
        if canary_role:
            entries[0]["role"] = "canary"

    return change(change(cached(stage) if stage == "prod" else edited(stage, "models", lambda m: None),
                         "nodePools", pools), "gpuOperator", operator)


_GRID = [(stage, per_pool, parallel, unavailable, False, True)
         for stage in ("canary", "prod") for per_pool in (True, False)
         for parallel, unavailable in ((1, 1), (0, 1), (2, 1), (2, 2), (3, "100%"), (1, "100%"))] + [
    *((stage, per_pool, parallel, "100%", False, True) for stage in ("canary", "prod") for per_pool in (True, False)
      for parallel in (4, 0)),
    ("prod", True, 2, 2, True, True), ("prod", False, 2, 2, True, True), ("canary", True, 3, 1, False, False)]


@pytest.mark.parametrize(("stage", "per_pool", "parallel", "unavailable", "canary_role", "rolls"), _GRID)
def test_simulate_says_beyond_the_pack_exactly_where_plan_s_pack_refuses(
        tmp_path: Path, stage: str, per_pool: bool, parallel: int, unavailable: int | str, canary_role: bool,
        rolls: bool) -> None:
    config = _variant(stage, per_pool, parallel, unavailable, canary_role, rolls)
    refused = sorted({v.policy for v in mandatory(policy_report(as_planned(stage, config)))
                      if v.policy in _PARALLELISM_RULES})
    result = invoke("simulate", "--stack-file", str(write_stack(tmp_path, config, stage)), "--project-dir",
                    str(PROJECT_DIR), "--json")
    doc = document_of("simulate", result.stdout)
    said = sorted({rule for rule in _PARALLELISM_RULES for line in doc["beyondThePack"] if f"({rule}" in line})
    assert said == refused, (doc["beyondThePack"], refused)
    # Where the pack admits the stack, its run never beats the bound within what the pack admits.
    within = doc["withinPackBound"]
    if not refused and within is not None and doc["predicted"]["seconds"] is not None:
        assert doc["predicted"]["seconds"] >= within["seconds"] - 1e-6
