"""`gpu-rollout verify`: runbook section 5 on the stack's upgraded nodes, as a table or JSON; a passing canary
writes its attestation (``attestations/<stack>/<driver>.json`` under the project, spec/attestation.py's format),
signed with the key of ``--signing-key FILE`` or ``GPU_ROLLOUT_SIGNING_KEY``.

Exit 0 only when every check passed (and, on a canary stack, the attestation was written); 1 when one failed
or was inconclusive (each reason on stderr), or the attestation could not be written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.table import Table

from checks import kube as k
from checks import validation
from checks.catalogue import CATALOGUE
from checks.metadata import VALIDATION
from checks.prometheus import Prometheus
from checks.results import CheckResult, Status
from rollout import console as consoles
from rollout.console import say
from rollout.exits import Exit
from rollout.live import note_identity
from spec import attestation
from spec.model import FleetSpec, Stage

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.INCONCLUSIVE: "magenta"}


def git_commit(project_dir: Path) -> str:
    """``git rev-parse HEAD`` of the project; ``unknown`` where it is not a git checkout (or git is missing)."""
    try:
        done = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return attestation.UNKNOWN_COMMIT
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else attestation.UNKNOWN_COMMIT


def render_table(stack: str, results: list[CheckResult], console: Console) -> None:
    table = Table(title=f"{VALIDATION.title} (stack {stack})", title_justify="left")
    for column in ("status", "check", "subject", "finding"):
        table.add_column(column, overflow="fold")
    for result in results:
        table.add_row(f"[{_STYLE[result.status]}]{result.status.value}[/]", result.id, result.subject, result.message)
    console.print(table)
    counts = {s: sum(r.status == s for r in results) for s in Status}
    console.print(f"{counts[Status.PASS]} pass, {counts[Status.FAIL]} fail, {counts[Status.INCONCLUSIVE]} inconclusive")


def signing_key(path: Path | None) -> Ed25519PrivateKey | None:
    """The key a canary's attestation is signed with: ``--signing-key FILE``, else ``GPU_ROLLOUT_SIGNING_KEY``."""
    if path is not None:
        try:
            pem = path.read_bytes()
        except OSError as exc:
            raise attestation.AttestationError(f"--signing-key {path}: cannot read: {exc.strerror}") from None
        return attestation.read_signing_key(pem, f"--signing-key {path}")
    return attestation.signing_key_from_environment()


def execute(stack: str, spec: FleetSpec, kube: k.Kube, *, project_dir: Path, prometheus_url: str | None,
            as_json: bool, smoke: bool = False, key: Ed25519PrivateKey | None = None) -> Exit:
    """Run the checks; a passing canary (not ``smoke``) writes its attestation, signed with ``key``. ``smoke``:
    the check right after a rollout, before any soak: nothing is attested, and an inconclusive check does not
    fail it."""
    prometheus = Prometheus(prometheus_url) if prometheus_url else None
    facts = validation.gather(kube, spec, prometheus)
    note_identity(facts.identity)
    results = CATALOGUE.run(validation.VERB, facts)
    not_passed = [r for r in results if r.status != Status.PASS]
    failing = [r for r in results if r.status == Status.FAIL] if smoke else not_passed
    written: Path | None = None
    problem: str | None = None
    if not not_passed and spec.stage == Stage.CANARY and not smoke:
        try:
            if key is None:
                raise attestation.AttestationError(
                    f"no signing key: set {attestation.SIGNING_KEY_ENV} (the PEM text) or give --signing-key FILE; "
                    "the prod gate admits only signed attestations (`gpu-rollout keygen` makes a key pair)")
            sealed = validation.attest(facts, results, stack=stack, git_commit=git_commit(project_dir),
                                       signing_key=key)
            written = attestation.write(project_dir / attestation.ATTESTATION_DIR, sealed)
        except attestation.AttestationError as exc:
            problem = f"attestation not written: {exc}"
    if as_json:
        document: dict[str, Any] = {"stack": stack, "passed": not failing, "smoke": smoke,
                                    "checks": [r.as_json() for r in results],
                                    "attestation": str(written) if written else None}
        if problem:
            document["attestationError"] = problem
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        render_table(stack, results, consoles.stdout())
    for result in not_passed:
        say(f"{result.status.value}: {result.id} {result.subject}: {result.message}")
    if problem:
        say(problem)
    elif written:
        say(f"attestation written: {written}")
    elif smoke:
        say("smoke check: nothing attested; the soak schedule's verify judges the whole soak"
            + (f" (inconclusive now: {len(not_passed) - len(failing)})" if len(not_passed) > len(failing) else ""))
    elif not not_passed:
        say(f"note: stack {stack} is a {spec.stage.value} stack; only a canary stack's verify writes an attestation")
    return Exit.failed_if(bool(failing) or problem is not None)
