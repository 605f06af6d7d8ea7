"""One way to make a child's options: ``components.options.child_options``, and the component contract."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import pulumi
import pytest
from pydantic import ValidationError

import components
from components.args import ComponentArgs
from components.gpu_operator import DriverPolicyArgs
from fleetspec.model import ClusterPolicyMode
from preview.run import ProgramRun
from tests.conftest import EXAMPLE_STACKS

COMPONENTS_DIR = Path(components.__file__).parent
HELPER = ("options.py", "child_options")


def _option_builders(path: Path) -> list[tuple[int, str | None]]:
    """Each ``ResourceOptions(...)`` and ``.merge(...)`` call in ``path``: its line and the function it is in."""
    found: list[tuple[int, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else None
            if name in ("ResourceOptions", "merge"):
                found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text(), filename=str(path)), None)
    return found


def test_only_child_options_builds_a_childs_options() -> None:
    elsewhere = [
        f"{path.relative_to(COMPONENTS_DIR.parent)}:{line} (in {function or 'the module'})"
        for path in sorted(COMPONENTS_DIR.glob("**/*.py"))
        for line, function in _option_builders(path)
        if (path.name, function) != HELPER
    ]
    assert not elsewhere, (
        "a component builds a child's options with components.options.child_options only (it passes the component's "
        f"depends_on on to the child); ResourceOptions(...) or .merge(...) found at: {', '.join(elsewhere)}")


def test_the_scan_sees_what_it_refuses(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import pulumi\nfrom pulumi import ResourceOptions\n\n"
                      "def build(parent, opts):\n"
                      "    a = pulumi.ResourceOptions(parent=parent)\n"
                      "    b = ResourceOptions(parent=parent)\n"
                      "    return opts.merge(a)\n")
    assert _option_builders(sample) == [(5, "build"), (6, "build"), (7, "build")]


def _components() -> list[type[pulumi.ComponentResource]]:
    found = {}
    for module in pkgutil.iter_modules([str(COMPONENTS_DIR)]):
        loaded = importlib.import_module(f"components.{module.name}")
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, pulumi.ComponentResource) and value.__module__ == loaded.__name__:
                found[value.__qualname__] = value
    return [found[name] for name in sorted(found)]


COMPONENTS = _components()


def test_every_component_is_found() -> None:
    assert {c.__name__ for c in COMPONENTS} == {
        "AksGpuPool", "CanaryGate", "ClusterIdentity", "DriverPolicy", "EksGpuPool", "ExistingGpuPool", "GpuFleet",
        "Guard", "ModelBudget", "PoolDriver", "PreviousDeployment", "ValidationJob"}


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_a_component_takes_name_args_and_opts(component: type[pulumi.ComponentResource]) -> None:
    parameters = list(inspect.signature(component.__init__).parameters.values())
    assert [p.name for p in parameters] == ["self", "name", "args", "opts"]
    assert parameters[3].default is None
    args = typing.get_type_hints(component.__init__)["args"]
    assert issubclass(args, ComponentArgs), f"{component.__name__}'s args must be a ComponentArgs model"
    assert args.__name__ == f"{component.__name__}Args"
    assert args.model_config.get("frozen") is True and args.model_config.get("extra") == "forbid"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_components_register_outputs_under_the_projects_token(rendered: dict[str, ProgramRun], stack: str) -> None:
    names = {c.__name__ for c in COMPONENTS}
    registered = [r for r in rendered[stack].resources if not r.custom and r.type.startswith("gpu-driver-upgrade:")]
    assert registered
    for resource in registered:
        project, area, name = resource.type.split(":")
        assert area and name in names, f"{resource.type}: gpu-driver-upgrade:<area>:<Component>"
        assert resource.outputs, f"{resource.urn} registers no outputs"


def test_args_are_frozen_and_closed() -> None:
    args = DriverPolicyArgs(mode=ClusterPolicyMode.HELM, chart_version="v26.7.0", namespace="gpu-operator",
                            helm_values={})
    with pytest.raises(ValidationError, match="frozen"):
        args.namespace = "elsewhere"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        DriverPolicyArgs(mode=ClusterPolicyMode.HELM, chart_version="v26.7.0", namespace="gpu-operator",
                         helm_values={}, spec={})  # type: ignore[call-arg]


def test_driver_policy_args_carry_what_their_mode_sends() -> None:
    with pytest.raises(ValidationError, match="helm_values must be set in `helm` mode"):
        DriverPolicyArgs(mode=ClusterPolicyMode.HELM, chart_version="v26.7.0", namespace="gpu-operator")
    with pytest.raises(ValidationError, match="annotations and cluster_policy must be set in `patch` mode"):
        DriverPolicyArgs(mode=ClusterPolicyMode.PATCH, chart_version="v26.7.0", namespace="gpu-operator",
                         annotations={})
    with pytest.raises(ValidationError, match="mode"):
        DriverPolicyArgs(mode=ClusterPolicyMode.EXTERNAL, chart_version="v26.7.0", namespace="gpu-operator")  # type: ignore[arg-type]
