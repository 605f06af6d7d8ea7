"""What a reviewer cares about in each rendered resource, as short text: driver, image, policy, labels."""

from __future__ import annotations

from typing import Any

from spec import attestation, capacity, labels
from spec import resource_facts as rf
from spec.resource_facts import promotion as promotion_facts
from spec.versions import is_branch_only


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


def _skip(node_labels: dict[str, str] | None) -> str:
    node_labels = node_labels or {}
    held = node_labels.get(labels.SKIP_UPGRADE) == "true"
    return f"wave {node_labels.get(labels.WAVE, '?')}, " + ("HELD (skip label)" if held else "released")


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


def _short(value: object) -> str:
    """A ConfigMap value as the table shows it: whole when short, else its size (the validation job's program
    is kilobytes of source; the table is for what a reviewer weighs)."""
    text = str(value)
    if "\n" not in text and len(text) <= 120:
        return text
    return f"({len(text.splitlines())} lines, {len(text.encode())} bytes)"


def review_fields(type_token: str, inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, value) pairs for the plan table; unknown types show nothing beyond their name."""
    if type_token == rf.AKS_POOL:
        settings = inputs.get("upgradeSettings") or {}
        return [
            ("vm", f"{inputs.get('vmSize')} x{inputs.get('count')}"),
            ("gpuProfile.driver", str((inputs.get("gpuProfile") or {}).get("driver"))),
            ("rollout", _skip(inputs.get("nodeLabels"))),
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
            ("rollout", _skip(inputs.get("labels"))),
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
        return [
            ("pdb", f"{meta.get('namespace')}/{meta.get('name')}"),
            ("minAvailable", f"{spec.get('minAvailable')} of {replicas} replicas"),
            ("selector", ", ".join(f"{k}={v}" for k, v in selector.items())),
        ]
    if type_token == rf.KUBERNETES_PROVIDER:
        kubeconfig = inputs.get("kubeconfig")
        source = "kubeconfig [secret]" if kubeconfig == "[secret]" else f"kubeconfig {kubeconfig or '$KUBECONFIG'}"
        return [("cluster", f"{source}, context {inputs.get('context') or '(the kubeconfig current-context)'}")]
    if type_token == rf.CONFIG_MAP:
        meta = inputs.get("metadata") or {}
        data = inputs.get("data") or {}
        record = ("record", f"{meta.get('namespace')}/{meta.get('name')}")
        if rf.is_promotion_record(inputs):
            shown = {k: v for k, v in data.items() if k != promotion_facts.ATTESTATIONS}
            return [record, ("data", ", ".join(f"{k}={v}" for k, v in shown.items())),
                    ("attestations", _attestations(rf.read_promotion(inputs)))]
        return [record, ("data", ", ".join(f"{k}={_short(v)}" for k, v in data.items()))]
    return []
