"""The stack outputs and what a pool moves to: one home each.

``FleetSpec.pool_target`` answers "what does this pool move to" for the pool summaries, the prod gate, the
validation job and `verify`; ``engine_contracts.resource_facts.outputs`` holds the stack outputs' names, their typed
value and its reading, and ``renderers.manifests.stack_outputs`` builds that value from the spec. The program
exports exactly that value, it reads back as itself, and no other product module spells an output's name.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from preview.run import ProgramRun, run_program
from renderers import manifests
from engine_contracts import resource_facts as rf
from fleetspec.load import spec_from_config
from fleetspec.model import PROJECT, DriverOwner, FleetSpec, Stage
from fleetspec.pools import Generation, NodePool
from tests.product_source import product_files
from tests.conftest import PROJECT_DIR, aks_image_owned, edited, eks_operator_owned, stack_config

# ---------------------------------------------------------------- what a pool moves to


def targets(spec: FleetSpec) -> dict[str, tuple[str, str | None, int | None, bool, str]]:
    return {p.name: (t.driver, t.image, t.generation, t.held, t.why)
            for p in spec.nodePools for t in [spec.pool_target(p)]}


def test_an_operator_owned_pool_moves_to_its_pin_and_a_held_one_stays_on_the_previous_driver() -> None:
    spec = spec_from_config(stack_config("prod"))
    assert spec.driver.owner == DriverOwner.OPERATOR
    assert targets(spec) == {
        "gput4": ("580.173.02", None, None, False, "released in wave 1"),
        "gpua100": ("570.195.03", None, None, True, "held: rollout.released is false"),
        "gpuh100": ("570.195.03", None, None, True, "held: rollout.released is false"),
    }
    assert [p.name for p in spec.nodePools if spec.pool_target(p).moves] == ["gput4"]


def test_a_canary_pool_always_moves() -> None:
    # Even with rollout.released false: the canary is never held.
    spec = spec_from_config(edited("canary", "nodePools", lambda pools: [p.update(rollout={"released": False})
                                                                         for p in pools]))
    assert {t.why for t in map(spec.pool_target, spec.nodePools)} == {"canary"}
    assert all(t.moves and t.driver == spec.driver.version for t in map(spec.pool_target, spec.nodePools))


def test_an_image_owned_pool_moves_to_its_newest_live_generation() -> None:
    spec = spec_from_config(stack_config("eks-prod"))
    assert spec.driver.owner == DriverOwner.IMAGE
    found = targets(spec)
    # Released: the newest generation's image and the driver it ships.
    assert found["gpu-l40s"] == ("580.173.02", "1.33.5-20251120", 2, False, "released in wave 2")
    # Held: it stays on its newest live generation, which ships the previous driver.
    assert found["gpu-h100"] == ("570.195.03", "1.33.5-20251016", 1, True, "held: rollout.released is false")
    aks = spec_from_config(aks_image_owned())
    assert targets(aks)["gpuh100"] == ("580.173.02", "202511.21.0", 2, False, "released in wave 3")


def test_an_operator_owned_eks_pool_states_no_image_it_does_not_pin() -> None:
    spec = spec_from_config(eks_operator_owned())
    for pool in spec.nodePools:
        target = spec.pool_target(pool)
        assert (target.image, target.generation) == (None, None)
        assert target.driver == (spec.driver.version if not spec.pool_held(pool) else spec.driver.previousVersion)


def test_the_newest_generation_is_the_newest_live_one() -> None:
    def pool(*generations: Generation) -> NodePool:
        return NodePool(name="p", gpuProduct="NVIDIA-L40S", gpusPerNode=1, nodeCount=1, generations=list(generations))

    old = Generation(id=1, driverVersion="570.195.03", nodeImageVersion="202510.14.0")
    new = Generation(id=2, driverVersion="580.173.02", releaseVersion="1.33.5-20251120")
    assert pool(new, old).newest_generation == new
    assert pool(old, new.model_copy(update={"retired": True})).newest_generation == old
    assert pool().newest_generation is None
    assert (old.image, new.image) == ("202510.14.0", "1.33.5-20251120")


# ---------------------------------------------------------------- the outputs: built, exported, read back


def program_runs(rendered: dict[str, ProgramRun]) -> dict[str, tuple[dict[str, str], ProgramRun]]:
    runs = {stack: (stack_config(stack), run) for stack, run in rendered.items()}
    runs["aks-image-owned"] = (aks_image_owned(), run_program(aks_image_owned(), "prod"))
    runs["eks-operator-owned"] = (eks_operator_owned(), run_program(eks_operator_owned(), "eks-prod"))
    return runs


def offline_outputs(config: dict[str, str], stack: str = "canary") -> rf.StackOutputs:
    """What the program exports offline: no last deployment, and no time recorded (a preview deploys nothing);
    the stack's identity as the offline engine names it (the file backend's organization), its cluster not read."""
    spec = spec_from_config(config)
    built = manifests.stack_outputs(spec, manifests.timeline(spec, rf.StackOutputs(), None))
    return dataclasses.replace(built, identity=manifests.stack_identity(
        spec, f"{manifests.DEFAULT_ORGANIZATION}/{PROJECT}/{stack}", None))


def test_the_program_exports_the_outputs_built_from_the_spec(rendered: dict[str, ProgramRun]) -> None:
    for stack, (config, run) in program_runs(rendered).items():
        built = offline_outputs(config, run.stack)
        # Byte for byte, in export order: `pulumi stack output --json` prints this.
        assert json.dumps(run.outputs) == json.dumps(built.as_outputs()), stack
        # The fleet component registers the same outputs (the SDK sends no key whose value is None).
        (fleet,) = [r for r in run.resources if r.type == "gpu-driver-upgrade:fleet:GpuFleet"]
        assert rf.read_stack_outputs(fleet.outputs) == built, stack


def test_the_outputs_read_back_as_built(rendered: dict[str, ProgramRun]) -> None:
    for stack, (config, run) in program_runs(rendered).items():
        built = offline_outputs(config, run.stack)
        assert rf.read_stack_outputs(json.loads(json.dumps(run.outputs))) == built, stack
        assert tuple(built.as_outputs()) == rf.OUTPUT_NAMES


def test_the_outputs_state_each_pools_target() -> None:
    spec = spec_from_config(stack_config("eks-prod"))
    outputs = manifests.stack_outputs(spec)
    assert outputs.stage == Stage.PROD and outputs.per_pool_drivers is False
    for pool in spec.nodePools:
        target, summary = spec.pool_target(pool), outputs.pools[pool.name]
        assert (summary.driver_version, summary.image, summary.held) == (target.driver, target.image, target.held)
    assert outputs.released_pools == ("gpu-a10g", "gpu-l40s") and outputs.held_pools == ("gpu-h100",)
    assert outputs.as_outputs()[rf.PER_POOL_DRIVERS] is False  # a JSON boolean, not the string "false"


def test_outputs_a_stack_lacks_or_states_malformed_read_as_nothing() -> None:
    assert rf.read_stack_outputs(None) == rf.StackOutputs()
    assert rf.read_stack_outputs(["not", "a", "mapping"]) == rf.StackOutputs()
    odd = rf.read_stack_outputs({
        rf.STAGE: "staging", rf.DRIVER_VERSION: 580, rf.RELEASED_POOLS: "gput4", rf.HELD_POOLS: ["a", 3],
        rf.PER_POOL_DRIVERS: "maybe", rf.CLOUD_POOLS: ["x"],
        rf.POOLS: {"broken": "x", "half": {"held": "true", "wave": "2", "generations": [{"id": 3}, "junk"]}},
    })
    assert (odd.stage, odd.driver_version, odd.released_pools, odd.held_pools) == (None, None, (), ("a",))
    assert (odd.per_pool_drivers, odd.cloud_pools) == (None, {})
    # A malformed pool is still a pool: it states nothing.
    assert odd.pools == {
        "broken": rf.PoolSummary(),
        "half": rf.PoolSummary(held=True, generations=(rf.GenerationSummary(id=3),)),
    }
    # What older releases exported as the strings "true"/"false" reads back as the boolean.
    assert rf.read_stack_outputs({rf.PER_POOL_DRIVERS: "true"}).per_pool_drivers is True
    assert rf.read_stack_outputs({rf.PER_POOL_DRIVERS: "false"}).per_pool_drivers is False


# ---------------------------------------------------------------- no output name outside its home

HOME = Path("engine_contracts/resource_facts/outputs.py")
# These words also name other things here (a check's subject, a kubeconfig section, a key of the stack config,
# an attestation or the validation job's config): elsewhere they are refused only where they name an output
# (exported, registered, fetched from a stack reference, or looked up in something called *outputs*).
SHARED_WORDS = frozenset({rf.STAGE, rf.CLUSTER, rf.POOLS})
# The same spelling for another fact: (word, the scope it is written in) -> what it names there.
ELSEWHERE = {
    (rf.OPERATOR_VERSION, "engine_contracts/resource_facts/records.py"): "a data key of the cluster identity record",
    (rf.PER_POOL_DRIVERS, "engine_contracts/resource_facts/records.py"): "a data key of the cluster identity record",
    (rf.DRIVER_VERSION, "FleetSpec._check_generations"): "the stack config's generations[].driverVersion",
    (rf.DRIVER_VERSION, "fingerprint"): "the stack config's generations[].driverVersion (rollback)",
    (rf.DRIVER_VERSION, "drivers_run"): "the stack config's generations[].driverVersion (rollback)",
    (rf.CLUSTER, "ClusterIdentity.__init__"): "the identity component's own registered output",
    (rf.IDENTITY, "checks/fleet.py"): "a key of `gpu-rollout status --json`: how the cluster's identity was judged",
    (rf.IDENTITY, "engine_contracts/attestation.py"): "the attestation's own field: the canary cluster's identity",
}
EXPORTING = frozenset({"export", "get_output", "require_output"})
LOOKUPS = frozenset({"get", "pop", "setdefault"})


def _names_outputs(node: ast.AST) -> bool:
    return "output" in ast.unparse(node).lower()


class OutputNames(ast.NodeVisitor):
    """Each string literal that is a stack output's name: (line, name, scope, whether it names an output)."""

    def __init__(self, module: str) -> None:
        self.scopes = [module]
        self.found: list[tuple[int, str, str, bool]] = []
        self.naming: set[int] = set()  # ids of literals used as an output's name

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        outer = self.scopes[-1]
        self.scopes.append(node.name if outer == self.scopes[0] else f"{outer}.{node.name}")
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for value in node.values:  # an f-string's text pieces are no names; its expressions may be
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if node.args and (name in EXPORTING or (name in LOOKUPS and isinstance(func, ast.Attribute)
                                                  and _names_outputs(func.value))):
            self.naming.add(id(node.args[0]))
        if name == "register_outputs" and node.args and isinstance(node.args[0], ast.Dict):
            self.naming.update(id(key) for key in node.args[0].keys if key is not None)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _names_outputs(node.value):
            self.naming.add(id(node.slice))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and _names_outputs(node.comparators[-1]):
            self.naming.add(id(node.left))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in rf.OUTPUT_NAMES:
            self.found.append((node.lineno, node.value, self.scopes[-1], id(node) in self.naming))


