"""The real `pulumi` CLI, isolated: its own PULUMI_HOME, a file backend, a passphrase, no update checks,
no plugin downloads. The Kubernetes provider is the one e2e/build.sh built (found on PATH, next to
`pulumi`); the policy pack is the project's own, started as the Python language host starts it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.product_source import PACKAGES

from tests.e2e.controlplane import BIN_DIR

CHECKOUT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(sys.executable)
PULUMI = BIN_DIR / "pulumi"
PROVIDER = BIN_DIR / "pulumi-resource-kubernetes"
PULUMI_TOOLS = (PULUMI, PROVIDER)
PROJECT = "gpu-driver-upgrade"
PASSPHRASE = "e2e-passphrase"  # noqa: S105 - encrypts the secrets of a throwaway file backend
STACK_FILES = ("Pulumi.existing-canary.yaml", "Pulumi.existing-prod.yaml")
# The program's own files: linked, so the engine runs the checkout's code.
# The program and the pack as the engine runs them from the project folder: the entry point and every package.
PROJECT_LINKS = ("__main__.py", *PACKAGES)


def missing_tools() -> list[str]:
    return [p.name for p in PULUMI_TOOLS if not os.access(p, os.X_OK)]


@dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (f"pulumi {' '.join(self.args)} exited {self.returncode} after {self.seconds:.0f}s\n"
                f"--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-4000:]}")


def make_project(directory: Path) -> Path:
    """A Pulumi project folder: the shipped Pulumi.yaml and stack files, the program linked."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy2(CHECKOUT / "Pulumi.yaml", directory / "Pulumi.yaml")
    for name in STACK_FILES:
        shutil.copy2(CHECKOUT / name, directory / name)
    for name in PROJECT_LINKS:
        (directory / name).symlink_to(CHECKOUT / name)
    return directory


def make_policy_launcher(directory: Path) -> Path:
    """The project's policy pack as a plugin the engine can start without the Python language host.

    For a pack folder the engine asks the `python` language host to run it; the host runs
    ``python -u -m pulumi.policy ENGINE_ADDRESS PACK_DIR`` in the pack folder with the pack's virtualenv
    (PulumiPolicy.yaml: ``virtualenv: ../.venv``). With no host to ask, the engine's other way in is an
    executable given as --policy-pack, started with the engine address as its argument: this script runs
    that same command. The pack's PulumiPolicy.yaml sits beside it, as the engine allows.
    """
    directory.mkdir(parents=True, exist_ok=True)
    pack = CHECKOUT / "policy"
    launcher = directory / "gpu-driver-upgrade-policy"
    launcher.write_text(
        "#!/bin/sh\n"
        "# Started by the engine as an analyzer plugin: $1 is the engine's address.\n"
        f'cd "{pack}" || exit 1\n'
        f'exec "{VENV_PYTHON}" -u -m pulumi.policy "$1" "{pack}"\n'
    )
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    shutil.copy2(pack / "PulumiPolicy.yaml", directory / "PulumiPolicy.yaml")
    return launcher


class Pulumi:
    """Runs `pulumi` in one project folder with an isolated home and file backend."""

    def __init__(self, project: Path, workdir: Path, ambient_kubeconfig: Path) -> None:
        self.project = project
        home, state = workdir / "pulumi-home", workdir / "state"
        home.mkdir(parents=True, exist_ok=True)
        state.mkdir(parents=True, exist_ok=True)
        self.env = {
            key: value for key, value in os.environ.items()
            if not key.startswith(("PULUMI_", "KUBE", "GPU_ROLLOUT_"))
        }
        self.env.update({
            "PATH": os.pathsep.join([str(BIN_DIR), str(VENV_PYTHON.parent), os.environ.get("PATH", "")]),
            "PULUMI_HOME": str(home),
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            "NO_COLOR": "1",
            # The ambient kubeconfig points at a cluster that does not exist: Kubernetes objects must reach
            # the test cluster only through the stack's declared kubeconfig and context.
            "KUBECONFIG": str(ambient_kubeconfig),
        })

    def run(self, *args: str, program: bool = False, check: bool = True, timeout: float = 600) -> Result:
        """``pulumi ARGS``; with ``program`` the project's program is served (preview, up, destroy)."""
        command = [str(PULUMI), *args]
        if program:
            command = [str(VENV_PYTHON), str(CHECKOUT / "tests" / "e2e" / "program_host.py"), *command]
        started = time.monotonic()
        proc = subprocess.run(  # noqa: S603
            command, cwd=self.project, env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )
        result = Result(list(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
        if check and proc.returncode != 0:
            raise AssertionError(result.describe())
        return result

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args).stdout)


# ---------------------------------------------------------------------------- helpers for the engine verbs


@dataclass(frozen=True)
class Snapshot:
    """What a refused command must leave as it was: the stack's state and its stack file."""

    state: str  # `pulumi stack export` (secrets stay encrypted)
    stack_file: str


def snapshot(pulumi: Pulumi, stack: str) -> Snapshot:
    return Snapshot(pulumi.run("stack", "export", "--stack", stack).stdout,
                    (pulumi.project / f"Pulumi.{stack}.yaml").read_text())


def gpu_rollout(pulumi: Pulumi, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
                cwd: Path = CHECKOUT) -> Result:
    """``gpu-rollout ARGS --project-dir PROJECT`` with the CLI's isolated environment (its `pulumi`, home,
    file backend and passphrase), as a user runs it beside `pulumi`, from ``cwd`` (the checkout unless
    given); ``env`` overrides variables."""
    started = time.monotonic()
    proc = subprocess.run(  # noqa: S603
        [str(VENV_PYTHON), "-m", "rollout", *args, "--project-dir", str(pulumi.project)],
        cwd=cwd, env={**pulumi.env, **(env or {})}, capture_output=True, text=True, timeout=timeout,
        check=False,
    )
    return Result(["gpu-rollout", *args], proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
