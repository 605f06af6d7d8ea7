"""The Pulumi CLI's config and update history as plain values, for any Pulumi project.

What the CLI prints and takes, and nothing of this project (an import contract in pyproject.toml keeps it so):

- an update of `pulumi stack history --json` (newest first; the Automation API's ``Stack.history()`` parses
  the same document): ``version``, ``kind``, ``result`` (``in-progress|succeeded|failed``), ``endTime``
  (absent while in progress), ``message``, ``config``, the full config the update ran with, and
  ``environment``, the metadata the CLI records with each update (``git.head``: the commit of the project's
  checkout it ran from; ``git.dirty``: whether that checkout had changes);
- a config as `pulumi config --json` and the history print it: ``{key: {"value": text, "secret": bool}}``,
  a structured value as its JSON text (or its ``objectValue``);
- `pulumi config set|rm --path` key syntax (``project:key.field[0]["name.with.dots"]``), the changes that
  turn one config into another leaf by leaf, and the config those changes leave;
- the `pulumi config` and `pulumi up` command lines that make a change, quoted for a POSIX shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SECRET_SHOWN = "[secret]"  # how a secret value is shown, never its text
UNDECRYPTABLE = "ERROR_UNABLE_TO_DECRYPT"  # what `stack history --show-secrets` prints for a secret it cannot read
SUCCEEDED, IN_PROGRESS = "succeeded", "in-progress"
GIT_HEAD, GIT_DIRTY = "git.head", "git.dirty"  # update metadata the CLI records from the project's checkout


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
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def good(self) -> bool:
        return self.kind == "update" and self.result == SUCCEEDED

    @property
    def commit(self) -> str | None:
        """The commit of the checkout the update ran from (``git.head``); None when the CLI recorded none."""
        head = self.environment.get(GIT_HEAD)
        return head if isinstance(head, str) and re.fullmatch(r"[0-9a-f]{7,64}", head) else None

    @property
    def dirty(self) -> bool:
        """The checkout had changes beyond its commit (``git.dirty``): the commit alone does not say what ran."""
        return self.environment.get(GIT_DIRTY) == "true"


# ---------------------------------------------------------------- reading the CLI's documents


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
            environment={str(k): str(v) for k, v in (item.get("environment") or {}).items()},
        )
        for index, item in enumerate(raw)
    ]
    return sorted(updates, key=lambda u: u.version, reverse=True)


def undecryptable(config: Config) -> list[str]:
    """The secret keys whose text the CLI could not decrypt, sorted."""
    return sorted(k for k, e in config.items() if e.secret and e.value == UNDECRYPTABLE)


def plain_value(config: Config, key: str) -> Any:
    """A key's value when it is not a secret, else None (a secret is never read as data)."""
    entry = config.get(key)
    return entry.value if entry is not None and not entry.secret else None


def with_value(config: Config, key: str, value: Any) -> dict[str, Entry]:
    """``config`` with one key's value replaced (it stays secret if it was)."""
    updated = dict(config)
    old = config.get(key)
    updated[key] = Entry(value, old.secret if old is not None else False)
    return updated


def engine_config(config: Config) -> dict[str, str]:
    """The flat map of strings the engine hands a program: each structure as its JSON text."""
    return {k: e.value if isinstance(e.value, str) else json.dumps(e.value) for k, e in config.items()}


# ---------------------------------------------------------------- `--path` keys


