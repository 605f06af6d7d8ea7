"""The published pack (policy/bundle.py, `make policy-pack`) stands on its own.

`pulumi policy publish` uploads the pack's folder only; where the pack is enforced, the CLI unpacks it
and installs its requirements.txt into a fresh virtualenv. These tests build the folder, then run it the
way the CLI does (``python -u -m pulumi.policy ENGINE PACK_DIR``) under ``python -S`` with nothing on the
path but the folder and the distributions its requirements install (no checkout, no editable install),
and talk to it over gRPC as the engine would: the same findings as `gpu-rollout plan`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from typer.testing import CliRunner

from policy import bundle
from policy.evaluate import enforcement, load_config, settings_entry
from policy.findings import Level
from policy.registry import POLICY_IDS, REGISTRY
from rollout.cli import app
from tests.conftest import PROJECT_DIR, as_planned, stack_config
from tests.policy.test_examples_and_variants import write_stack
from tests.policy.variants import VARIANTS


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    return bundle.build(tmp_path_factory.mktemp("published") / "gpu-driver-upgrade")


def _requirements(pack: Path) -> list[str]:
    lines = [line.strip() for line in (pack / "requirements.txt").read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "-"))]


@pytest.fixture(scope="module")
def site(pack_dir, tmp_path_factory) -> Path:
    """A site-packages holding only what the pack's requirements install (links into this venv's)."""
    target = tmp_path_factory.mktemp("site")
    site_packages = Path(str(importlib.metadata.distribution("pulumi_policy").locate_file("")))
    names = bundle.dependency_closure([line.split("==")[0] for line in _requirements(pack_dir)])
    for name in names:
        try:
            files = importlib.metadata.distribution(name).files
        except importlib.metadata.PackageNotFoundError:
            continue  # a marker leaves it out of this environment
        assert files is not None, name
        # .pth files only act through the site module, which `python -S` does not run.
        for top in {f.parts[0] for f in files if f.parts[0] != ".." and f.suffix != ".pth"}:
            if not (target / top).exists():
                (target / top).symlink_to(site_packages / top)
    assert not any(p.name.startswith("__editable__") for p in target.iterdir())  # not the checkout's install
    return target


def _isolated_env(pack: Path, site: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": f"{pack}{os.pathsep}{site}",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}


# ---------------------------------------------------------------- what the folder holds


def test_the_folder_holds_the_pack_and_its_own_packages_copied(pack_dir):
    files = {p.relative_to(pack_dir).as_posix() for p in pack_dir.rglob("*") if p.is_file()}
    assert {"__main__.py", "PulumiPolicy.yaml", "requirements.txt", "constraints.txt", ".gitignore"} <= files
    modules = {f for f in files if f.endswith(".py") and f != "__main__.py"}
    assert {f.split("/")[0] for f in modules} == {"policy", "fleetspec", "vocabulary", "gpu_knowledge", "engine_contracts"}  # nothing of
    # the program's renderers, the CLI or the checks
    assert {"policy/pack.py", "policy/registry.py", "policy/metadata.py", "policy/facts.py", "fleetspec/__init__.py",
            "gpu_knowledge/labels.py", "engine_contracts/resource_facts/__init__.py", "engine_contracts/resource_facts/pools.py",
            "vocabulary/declarations.py", "vocabulary/policy_ids.py"} <= modules
    assert "policy/bundle.py" not in modules and "policy/evaluate.py" not in modules  # not imported by the pack
    assert not any(p.is_symlink() for p in pack_dir.rglob("*"))
    for module in modules:  # byte-for-byte copies: the checkout stays the one source of truth
        assert (pack_dir / module).read_bytes() == (PROJECT_DIR / module).read_bytes(), module
    assert (pack_dir / "__main__.py").read_bytes() == (PROJECT_DIR / "policy" / "__main__.py").read_bytes()


def test_pulumi_policy_yaml_names_a_virtualenv_of_its_own(pack_dir):
    published = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text())
    source = yaml.safe_load((PROJECT_DIR / "policy" / "PulumiPolicy.yaml").read_text())
    assert published["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": "venv"}}
    assert published["version"] == source["version"] and published["description"] == source["description"]
    # pulumi policy publish archives the folder but honours its .gitignore: the virtualenv stays out.
    assert "venv/" in (pack_dir / ".gitignore").read_text().splitlines()


def test_requirements_pin_what_the_pack_imports_as_constraints_txt_does(pack_dir):
    pins = dict(line.split("==") for line in (PROJECT_DIR / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pins = {bundle._name(k): v for k, v in pins.items()}
    required = dict(line.split("==") for line in _requirements(pack_dir))
    assert set(required) >= {"pulumi-policy", "pydantic"}
    assert all(pins[name] == version for name, version in required.items())
    assert "-c constraints.txt" in (pack_dir / "requirements.txt").read_text().splitlines()
    constrained = dict(line.split("==") for line in (pack_dir / "constraints.txt").read_text().splitlines()
                       if "==" in line)
    assert {"pulumi", "protobuf", "grpcio"} <= set(constrained)
    assert all(pins[name] == version for name, version in constrained.items())


def test_building_again_replaces_the_folder(pack_dir, tmp_path):
    out = bundle.build(tmp_path / "pack")
    (out / "policy" / "stale.py").write_text("raise SystemExit('left over')\n")
    bundle.build(out)
    assert not (out / "policy" / "stale.py").exists()


def test_make_target_runs_the_builder():
    dry = subprocess.run(["make", "-n", "policy-pack", "POLICY_PACK_DIR=/nowhere/pack"], cwd=PROJECT_DIR,
                         capture_output=True, text=True, check=True)
    assert "-m policy.bundle /nowhere/pack" in dry.stdout


# ---------------------------------------------------------------- it runs with nothing from the checkout


def test_the_pack_imports_from_its_folder_only(pack_dir, site, tmp_path):
    probe = (
        "import json, sys\n"
        "import policy.pack, fleetspec, vocabulary, gpu_knowledge, engine_contracts\n"
        "try:\n"
        "    import preview\n"
        "except ModuleNotFoundError:\n"
        "    preview = None\n"
        "files = sorted({m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)})\n"
        "print(json.dumps({'preview': preview is not None, 'path': sys.path, 'files': files}))\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, env=_isolated_env(pack_dir, site),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["preview"] is False  # the checkout's other packages are out of reach
    checkout = str(PROJECT_DIR.resolve())
    assert not any(str(Path(p).resolve()).startswith(checkout) for p in report["path"] if p)
    stdlib = (os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix))
    outside = [f for f in report["files"] if not f.startswith((str(pack_dir), str(site)))
               and not os.path.realpath(f).startswith(stdlib)]
    assert outside == []


class Analyzer:
    """The published pack, started as the Pulumi CLI starts a Python policy pack, spoken to over gRPC."""

    def __init__(self, pack: Path, site: Path, cwd: Path) -> None:
        command = [sys.executable, "-S", "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(pack)]
        self.process = subprocess.Popen(command, cwd=cwd, env=_isolated_env(pack, site), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        port: list[str] = []
        reader = threading.Thread(target=lambda: port.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=120)
        if not port or not port[0].strip().isdigit():
            self.process.kill()
            raise AssertionError(f"the pack did not start: {self.process.stderr.read()}")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port[0].strip()}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.process.kill()
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture(scope="module")
def analyzer(pack_dir, site, tmp_path_factory):
    running = Analyzer(pack_dir, site, tmp_path_factory.mktemp("cwd"))
    yield running
    running.close()


def test_the_published_pack_describes_every_policy(analyzer):
    info = analyzer.stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
    assert info.name == "gpu-driver-upgrade"
    assert [p.name for p in info.policies] == [*POLICY_IDS, "policy-advice"]


def _struct(props: dict) -> struct_pb2.Struct:
    return json_format.ParseDict(json.loads(json.dumps(props)), struct_pb2.Struct())


def _engine_findings(analyzer: Analyzer, run, stage: str) -> list[tuple[str, str, str]]:
    """What the engine would report: the stage's enforcement configured, every resource analysed (its
    inputs), then the stack (here with the same properties, which is what plan reads)."""
    config = load_config(stage)
    levels = {p.id: enforcement(p, config).value for p in REGISTRY.values()}
    levels["policy-advice"] = "advisory"
    analyzer.stub.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={
        name: analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.EnforcementLevel.Value(level.upper()),
                                        properties=_struct(settings_entry(name, config)))
        for name, level in levels.items()
    }), timeout=60)
    custom = [r for r in run.resources if r.custom]
    diagnostics = []
    for res in custom:
        request = analyzer_pb2.AnalyzeRequest(type=res.type, properties=_struct(res.inputs), urn=res.urn,
                                              name=res.name)
        diagnostics += analyzer.stub.Analyze(request, timeout=60).diagnostics
    stack = analyzer_pb2.AnalyzeStackRequest(resources=[
        analyzer_pb2.AnalyzerResource(type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name)
        for r in custom
    ])
    diagnostics += analyzer.stub.AnalyzeStack(stack, timeout=60).diagnostics
    found = []
    for d in diagnostics:
        message = d.message.removeprefix(d.description + "\n")
        level = analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel).lower()
        if d.policyName == "policy-advice":
            policy, _, message = message.removeprefix("[").partition("] ")
            found.append((policy, Level.ADVISORY.value, message))
        else:
            found.append((d.policyName, level, message))
    return sorted(found)


CASES = {
    "prod": lambda: ("prod", stack_config("prod")),
    "eks-canary": lambda: ("eks-canary", stack_config("eks-canary")),
    **{f"variant-{policy}": (lambda policy=policy: (VARIANTS[policy][0], VARIANTS[policy][1]()))
       for policy in ("parallelism-within-spare-capacity", "eviction-respects-pdb", "cuda-driver-compatible")},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_published_pack_finds_what_plan_finds(analyzer, tmp_path, case):
    stack, config = CASES[case]()
    planned = CliRunner().invoke(app, ["plan", "--stack-file", str(write_stack(tmp_path, stack, config)), "--json"])
    document = json.loads(planned.stdout)
    expected = sorted((v["policy"], v["enforcement"], v["message"]) for v in document["violations"])
    run = as_planned(stack, config)  # with the canary's outputs, as plan reads them from the stack file beside
    assert _engine_findings(analyzer, run, document.get("stage") or run.outputs["stage"]) == expected
    if case.startswith("variant-"):
        assert any(level == "mandatory" for _, level, _ in expected)  # the comparison has teeth
