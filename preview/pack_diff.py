"""What a change does to the policy pack itself, for `gpu-rollout diff`: every change under ``policy/`` is a
risk for the reviewer, because the pack is the gate (the prod ``up`` enforces the protected base's pack, so a
change to it judges only the changes after it; CODEOWNERS guards the folder).

A stage's pack config (``policy/<stage>.json``) is compared entry by entry: each policy whose level moves
(its own entry, ``all``, or the default) is named with the level it moves from and to, as the engine
resolves it (:mod:`policy.evaluate`); each entry whose settings object changes (a policy's config beside its
``enforcementLevel``, such as the keys the prod gate trusts) is named with the settings that change; an entry
that changes without either (``all`` shadowed by every policy's own entry) is named too. Any other file of
the pack (its rules, its metadata) is named as a change of the pack's code. Pure: the files are handed in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy.evaluate import advice_enforcement, enforcement
from policy.registry import ADVICE_POLICY_ID, REGISTRY
from vocabulary.policy_ids import PolicyId

PACK_DIR = "policy/"
LEVEL_KEY = "enforcementLevel"
GATE_POLICY, TRUSTED_KEYS = str(PolicyId.CANARY_ATTESTED), "trustedKeys"  # the keys whose attestations open prod


@dataclass(frozen=True)
class PackChange:
    kind: str  # level | trusted-key | settings | entry | config | code
    file: str  # the path in the project, e.g. policy/prod.json
    text: str
    policy: str | None = None
    base: str | None = None
    head: str | None = None


def _config(raw: bytes | None) -> tuple[dict[str, Any], str | None]:
    """A pack config file's entries ({} where the side has no file), or why it does not read."""
    if raw is None:
        return {}, None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        return {}, f"does not read as JSON ({error})"
    return (value, None) if isinstance(value, dict) else ({}, "is not a JSON object")


def _level(config: Mapping[str, Any], policy: str) -> str:
    """A policy's level as the engine resolves it from a config; an unreadable level reads as written."""
    try:
        if policy == ADVICE_POLICY_ID:
            return advice_enforcement(config).value
        return enforcement(REGISTRY[policy], config).value
    except ValueError:
        entry = config.get(policy, config.get("all"))
        return str(entry.get(LEVEL_KEY) if isinstance(entry, Mapping) else entry)


def _settings(entry: Any) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != LEVEL_KEY} if isinstance(entry, Mapping) else {}


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _trusted_entries(entry: Any) -> dict[str, Mapping[str, Any]]:
    """The prod gate's trusted-key entries, by id, as written (not judged: the pack does)."""
    listed = entry.get(TRUSTED_KEYS) if isinstance(entry, Mapping) else None
    if not isinstance(listed, list):
        return {}
    return {str(k.get("id")): k for k in listed if isinstance(k, Mapping)}


def trusted_key_changes(file: str, stage: str, base: Any, head: Any) -> list[PackChange]:
    """Each key the prod gate starts or stops trusting between two versions of its entry: a key added opens prod
    to every attestation it signs, so the PR that adds an attestation must not slip one in unseen; a key removed
    revokes it."""
    old, new = _trusted_entries(base), _trusted_entries(head)

    def said(entry: Mapping[str, Any]) -> str:
        comment = entry.get("comment")
        return f" ({comment})" if isinstance(comment, str) and comment else ""

    out = [PackChange("trusted-key", file, f"{stage}: {GATE_POLICY} now trusts key {key_id}{said(new[key_id])}: "
                      f"every attestation it signs can open prod ({file})", GATE_POLICY, None, key_id)
           for key_id in sorted(set(new) - set(old))]
    out += [PackChange("trusted-key", file, f"{stage}: {GATE_POLICY} no longer trusts key {key_id}"
                       f"{said(old[key_id])}: attestations it signed stop admitting drivers ({file})", GATE_POLICY,
                       key_id, None)
            for key_id in sorted(set(old) - set(new))]
    out += [PackChange("trusted-key", file, f"{stage}: {GATE_POLICY} key {key_id} now names another public key "
                       f"({file})", GATE_POLICY, key_id, key_id)
            for key_id in sorted(set(old) & set(new)) if old[key_id].get("publicKey") != new[key_id].get("publicKey")]
    return out


def config_changes(file: str, base: bytes | None, head: bytes | None) -> list[PackChange]:
    """The changes of one stage's pack config (``policy/<stage>.json``), policy by policy."""
    stage = file.removeprefix(PACK_DIR).removesuffix(".json")
    old, old_error = _config(base)
    new, new_error = _config(head)
    if old_error or new_error:
        side, error = ("head", new_error) if new_error else ("base", old_error)
        return [PackChange("config", file, f"{file} {error} at {side}: the engine refuses the stage {stage}'s pack "
                           "config")]
    out: list[PackChange] = []
    for policy in [*REGISTRY, ADVICE_POLICY_ID]:
        before, after = _level(old, policy), _level(new, policy)
        if before != after:
            out.append(PackChange("level", file, f"{stage}: policy {policy} moves from {before} to {after} "
                                  f"({file})", policy, before, after))
    for key in dict.fromkeys([*old, *new]):
        if _shown(old.get(key)) == _shown(new.get(key)):
            continue
        before_settings, after_settings = _settings(old.get(key)), _settings(new.get(key))
        trusted = trusted_key_changes(file, stage, before_settings, after_settings) if key == GATE_POLICY else []
        if trusted:  # named key by key; any other change of the entry still shows as settings
            out += trusted
            before_settings = {k: v for k, v in before_settings.items() if k != TRUSTED_KEYS}
            after_settings = {k: v for k, v in after_settings.items() if k != TRUSTED_KEYS}
        if before_settings != after_settings:
            keys = sorted(k for k in {*before_settings, *after_settings}
                          if _shown(before_settings.get(k)) != _shown(after_settings.get(k)))
            out.append(PackChange("settings", file, f"{stage}: the settings of policy {key} change "
                                  f"({', '.join(keys)}) ({file})", key, _shown(before_settings), _shown(after_settings)))
        elif not any(c.policy == key for c in out):
            out.append(PackChange("entry", file, f"{stage}: the entry {key} changes from "
                                  f"{_shown(old.get(key)) if key in old else '(none)'} to "
                                  f"{_shown(new.get(key)) if key in new else '(none)'} ({file})", key,
                                  _shown(old.get(key)) if key in old else None,
                                  _shown(new.get(key)) if key in new else None))
    return out


def pack_changes(base: Mapping[str, bytes], head: Mapping[str, bytes]) -> list[PackChange]:
    """Every change under ``policy/`` between two sides (files by their path in the project)."""
    out: list[PackChange] = []
    for file in sorted({*base, *head}):
        old, new = base.get(file), head.get(file)
        if old == new:
            continue
        name = file.removeprefix(PACK_DIR)
        if "/" not in name and name.endswith(".json"):
            out += config_changes(file, old, new)
            continue
        how = "added" if old is None else "removed" if new is None else "changed"
        out.append(PackChange("code", file, f"the pack's {file} is {how}: its rules judge every stack from the "
                              "merge on; CODEOWNERS of policy/ review it"))
    return out
