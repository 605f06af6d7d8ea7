"""`gpu-rollout soak` (is the canary ready to attest, and when) and `gpu-rollout verify --smoke` (the check right
after a rollout, which attests nothing), on the canary world verify's tests use (tests/checks/verify_world.py):
the AKS example canary whose last node finished its upgrade 40 minutes ago."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from checks import soak
from rollout import context
from rollout import soak as soak_verb
from rollout import verify as verify_verb
from refusals.errors import InvalidInput
from refusals.exits import Exit
from engine_contracts import attestation
from tests.checks.verify_world import NEW, OLD, ProxyKube, World, build
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import driver_labels
from tests.fakekube.plugin import FAST
from tests.policy.attested import canary_attestation
from tests.workload.openai_server import Behaviour, OpenAIServer
from tests.rollout.json_contract import document_of


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """The canary world, its model pods answering (as in tests/checks/test_verify.py)."""
    with ProxyKube() as fake:
        built = build(fake, tmp_path)
        servers = []
        for pod in built.canary_pods:
            server = OpenAIServer(Behaviour(model="llm-chat")).start()
            fake.backends[("inference", pod)] = server.url
            servers.append(server)
        try:
            yield built
        finally:
            for server in servers:
                server.stop()


def prod_stack(project: Path, hours: float, name: str = "prod") -> None:
    """A prod stack promoted from the canary, soaking ``hours``."""
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    doc["config"]["gpu-driver-upgrade:promotion"]["minSoakHours"] = hours
    (project / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def live(world: World):
    kubeconfig = world.fake.write_kubeconfig(world.stack_file.parent / "kubeconfig")
    return context.open_live(None, world.stack_file, world.stack_file.parent, str(kubeconfig), None, settings=FAST)


def ask(world: World, capsys: pytest.CaptureFixture[str]) -> tuple[Exit, dict[str, Any]]:
    opened = live(world)
    code = soak_verb.execute(opened.stack.name, opened.spec, opened.kube, project_dir=world.stack_file.parent,
                             as_json=True)
    return code, document_of("soak", capsys.readouterr().out)


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_canary_short_of_its_prod_stacks_soak_says_when_it_will_be_ready(world: World,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    prod_stack(world.stack_file.parent, 168)
    prod_stack(world.stack_file.parent, 24, "prod-eu")
    code, doc = ask(world, capsys)
    assert code == Exit.OK and doc["ready"] is False
    assert (doc["driver"], doc["minSoakHours"], doc["prodStacks"]) == (NEW, 168, ["prod", "prod-eu"])
    assert doc["soakStart"] == stamp(world.soak_start)
    assert doc["readyAt"] == stamp(world.soak_start + 168 * 3600)  # the longest soak any prod stack asks
    assert doc["reason"].startswith("soaked 0.7 h of the 168 h prod, prod-eu ask")


def test_a_canary_soaked_long_enough_is_ready(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    prod_stack(world.stack_file.parent, 0.5)
    _, doc = ask(world, capsys)
    assert doc["ready"] is True and doc["reason"].startswith("soaked 0.7 h, at least the 0.5 h prod asks")


def test_a_canary_already_attested_needs_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    prod_stack(world.stack_file.parent, 0.5)
    sealed = canary_attestation(stack="organization/gpu-driver-upgrade/canary", driver=NEW, soak_start=datetime.now(UTC) - timedelta(hours=2))
    path = attestation.write(world.stack_file.parent / attestation.ATTESTATION_DIR, sealed)
    _, doc = ask(world, capsys)
    assert doc["ready"] is False and doc["attested"] == str(path) and "nothing to attest" in doc["reason"]
    prod_stack(world.stack_file.parent, 168)  # a longer soak asked: that attestation no longer does
    _, doc = ask(world, capsys)
    assert doc["attested"] is None and doc["readyAt"] == stamp(world.soak_start + 168 * 3600)


def test_a_canary_no_prod_stack_names_is_never_ready(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = ask(world, capsys)
    assert doc["ready"] is False and doc["readyAt"] is None and "no prod stack names it" in doc["reason"]


def test_a_prod_stack_is_refused(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    opened = live(world)
    prod = opened.spec.model_copy(update={"stage": opened.spec.stage.PROD})
    with pytest.raises(InvalidInput, match="a prod stack; soak answers for a canary stack") as refused:
        soak_verb.execute("prod", prod, opened.kube, project_dir=tmp_path, as_json=True)
    assert refused.value.code == Exit.INVALID and capsys.readouterr().out == ""  # run() prints the error document


def test_the_soak_starts_when_the_last_node_finished() -> None:
    facts = soak.SoakFacts(frozenset({NEW}), 3, (100.0, 400.0), ("node-c",))
    waiting = soak.readiness("canary", facts, {"prod": 1}, Path("/nonexistent"), 10_000)
    assert waiting.start is None and not waiting.ready
    assert waiting.reason == "the soak has not started: 1 of 3 upgraded node(s) show no finished upgrade yet"
    two = soak.readiness("canary", soak.SoakFacts(frozenset({NEW, OLD}), 2, (1.0, 2.0), ()), {"prod": 1},
                     Path("/nonexistent"), 10_000)
    assert two.driver is None and "more than one driver" in two.reason
    done = soak.readiness("canary", soak.SoakFacts(frozenset({NEW}), 2, (100.0, 400.0), ()), {"prod": 1},
                      Path("/nonexistent"), 400 + 3600)
    assert done.ready and done.ready_at == 400 + 3600


# ---------------------------------------------------------------- verify --smoke


def smoke(world: World, capsys: pytest.CaptureFixture[str]) -> tuple[Exit, dict[str, Any], str]:
    opened = live(world)
    project = world.stack_file.parent
    code = verify_verb.execute(opened.stack.name, opened.spec, opened.kube, project_dir=project, prometheus_url=None,
                               as_json=True, smoke=True)
    out = capsys.readouterr()
    return code, document_of("verify", out.out), out.err


def test_a_smoke_verify_without_prometheus_passes_and_attests_nothing(world: World,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = smoke(world, capsys)
    assert {c["status"] for c in doc["checks"]} >= {"inconclusive"}  # the metric checks: no Prometheus
    assert code == Exit.OK and doc["passed"] is True and doc["smoke"] is True and doc["attestation"] is None
    assert not (world.stack_file.parent / attestation.ATTESTATION_DIR).exists()
    assert "smoke check: nothing attested" in err


def test_a_smoke_verify_fails_on_a_failed_check(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    node = world.canary_nodes[0]
    world.fake.update("nodes", node, {"metadata": {"labels": driver_labels(OLD)}})
    code, doc, _ = smoke(world, capsys)
    assert code == Exit.FAILED and doc["passed"] is False
    assert any(c["id"] == "driver-version" and c["status"] == "fail" for c in doc["checks"])
