"""What `gpu-rollout rollback` decides from a stack's update history: pure functions, no Pulumi import.

The input is the history as `pulumi stack history --json` prints it (and as the Automation API's
``Stack.history()`` parses it): newest first, each update with ``version``, ``kind``, ``result``
(``in-progress|succeeded|failed``), ``endTime`` (absent while in progress) and ``config``, the full config
the update ran with: ``{key: {"value": text, "secret": bool}}``, a structured value as its JSON text. The
current config has the same shape (`pulumi config --json`). From these it finds the update to go back to,
the config changes that restore it (as `pulumi config set --path` would make them) and, for image-owned
pools, the generation moves in their order; or it refuses, saying why, before anything is changed.

Refusals (:class:`RollbackRefused`) carry the exit code (docs/rollback.md): 1 (``FAILED``) when the
stack's state makes a rollback unsafe or pointless (no history, no earlier good update, an update in
progress, a target the canary never ran); 2 (``INVALID``) when the input is wrong (``--to-version`` names
no good update, secrets that cannot be decrypted with the passphrase or key given).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rollout.exits import Exit
from spec.base import PROJECT
from spec.load import SpecError, spec_from_config

SECRET_SHOWN = "[secret]"  # how a secret value is shown, never its text
UNDECRYPTABLE = "ERROR_UNABLE_TO_DECRYPT"  # what `stack history --show-secrets` prints for a secret it cannot read
SUCCEEDED, IN_PROGRESS = "succeeded", "in-progress"
ROLLBACK_MESSAGE = "gpu-rollout rollback to update {version}"  # the message of every update rollback runs
_ROLLBACK_MESSAGE = re.compile(r"^gpu-rollout rollback to update (\d+)\b")

DRIVER, NODE_POOLS, PROMOTION, STAGE, GPU_OPERATOR = (
    f"{PROJECT}:driver", f"{PROJECT}:nodePools", f"{PROJECT}:promotion", f"{PROJECT}:stage", f"{PROJECT}:gpuOperator",
)


class RollbackRefused(Exception):
    """A rollback that must not start: nothing has been changed. ``code`` is the verb's exit code."""

    def __init__(self, message: str, code: Exit = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code


class _Absent:
    """A config key or path that one side does not have."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Entry:
    """One config key's value: a structure (parsed from its JSON text) or a string; secret or not."""

    value: Any
    secret: bool = False


Config = Mapping[str, Entry]


@dataclass(frozen=True)
class Update:
    version: int
    kind: str
    result: str
    ended: bool
    start_time: str
    config: Config
    message: str = ""

    @property
    def good(self) -> bool:
        return self.kind == "update" and self.result == SUCCEEDED


# ---------------------------------------------------------------- reading the CLI's shapes


def _value(raw: Mapping[str, Any]) -> Any:
    """A config value: ``objectValue`` when the CLI gave it, else the JSON text of a structure parsed, else
    the string itself (a plain string that happens to read as JSON, such as "true", stays a string)."""
    if "objectValue" in raw and raw["objectValue"] is not None:
        return raw["objectValue"]
    text = raw.get("value")
    if isinstance(text, str) and text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def parse_config(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, Entry]:
    """``{key: {"value", "secret"[, "objectValue"]}}`` (history or `pulumi config --json`) as entries. A
    secret whose text the CLI left out (history without --show-secrets) keeps the value ``[secret]``."""
    config = {}
    for key, item in raw.items():
        secret = bool(item.get("secret"))
        value = _value(item) if not secret or "value" in item else SECRET_SHOWN
        config[key] = Entry(SECRET_SHOWN if value is None and secret else value, secret)
    return config


def parse_history(raw: Sequence[Mapping[str, Any]]) -> list[Update]:
    """`pulumi stack history --json` (newest first, every page) as updates, newest first. The service
    numbers its updates; the file backend gives every update version 0, so they are numbered here as the
    service would: 1 for the oldest, in the order the history lists them."""
    numbered = any(item.get("version") for item in raw)
    updates = [
        Update(
            version=int(item.get("version") or 0) if numbered else len(raw) - index,
            kind=str(item.get("kind", "")),
            result=str(item.get("result", "")),
            ended=item.get("endTime") is not None,
            start_time=str(item.get("startTime", "")),
            config=parse_config(item.get("config") or {}),
            message=str(item.get("message") or ""),
        )
        for index, item in enumerate(raw)
    ]
    return sorted(updates, key=lambda u: u.version, reverse=True)


# ---------------------------------------------------------------- what identifies a driver state


def _object(config: Config, key: str) -> Any:
    entry = config.get(key)
    return entry.value if entry is not None and not entry.secret else None


def driver_version(config: Config) -> str | None:
    driver = _object(config, DRIVER)
    return driver.get("version") if isinstance(driver, dict) else None


def driver_owner(config: Config) -> str | None:
    driver = _object(config, DRIVER)
    return driver.get("owner") if isinstance(driver, dict) else None


def _pools(config: Config) -> list[dict[str, Any]]:
    pools = _object(config, NODE_POOLS)
    return [p for p in pools if isinstance(p, dict)] if isinstance(pools, list) else []


def live_generations(pool: Mapping[str, Any]) -> list[dict[str, Any]]:
    gens = pool.get("generations")
    return [g for g in gens if isinstance(g, dict) and not g.get("retired")] if isinstance(gens, list) else []


def fingerprint(config: Config) -> tuple[Any, ...]:
    """What a rollback goes back across: the driver version, and per pool its node image (AKS node image,
    EKS AMI release, launch template version) and its live generations with their images and drivers."""
    pools = []
    for pool in _pools(config):
        eks_value = pool.get("eks")
        eks: dict[str, Any] = eks_value if isinstance(eks_value, dict) else {}
        template_value = eks.get("launchTemplate")
        template: dict[str, Any] = template_value if isinstance(template_value, dict) else {}
        gens = tuple(sorted(
            (g.get("id"), g.get("driverVersion"), g.get("releaseVersion"), g.get("nodeImageVersion"))
            for g in live_generations(pool)
        ))
        pools.append((pool.get("name"), eks.get("releaseVersion"), template.get("version"), gens))
    return (driver_version(config), tuple(sorted(pools, key=str)))


def drivers_run(config: Config) -> set[str]:
    """Drivers a config puts on nodes: the target, and the drivers of live image generations."""
    found = {v for v in [driver_version(config)] if v}
    for pool in _pools(config):
        found |= {g["driverVersion"] for g in live_generations(pool) if isinstance(g.get("driverVersion"), str)}
    return found


# ---------------------------------------------------------------- choosing the update to go back to


def check_not_in_progress(history: Sequence[Update], stack: str) -> None:
    running = [u for u in history if u.result == IN_PROGRESS or not u.ended]
    if running:
        raise RollbackRefused(
            f"stack {stack}: update {running[0].version} ({running[0].kind}) is still in progress; wait for it to "
            "end (or, if it died, clear it with `pulumi cancel` / `pulumi stack export|import`) before rolling back"
        )


def check_decryptable(configs: Iterable[tuple[str, Config]]) -> None:
    for where, config in configs:
        unreadable = sorted(k for k, e in config.items() if e.secret and e.value == UNDECRYPTABLE)
        if unreadable:
            raise RollbackRefused(
                f"{where}: secrets cannot be decrypted ({', '.join(unreadable)}): give the stack's passphrase "
                "(PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE) or access to its secrets provider",
                Exit.INVALID,
            )


def choose_target(history: Sequence[Update], current: Config, stack: str, to_version: int | None = None) -> Update:
    """The update to go back to: ``to_version`` when given (it must be a succeeded update), else the newest
    succeeded update whose driver version, node images or generations differ from the current config."""
    if not history:
        raise RollbackRefused(f"stack {stack} has no update history: there is nothing to roll back to")
    check_not_in_progress(history, stack)
    if to_version is not None:
        found = next((u for u in history if u.version == to_version), None)
        if found is None:
            versions = ", ".join(str(u.version) for u in history)
            raise RollbackRefused(f"--to-version {to_version}: stack {stack} has no such update (it has {versions})",
                                  Exit.INVALID)
        if not found.good:
            raise RollbackRefused(
                f"--to-version {to_version}: that update is a {found.kind} that {found.result}, not a succeeded update",
                Exit.INVALID,
            )
        return found
    unfinished = _ROLLBACK_MESSAGE.match(history[0].message)
    if unfinished and not history[0].good:
        target = unfinished.group(1)
        raise RollbackRefused(
            f"stack {stack}: the last update, a rollback to update {target}, {history[0].result}; finish it with "
            f"`gpu-rollout rollback --stack {stack} --to-version {target} --yes` (or `pulumi up`) rather than "
            "roll back from its half-set config"
        )
    now = fingerprint(current)
    for update in history:
        if update.good and fingerprint(update.config) != now:
            return update
    good = [u.version for u in history if u.good]
    raise RollbackRefused(
        f"stack {stack}: no earlier succeeded update ran another driver, node image or generation than the "
        f"current config ({driver_version(current) or 'no driver'}; succeeded updates: "
        f"{', '.join(map(str, good)) or 'none'}); name one with --to-version N"
    )


def check_canary_ran(target: Config, canary_stack: str, canary_history: Sequence[Update] | None) -> list[int]:
    """The canary's succeeded updates that ran the target's driver; refused when there are none."""
    driver = driver_version(target)
    if canary_history is None:
        raise RollbackRefused(f"promotion.canaryStack '{canary_stack}' has no history here: it never ran driver "
                              f"{driver}; --force rolls back anyway")
    ran = [u.version for u in canary_history if u.good and driver in drivers_run(u.config)]
    if not ran:
        raise RollbackRefused(
            f"driver {driver} was never run by the canary stack '{canary_stack}' (no succeeded update of it ran "
            "that driver): roll the canary back first, or --force"
        )
    return ran


# ---------------------------------------------------------------- config changes


_PLAIN_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _segment(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    return f".{key}" if _PLAIN_SEGMENT.fullmatch(key) else f"[{json.dumps(key)}]"


def _path(key: str, parts: Sequence[str | int]) -> str:
    return key + "".join(_segment(p) for p in parts)


@dataclass(frozen=True)
class Change:
    """One config path set (``new`` given) or removed (``new`` absent), as `pulumi config set|rm --path`."""

    path: str  # the config key with its path, e.g. gpu-driver-upgrade:driver.version
    old: Any
    new: Any
    secret: bool = False
    whole_key: bool = False  # set without --path: a whole secret key or a non-structured value

    @property
    def removes(self) -> bool:
        return self.new is ABSENT

    def shown(self, value: Any) -> str:
        if value is ABSENT:
            return "(absent)"
        if self.secret:
            return SECRET_SHOWN
        return value if isinstance(value, str) else json.dumps(value)


def _leaves(old: Any, new: Any, key: str, parts: list[str | int], out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for name in [*old, *[n for n in new if n not in old]]:
            _leaves(old.get(name, ABSENT), new.get(name, ABSENT), key, [*parts, name], out)
        return
    if isinstance(old, list) and isinstance(new, list):
        for index in range(min(len(old), len(new))):
            _leaves(old[index], new[index], key, [*parts, index], out)
        for index in range(len(old), len(new)):
            _leaves(ABSENT, new[index], key, [*parts, index], out)
        for index in reversed(range(len(new), len(old))):  # highest first: indexes stay valid
            out.append(Change(_path(key, [*parts, index]), old[index], ABSENT))
        return
    if old == new and type(old) is type(new):
        return
    if isinstance(new, (dict, list)) and new:
        if old is not ABSENT:  # a value turns into a structure: remove it, then build the structure
            out.append(Change(_path(key, parts), old, ABSENT))
        _leaves({} if isinstance(new, dict) else [], new, key, parts, out)
        return
    out.append(Change(_path(key, parts), old, new))


def config_changes(current: Config, target: Config) -> list[Change]:
    """Every change that turns ``current`` into ``target``: structured values leaf by leaf (paths as
    `pulumi config set --path` takes them), secrets and plain values as whole keys."""
    changes: list[Change] = []
    for key in [*current, *[k for k in target if k not in current]]:
        old, new = current.get(key), target.get(key)
        if old is not None and new is not None and old == new:
            continue
        secret = bool((old and old.secret) or (new and new.secret))
        old_value = old.value if old is not None else ABSENT
        new_value = new.value if new is not None else ABSENT
        structured = isinstance(old_value, (dict, list)) or isinstance(new_value, (dict, list))
        if secret or not structured:
            changes.append(Change(key, old_value, new_value, secret=secret, whole_key=True))
            continue
        if old_value is ABSENT or new_value is ABSENT:
            if new_value is ABSENT:
                changes.append(Change(key, old_value, ABSENT, whole_key=True))
            else:
                _leaves({} if isinstance(new_value, dict) else [], new_value, key, [], changes)
            continue
        _leaves(old_value, new_value, key, [], changes)
    return changes


def path_value_text(value: Any) -> str | None:
    """The text `pulumi config set --path` is given for a leaf, or None when it cannot carry the value's
    type: with --path the CLI stores "true"/"false" as booleans and integer-like text (not starting with 0)
    as integers, so such a string, a float or a null cannot be set back that way."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        retyped = value in ("true", "false") or (re.fullmatch(r"[+-]?\d+", value) and not (
            len(value) > 1 and value[0] == "0"))
        return None if retyped else value
    if isinstance(value, (dict, list)) and not value:
        return None
    return None


_SEGMENT = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def split_path(path: str) -> tuple[str, list[str | int]]:
    """A change's path as (config key, segments), the inverse of how :func:`config_changes` writes it."""
    start = min([i for i in (path.find("."), path.find("[")) if i >= 0], default=len(path))
    key, rest, parts = path[:start], path[start:], []
    while rest:
        match = _SEGMENT.match(rest)
        if match is None:
            raise ValueError(f"not a config path: {path}")
        name, index, quoted = match.groups()
        parts.append(name if name is not None else int(index) if index is not None else json.loads(quoted))
        rest = rest[match.end():]
    return key, parts


def apply_changes(config: Config, changes: Sequence[Change]) -> dict[str, Entry]:
    """``config`` after ``changes``, as `pulumi config set|rm --path` would leave it (an index one past the
    end of a list appends, as the CLI does)."""
    result = {k: Entry(json.loads(json.dumps(e.value)), e.secret) for k, e in config.items()}
    for change in changes:
        key, parts = split_path(change.path)
        if not parts:
            if change.removes:
                result.pop(key, None)
            else:
                result[key] = Entry(change.new, change.secret)
            continue
        root = result[key].value if key in result else ({} if isinstance(parts[0], str) else [])
        node: Any = root
        for part, following in zip(parts[:-1], parts[1:], strict=True):
            fresh: Any = {} if isinstance(following, str) else []
            if isinstance(node, list) and part == len(node):
                node.append(fresh)
            elif isinstance(node, dict) and part not in node:
                node[part] = fresh
            node = node[part]
        last = parts[-1]
        if change.removes:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(change.new)
        else:
            node[last] = change.new
        result[key] = Entry(root, result[key].secret if key in result else False)
    return result


# ---------------------------------------------------------------- the plan, per driver owner


@dataclass(frozen=True)
class Step:
    title: str
    changes: list[Change]


@dataclass
class Plan:
    stack: str
    target: Update
    current_driver: str | None
    target_driver: str | None
    owner: str | None
    changes: list[Change]  # current -> target, all at once
    steps: list[Step]  # in the order they are applied; for an operator-owned driver, one
    how: str  # how the fleet moves back, in words
    canary: str  # what the canary's history says about the target driver
    untypeable: list[Change] = field(default_factory=list)  # leaves --path cannot set with their type


def _with_config(config: Config, key: str, value: Any) -> dict[str, Entry]:
    updated = dict(config)
    old = config.get(key)
    updated[key] = Entry(value, old.secret if old is not None else False)
    return updated


def _generation_steps(current: Config, target: Config) -> list[tuple[str, dict[str, Entry]]]:
    """Image-owned pools move back by generations: (1) the kept previous generation live again at its size
    beside the new one, with the driver target back; (2) the new generation held at 0 nodes, so the models
    move back through their PDBs while its node group stays; (3) the new generation retired (its entry
    removed: the newest generation cannot be marked retired). Each state is a full config."""
    step1_pools, step2_pools, moved = [], [], False
    for pool in _pools(target):
        name = pool.get("name")
        now = next((p for p in _pools(current) if p.get("name") == name), None)
        kept_ids = {g.get("id") for g in live_generations(pool)}
        newer = [g for g in live_generations(now or {}) if g.get("id") not in kept_ids]
        if newer:
            moved = True
        gens = list(pool.get("generations") or [])
        step1_pools.append({**pool, **({"generations": gens + newer} if newer else {})})
        step2_pools.append({**pool, **({"generations": gens + [{**g, "nodeCount": 0} for g in newer]}
                                       if newer else {})})
    if not moved:
        return [("roll back", dict(target))]
    step1 = _with_config(target, NODE_POOLS, step1_pools)
    step2 = _with_config(target, NODE_POOLS, step2_pools)
    return [
        ("scale up the kept previous generation (the new one stays live) and set the driver back", step1),
        ("hold the new generation at 0 nodes: the models move back through their PDBs; its node group stays", step2),
        ("retire the new generation: its entry is removed and its node group deleted", dict(target)),
    ]


def _check_spec(stack: str, title: str, state: Config) -> None:
    """Each step's config must be one the program accepts today, or its `up` would fail half-way."""
    strings = {k: e.value if isinstance(e.value, str) else json.dumps(e.value) for k, e in state.items()}
    try:
        spec_from_config(strings, source=f"stack {stack}")
    except SpecError as error:
        problems = "; ".join(f"{p.path}: {' '.join(p.message.split())}" for p in error.problems)
        raise RollbackRefused(f"stack {stack}: the step '{title}' gives a config the program refuses ({problems})")\
            from None


def _upgrade_policy_words(config: Config) -> str:
    operator = _object(config, GPU_OPERATOR)
    policy = operator.get("upgradePolicy") if isinstance(operator, dict) else None
    if not isinstance(policy, dict):
        return "the operator's default upgradePolicy"
    return (f"upgradePolicy maxParallelUpgrades {policy.get('maxParallelUpgrades', 1)}, "
            f"maxUnavailable {policy.get('maxUnavailable', '25%')}")


def plan_rollback(stack: str, history: Sequence[Update], current: Config, *, to_version: int | None = None,
                  canary_stack: str | None = None, canary_history: Sequence[Update] | None = None,
                  force: bool = False) -> Plan:
    """The whole decision: refusals first (nothing changed yet), then the changes and their steps."""
    check_decryptable([(f"stack {stack}'s config", current)])
    target = choose_target(history, current, stack, to_version)
    check_decryptable([(f"update {target.version} of stack {stack}", target.config)])
    changes = config_changes(current, target.config)
    rerun = not changes and to_version is not None and not history[0].good
    if not changes and not rerun:
        raise RollbackRefused(f"stack {stack}: update {target.version} ran the config the stack has now: "
                              "nothing to roll back")
    target_driver = driver_version(target.config)
    if canary_stack is None:
        canary = "no promotion.canaryStack: this stack is not gated on a canary"
    elif canary_stack == stack:
        canary = "this stack is its own canary"
    else:
        try:
            ran = check_canary_ran(target.config, canary_stack, canary_history)
            canary = f"the canary stack '{canary_stack}' ran {target_driver} in update(s) {', '.join(map(str, ran))}"
        except RollbackRefused as refusal:
            if not force:
                raise
            canary = f"--force: {refusal}"
    owner = driver_owner(target.config) or driver_owner(current)
    if owner == "image":
        states = _generation_steps(current, target.config)
        how = ("image-owned: each pool moves back to its kept previous generation, one step per `pulumi up`: "
               "scale it up, hold the new one, then retire it; watch the pool between steps")
    else:
        states = [("set the config of update %d" % target.version, dict(target.config))]
        how = (f"operator-owned: the GPU Operator rolls the nodes back one at a time through the stack's "
               f"NVIDIADriver/ClusterPolicy, under {_upgrade_policy_words(target.config)} and the PDBs, as it "
               "rolled them forward")
    steps, before = [], current
    for title, state in states:
        step_changes = config_changes(before, state)
        if step_changes:
            _check_spec(stack, title, state)
            steps.append(Step(title, step_changes))
        before = state
    if rerun:  # the config already holds the target's values, but the last update with them did not succeed
        steps = [Step(f"`up` again: the config already holds update {target.version}'s values and the last "
                      f"update {history[0].result}", [])]
    if apply_changes(current, [c for s in steps for c in s.changes]) != dict(target.config):
        raise AssertionError(f"the rollback steps of stack {stack} do not lead to update {target.version}'s config")
    untypeable = [c for s in steps for c in s.changes
                  if not c.whole_key and not c.removes and path_value_text(c.new) is None]
    return Plan(stack, target, driver_version(current), target_driver, owner, changes, steps, how, canary,
                untypeable)


# ---------------------------------------------------------------- the exact commands


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_./:=@%+-]+", text) else "'" + text.replace("'", "'\"'\"'") + "'"


def command(change: Change, stack: str, version: int) -> str:
    """The `pulumi config` command that makes one change (a secret's text is never printed)."""
    if change.removes:
        flag = "" if change.whole_key else " --path"
        return f"pulumi config rm{flag} --stack {_quote(stack)} {_quote(change.path)}"
    if change.secret:
        return (f"pulumi config set --secret --stack {_quote(stack)} {_quote(change.path)}  "
                f"# the secret value of update {version} (pulumi stack history --show-secrets)")
    if change.whole_key:
        value = change.new if isinstance(change.new, str) else json.dumps(change.new)
        return f"pulumi config set --stack {_quote(stack)} {_quote(change.path)} -- {_quote(value)}"
    text = path_value_text(change.new)
    shown = text if text is not None else json.dumps(change.new)
    note = "" if text is not None else "  # --path would change its type: edit the stack file instead"
    return f"pulumi config set --path --stack {_quote(stack)} {_quote(change.path)} -- {_quote(shown)}{note}"


def up_command(stack: str, policy_pack: str, policy_pack_config: str | None) -> str:
    config = f" --policy-pack-config {_quote(policy_pack_config)}" if policy_pack_config else ""
    return f"pulumi up --stack {_quote(stack)} --policy-pack {_quote(policy_pack)}{config}"


def stage(config: Config) -> str | None:
    entry = config.get(STAGE)
    return entry.value if entry is not None and isinstance(entry.value, str) and not entry.secret else None


def canary_stack_of(config: Config) -> str | None:
    promotion = _object(config, PROMOTION)
    value = promotion.get("canaryStack") if isinstance(promotion, dict) else None
    return value if isinstance(value, str) and value else None
