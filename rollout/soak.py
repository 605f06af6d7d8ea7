"""`gpu-rollout soak`: is a canary ready to attest, and when will it be (:mod:`checks.soak`), as a line or
JSON. The soak schedule asks it before `verify`: 0 whenever it answered, ready or not (``ready`` in JSON);
2 for a stack that is not a canary."""

from __future__ import annotations

import time
from pathlib import Path

from checks import kube as k
from checks import soak
from rollout import documents, schemas
from rollout.console import stdout
from refusals.exits import Exit
from promotion_train.stacks import prod_stacks_of, stack_files
from engine_contracts import attestation
from fleetspec.model import FleetSpec, Stage
from refusals.errors import InvalidInput


def execute(stack: str, spec: FleetSpec, kube: k.Kube, *, project_dir: Path, as_json: bool) -> Exit:
    if spec.stage != Stage.CANARY:
        raise InvalidInput(f"--stack {stack}: a {spec.stage.value} stack; soak answers for a canary stack, which attests")
    prods = {s.name: s.min_soak_hours for s in prod_stacks_of(stack_files(project_dir), stack)
             if s.min_soak_hours is not None}
    facts = soak.read(kube, spec)
    result = soak.readiness(stack, facts, prods, project_dir / attestation.ATTESTATION_DIR, time.time())
    document = schemas.SoakDocument.of(result)
    if as_json:
        documents.write(document)
        return Exit.OK
    when = f"; ready at {document.readyAt}" if document.readyAt and not result.ready else ""
    stdout(highlight=False).print(f"{stack}: {'ready' if result.ready else 'not ready'}: {result.reason}{when}",
                                  markup=False, soft_wrap=True)
    return Exit.OK
