"""What a reviewer cares about in each rendered resource, as short text: driver, image, policy, labels.

Large payloads (the validation program a ConfigMap ships, any data value over a few lines) show as their key,
size and sha256, not their text: a plan is read in a minute, and the text is in ``plan --json`` and behind
``plan --show-data``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine_contracts import attestation
from gpu_knowledge import capacity, labels
from engine_contracts import resource_facts as rf
from engine_contracts.resource_facts import promotion as promotion_facts
from gpu_knowledge.versions import is_branch_only


def _attestations(gate: rf.PromotionFacts) -> str:
    """The attestations a promotion record carries, one line each (the record holds their whole text, kilobytes
    of evidence; the pack judges it, seal included): driver, stack, GPU architectures, soak and digest, as the
    file states them."""
    lines = []
    for driver, text in sorted(gate.attestations.items()):
        try:
            stated = attestation.parse_unverified(text, driver)
        except attestation.AttestationError:
            lines.append(f"{driver}: not an attestation (the pack refuses it)")
            continue
        document = stated.document()
        lines.append(f"{driver}: stack {stated.stack}, {', '.join(sorted(stated.architectures))}, soak "
                     f"{document['soakStart']} to {document['soakEnd']}, {stated.digest[:19]}...")
    return "\n".join(lines) or "-"


def _upgrade_policy(policy: dict[str, Any] | None) -> str:
    """An upgradePolicy in the CRD's spelling (chart values go through ``rf.crd_upgrade_policy`` first)."""
    if not policy:
        return "-"
    deletion = policy.get("podDeletion") or {}
    drain = policy.get("drain") or {}
    wait = policy.get("waitForCompletion") or {}
    parts = [
        f"autoUpgrade={policy.get('autoUpgrade')}",
        f"maxParallelUpgrades={policy.get('maxParallelUpgrades')}",
        f"maxUnavailable={policy.get('maxUnavailable')}",
        f"podDeletion(force={deletion.get('force')}, timeout={deletion.get('timeoutSeconds')}s)",
        f"drain(enable={drain.get('enable')}, force={drain.get('force')}, timeout={drain.get('timeoutSeconds')}s)",
    ]
    if wait.get("podSelector"):
        parts.append(f"waitForCompletion({wait['podSelector']}, timeout={wait.get('timeoutSeconds')}s)")
    return ", ".join(parts)


def _driver(image: object, version: object, precompiled: object) -> str:
    text = f"{image}:{version}" if image else f"version={version}"
    if precompiled and isinstance(version, str) and is_branch_only(version):
        # Precompiled images are tagged <branch>-<kernel>-<os>: the node's kernel picks the exact release.
        return f"{text} (branch {version}, precompiled: release chosen per kernel)"
    return text


# A data value longer than this is a payload: shown by size and digest unless asked for (--show-data).
PAYLOAD_LINES = 3
PAYLOAD_CHARS = 200
DIGEST_SHOWN = 16  # hex digits of the sha256, as a short commit id is shown


def is_payload(value: str) -> bool:
    return value.count("\n") >= PAYLOAD_LINES or len(value) > PAYLOAD_CHARS


def payload_summary(value: str, digits: int = DIGEST_SHOWN) -> str:
    """A payload in one line: its size in bytes and its sha256 (its start, by default; ``digits=64``: whole)."""
    data = value.encode()
    return f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:digits]}"


def _rollout(type_token: str, inputs: dict[str, Any], node_labels: dict[str, str] | None) -> str:
    """The pool's wave and whether it is held, and by what: the skip label holds an operator-owned pool's driver;
    a pool whose node image carries the driver is held by keeping that image (no new generation), and the
    label holds nothing there."""
    node_labels = node_labels or {}
    held = node_labels.get(labels.SKIP_UPGRADE) == "true"
    if not held:
        state = "released"
    elif rf.image_owns_driver(type_token, inputs):
        state = "HELD (keeps its node image and driver)"
    else:
        state = "HELD (skip label)"
    return f"wave {node_labels.get(labels.WAVE, '?')}, {state}"