def stray_output_names(source: str, module: str) -> list[str]:
    visitor = OutputNames(module)
    visitor.visit(ast.parse(source))
    return [
        f"{module}:{line}: {name!r}"
        for line, name, scope, naming in visitor.found
        if (name, scope) not in ELSEWHERE and (name, module) not in ELSEWHERE and (naming or name not in SHARED_WORDS)
    ]


def test_no_product_module_spells_a_stack_output_name() -> None:
    files = product_files(home=HOME)
    assert len(files) > 50 and PROJECT_DIR / "rollout" / "plan.py" in files
    stray = [hit for f in files for hit in stray_output_names(f.read_text(encoding="utf-8"),
                                                               f.relative_to(PROJECT_DIR).as_posix())]
    assert stray == [], f"use the names of {HOME} (engine_contracts.resource_facts): {stray}"


@pytest.mark.parametrize(("source", "found"), [
    ('pulumi.export("stage", fleet.stage)', ["'stage'"]),
    ('canary.get_output("pools")', ["'pools'"]),
    ('print(result.outputs.get("cluster"))', ["'cluster'"]),
    ('x = run.outputs["stage"]', ["'stage'"]),
    ('if "pools" in previous_outputs: pass', ["'pools'"]),
    ('self.register_outputs({"stage": spec.stage.value, "records": records})', ["'stage'"]),
    ('released = document["releasedPools"]', ["'releasedPools'"]),
    ('drivers = {p["driverVersion"] for p in pools.values()}', ["'driverVersion'"]),
    ('passed("cluster", "all good")', []),  # a check's subject
    ('kubeconfig["clusters"][0]["cluster"]', []),
    ('f"{name}stage"', []),
])
def test_the_search_finds_an_output_name_where_it_is_one(source: str, found: list[str]) -> None:
    assert [hit.split(": ", 1)[1] for hit in stray_output_names(source, "example.py")] == found


def test_the_words_shared_with_other_facts_are_allowed_only_where_they_name_those() -> None:
    source = "def fingerprint(g):\n    return g.get('driverVersion')\n\ndef other(g):\n    return g['driverVersion']\n"
    assert stray_output_names(source, "pulumi_backend/history.py") == ["pulumi_backend/history.py:5: 'driverVersion'"]