_PLAIN_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEGMENT = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def _segment(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    return f".{key}" if _PLAIN_SEGMENT.fullmatch(key) else f"[{json.dumps(key)}]"


def config_path(key: str, parts: Sequence[str | int]) -> str:
    """A config key with a path into its value, as `pulumi config set --path` takes it: a name as ``.name``,
    a name with other characters quoted as ``["gpu.example.com/pool"]``, a list index as ``[0]``."""
    return key + "".join(_segment(p) for p in parts)


def split_path(path: str) -> tuple[str, list[str | int]]:
    """A path as (config key, segments), the inverse of :func:`config_path`."""
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
    return None


# ---------------------------------------------------------------- changes between two configs


@dataclass(frozen=True)
class Change:
    """One config path set (``new`` given) or removed (``new`` absent), as `pulumi config set|rm --path`."""

    path: str  # the config key with its path, e.g. project:driver.version
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


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (``==`` takes ``True`` for ``1`` and ``1.0``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _rebuilt(old: Any, new: Any) -> bool:
    """Whether ``new`` is a structure that cannot be reached from ``old`` leaf by leaf: ``old`` is removed and
    the structure built again."""
    kept = (isinstance(old, dict) and isinstance(new, dict)) or (isinstance(old, list) and isinstance(new, list))
    return not kept and isinstance(new, (dict, list)) and bool(new)


def _leaves(old: Any, new: Any, key: str, parts: list[str | int], out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for name in [*old, *[n for n in new if n not in old]]:
            _leaves(old.get(name, ABSENT), new.get(name, ABSENT), key, [*parts, name], out)
        return
    if isinstance(old, list) and isinstance(new, list):
        # An element rebuilt as a structure is removed first, which would shift the ones after it: from the
        # first such element on, the list is cut and built again.
        common = min(len(old), len(new))
        cut = next((i for i in range(common) if _rebuilt(old[i], new[i])), common)
        for index in range(cut):
            _leaves(old[index], new[index], key, [*parts, index], out)
        for index in reversed(range(cut, len(old))):  # highest first: indexes stay valid
            out.append(Change(config_path(key, [*parts, index]), old[index], ABSENT))
        for index in range(cut, len(new)):
            _leaves(ABSENT, new[index], key, [*parts, index], out)
        return
    if _same(old, new):
        return
    if _rebuilt(old, new):
        if old is not ABSENT:  # a value turns into a structure: remove it, then build the structure
            out.append(Change(config_path(key, parts), old, ABSENT))
        _leaves({} if isinstance(new, dict) else [], new, key, parts, out)
        return
    out.append(Change(config_path(key, parts), old, new))


def config_changes(current: Config, target: Config) -> list[Change]:
    """Every change that turns ``current`` into ``target``: structured values leaf by leaf (paths as
    `pulumi config set --path` takes them), secrets and plain values as whole keys."""
    changes: list[Change] = []
    for key in [*current, *[k for k in target if k not in current]]:
        old, new = current.get(key), target.get(key)
        if old is not None and new is not None and old.secret == new.secret and _same(old.value, new.value):
            continue
        secret = bool((old and old.secret) or (new and new.secret))
        old_value = old.value if old is not None else ABSENT
        new_value = new.value if new is not None else ABSENT
        structured = isinstance(old_value, (dict, list)) or isinstance(new_value, (dict, list))
        if secret or not structured:
            changes.append(Change(key, old_value, new_value, secret=secret, whole_key=True))
            continue
        if old_value is ABSENT or new_value is ABSENT:
            # A key removed, or a new one set to an empty structure, which no path inside it can create.
            if new_value is ABSENT or not new_value:
                changes.append(Change(key, old_value, new_value, whole_key=True))
            else:
                _leaves({} if isinstance(new_value, dict) else [], new_value, key, [], changes)
            continue
        _leaves(old_value, new_value, key, [], changes)
    return changes


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


# ---------------------------------------------------------------- the command lines


def shell_quote(text: str) -> str:
    """``text`` as one word of a POSIX shell: bare when it is plainly safe, else single-quoted."""
    return text if re.fullmatch(r"[A-Za-z0-9_./:=@%+-]+", text) else "'" + text.replace("'", "'\"'\"'") + "'"


def command(change: Change, stack: str, version: int) -> str:
    """The `pulumi config` command that makes one change back to update ``version``'s config (a secret's
    text is never printed)."""
    if change.removes:
        flag = "" if change.whole_key else " --path"
        return f"pulumi config rm{flag} --stack {shell_quote(stack)} {shell_quote(change.path)}"
    if change.secret:
        return (f"pulumi config set --secret --stack {shell_quote(stack)} {shell_quote(change.path)}  "
                f"# the secret value of update {version} (pulumi stack history --show-secrets)")
    if change.whole_key:
        value = change.new if isinstance(change.new, str) else json.dumps(change.new)
        return f"pulumi config set --stack {shell_quote(stack)} {shell_quote(change.path)} -- {shell_quote(value)}"
    text = path_value_text(change.new)
    shown = text if text is not None else json.dumps(change.new)
    note = "" if text is not None else "  # --path would change its type: edit the stack file instead"
    return (f"pulumi config set --path --stack {shell_quote(stack)} {shell_quote(change.path)} -- "
            f"{shell_quote(shown)}{note}")


def up_command(stack: str, policy_pack: str, policy_pack_config: str | None) -> str:
    config = f" --policy-pack-config {shell_quote(policy_pack_config)}" if policy_pack_config else ""
    return f"pulumi up --stack {shell_quote(stack)} --policy-pack {shell_quote(policy_pack)}{config}"