# Surge is capacity the cloud must grant when the upgrade runs (the runbook: "check quota before you rely on
# surge"); the capacity policies count it as spare, so the plan says on what it depends.
_QUOTA = "depends on GPU quota and capacity in the region at upgrade time: check the quota"


def _aks_surge(inputs: dict[str, Any]) -> str:
    surge = str((inputs.get("upgradeSettings") or {}).get("maxSurge") or "0")
    if surge in ("0", "0%"):
        return "none"
    return f"{surge} extra {inputs.get('vmSize')} node(s) during a node-image upgrade; {_QUOTA}"


def _eks_surge(inputs: dict[str, Any]) -> str:
    update = inputs.get("updateConfig") or {}
    try:
        surges = capacity.node_group_surges(update.get("updateStrategy") or None, inputs.get("capacityType"))
    except ValueError as error:
        return f"unknown ({error})"
    if not surges:
        return "none: old nodes leave first (updateStrategy MINIMAL or a Capacity Block)"
    kinds = ",".join(inputs.get("instanceTypes") or ["the launch template's type"])
    return f"new {kinds} nodes launch before old ones leave (and a new generation beside the old); {_QUOTA}"


def _provider(inputs: dict[str, Any]) -> str:
    """Which cluster the program's objects go to: a kubeconfig the program builds from the stack's cluster (AKS
    user credentials, the EKS endpoint; a secret) and its one context, or an existing cluster's declared file
    and context. Never the shell's current context."""
    kubeconfig, context = inputs.get("kubeconfig"), inputs.get("context")
    if kubeconfig == "[secret]":
        source = "the stack's own cluster credentials (a kubeconfig the program builds, [secret])"
    else:
        source = f"kubeconfig {kubeconfig or '$KUBECONFIG, else ~/.kube/config'}"
    if context:
        return f"{source}, context {context}"
    return f"{source}, its only context" if kubeconfig == "[secret]" else f"{source}, its current-context"


def payloads(type_token: str, inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, text) of each payload in a ConfigMap's data, by key: what `plan --show-data` prints whole, after
    the table (a cell would fold it at the column width)."""
    data = inputs.get("data") if type_token == rf.CONFIG_MAP else None
    if not isinstance(data, dict):
        return []
    return [(k, str(v)) for k, v in sorted(data.items()) if is_payload(str(v))]


def _data(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A ConfigMap's data: short values as key=value on one line, each payload on a line of its own."""
    short = {k: v for k, v in data.items() if not is_payload(str(v))}
    fields = [("data", ", ".join(f"{k}={v}" for k, v in short.items()))] if short or not data else []
    return fields + [(k, payload_summary(str(v))) for k, v in sorted(data.items()) if k not in short]


