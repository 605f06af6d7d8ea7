"""`gpu-rollout release-node NODE`: put a node held by a failed validation back into service.

The validation job cordons a node whose validation failed and records why (checks/hold.py); this verb,
run by a person who looked at the node, removes that record and uncordons it in one patch. It refuses (exit
1, nothing written) a node that is not the stack's or not held, and one whose latest result failed on the
driver it still runs unless ``--accept-failed``.
"""

from __future__ import annotations


from checks import kube as k
from checks.hold import ReleaseRefused, release_node
from rollout import documents, schemas
from rollout import console as consoles
from refusals.exits import Exit
from rollout.live import note_identity
from fleetspec.model import FleetSpec


def execute(stack: str, spec: FleetSpec, kube: k.Kube, node: str, *, accept_failed: bool, keep_cordoned: bool,
            as_json: bool) -> Exit:
    try:
        release = release_node(kube, spec, node, accept_failed=accept_failed, keep_cordoned=keep_cordoned,
                               on_identity=note_identity)
    except ReleaseRefused as refused:
        if as_json:
            documents.write(schemas.ReleaseDocument(stack=stack, node=node, released=False, error=str(refused)))
        consoles.say(str(refused))
        return Exit.FAILED
    if as_json:
        documents.write(schemas.ReleasedDocument.of(stack, release))
        return Exit.OK
    held = f" (held because {release.hold.describe()})" if release.hold is not None else ""
    what = "uncordoned" if release.uncordoned else release.note
    consoles.stdout(highlight=False).print(f"released node {node}{held}: hold record removed, {what}", markup=False,
                                           soft_wrap=True)
    return Exit.OK