def review_fields(type_token: str, inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, value) pairs for the plan table; unknown types show nothing beyond their name. A ConfigMap's
    payloads show as their size and digest (:func:`payloads` gives their text)."""
    if type_token == rf.AKS_POOL:
        settings = inputs.get("upgradeSettings") or {}
        return [
            ("vm", f"{inputs.get('vmSize')} x{inputs.get('count')}"),
            ("gpuProfile.driver", str((inputs.get("gpuProfile") or {}).get("driver"))),
            ("rollout", _rollout(type_token, inputs, inputs.get("nodeLabels"))),
            (
                "upgradeSettings",
                f"maxSurge={settings.get('maxSurge')}, drain={settings.get('drainTimeoutInMinutes')}m, "
                f"soak={settings.get('nodeSoakDurationInMinutes')}m",
            ),
            ("surge", _aks_surge(inputs)),
        ]
    if type_token == rf.EKS_NODE_GROUP:
        update = inputs.get("updateConfig") or {}
        scaling = inputs.get("scalingConfig") or {}
        return [
            ("instances", f"{','.join(inputs.get('instanceTypes') or ['(launch template)'])} x{scaling.get('desiredSize')}"),
            ("ami", f"{inputs.get('amiType')} releaseVersion={inputs.get('releaseVersion')}"),
            ("rollout", _rollout(type_token, inputs, inputs.get("labels"))),
            ("updateConfig", f"maxUnavailable={update.get('maxUnavailable')}, strategy={update.get('updateStrategy')}"),
            ("surge", _eks_surge(inputs)),
        ]
    if type_token == rf.NVIDIA_DRIVER:
        spec = inputs.get("spec") or {}
        return [
            ("driver", _driver(spec.get("image"), spec.get("version"), spec.get("usePrecompiled"))),
            ("nodeSelector", ", ".join(f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items())),
            ("upgradePolicy", _upgrade_policy(spec.get("upgradePolicy"))),
        ]
    if type_token == rf.CLUSTER_POLICY_PATCH:
        spec = inputs.get("spec") or {}
        driver = spec.get("driver") or {}
        return [
            ("driver", f"enabled={driver.get('enabled')} " + _driver(None, driver.get("version", "-"), driver.get("usePrecompiled"))),
            ("useNvidiaDriverCRD", str(driver.get("useNvidiaDriverCRD", "-"))),
            ("upgradePolicy", _upgrade_policy(driver.get("upgradePolicy"))),
            ("toolkit/devicePlugin", f"{(spec.get('toolkit') or {}).get('enabled')}/{(spec.get('devicePlugin') or {}).get('enabled')}"),
        ]
    if type_token == rf.HELM_RELEASE:
        values = inputs.get("values") or {}
        driver = values.get("driver") or {}
        return [
            ("chart", f"{inputs.get('chart')} {inputs.get('version')} in {inputs.get('namespace')}"),
            ("driver", f"enabled={driver.get('enabled')} " + _driver(None, driver.get("version", "-"), driver.get("usePrecompiled"))),
            ("upgradePolicy", _upgrade_policy(rf.crd_upgrade_policy(driver.get("upgradePolicy")))),
            ("toolkit/devicePlugin", f"{(values.get('toolkit') or {}).get('enabled')}/{(values.get('devicePlugin') or {}).get('enabled')}"),
        ]
    if type_token == rf.PDB:
        meta = inputs.get("metadata") or {}
        spec = inputs.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        replicas = (meta.get("annotations") or {}).get(labels.ANNOTATION_REPLICAS, "?")
        budget = (("maxUnavailable", str(spec["maxUnavailable"])) if "maxUnavailable" in spec
                  else ("minAvailable", f"{spec.get('minAvailable')} of {replicas} replicas"))
        return [
            ("pdb", f"{meta.get('namespace')}/{meta.get('name')}"),
            budget,
            ("selector", ", ".join(f"{k}={v}" for k, v in selector.items())),
        ]
    images = rf.read_guard_images(type_token, inputs)
    if images is not None:  # the in-cluster guard: what it runs, and how many
        return [("image", ", ".join(images)), ("replicas", str((inputs.get("spec") or {}).get("replicas")))]
    if type_token == rf.KUBERNETES_PROVIDER:
        return [("cluster", _provider(inputs))]
    if type_token == rf.CONFIG_MAP:
        meta = inputs.get("metadata") or {}
        data = inputs.get("data") or {}
        is_record = labels.RECORD in (meta.get("labels") or {})
        record = ("record" if is_record else "configmap", f"{meta.get('namespace')}/{meta.get('name')}")
        if rf.is_promotion_record(inputs):
            shown = {k: v for k, v in data.items() if k != promotion_facts.ATTESTATIONS}
            return [record, ("data", ", ".join(f"{k}={v}" for k, v in shown.items())),
                    ("attestations", _attestations(rf.read_promotion(inputs)))]
        return [record, *_data(data)]
    return []
