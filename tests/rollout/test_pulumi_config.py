"""The Pulumi CLI's config shapes alone (pulumi_backend/pulumi_config.py), with no project key in sight: the
documents `pulumi config --json` and `pulumi stack history --json` print, `--path` key syntax, the changes
between two configs and the config they leave, and the command lines, read back as a POSIX shell reads them."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulumi_backend.pulumi_config import (
    ABSENT,
    SECRET_SHOWN,
    UNDECRYPTABLE,
    Change,
    Entry,
    apply_changes,
    command,
    config_changes,
    config_path,
    engine_config,
    parse_config,
    parse_history,
    path_value_text,
    shell_quote,
    split_path,
    undecryptable,
    up_command,
)

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None)

KEYS = st.from_regex(r"[a-z][a-z0-9-]{0,8}:[A-Za-z][A-Za-z0-9]{0,8}", fullmatch=True)
NAMES = st.text(max_size=12)  # any text: dots, brackets, quotes, backslashes, spaces, non-ASCII
SEGMENTS = st.lists(st.one_of(NAMES, st.integers(min_value=0, max_value=10_000)), max_size=6)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                    st.floats(allow_nan=False))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(NAMES, inner, max_size=4)), max_leaves=12)
CONFIGS = st.dictionaries(KEYS, st.builds(Entry, VALUES, st.booleans()), max_size=4)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (Python's == takes True for 1 and 1.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def same_config(a: dict[str, Entry], b: dict[str, Entry]) -> bool:
    return a.keys() == b.keys() and all(a[k].secret == b[k].secret and same(a[k].value, b[k].value) for k in a)


# ---------------------------------------------------------------- `--path` keys


@pytest.mark.parametrize(("parts", "path"), [
    (["driver", "version"], "p:k.driver.version"),
    ([0, "existing", "nodeSelector", "gpu.example.com/pool"], 'p:k[0].existing.nodeSelector["gpu.example.com/pool"]'),
    (["a[0]", 'say "hi"', "back\\slash"], 'p:k["a[0]"]["say \\"hi\\""]["back\\\\slash"]'),
    (["", "_x1", "1x"], 'p:k[""]._x1["1x"]'),
    ([3, 0], "p:k[3][0]"),
])
def test_paths_are_written_as_the_cli_takes_them(parts: list[str | int], path: str) -> None:
    assert config_path("p:k", parts) == path
    assert split_path(path) == ("p:k", parts)


@SETTINGS
@given(KEYS, SEGMENTS)
def test_any_path_reads_back_as_its_key_and_segments(key: str, parts: list[str | int]) -> None:
    assert split_path(config_path(key, parts)) == (key, parts)


@pytest.mark.parametrize("path", ["p:k.", "p:k[", "p:k[x]", "p:k.1a", 'p:k["open]', "p:k[0]tail"])
def test_a_path_that_is_not_one_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="not a config path"):
        split_path(path)


# ---------------------------------------------------------------- the CLI's documents


def test_config_values_read_as_the_cli_writes_them() -> None:
    parsed = parse_config({
        "p:object": {"value": '{"a": [1, "x"]}', "secret": False},
        "p:list": {"value": "[true]", "secret": False},
        "p:word": {"value": "true", "secret": False},  # a string that reads as JSON stays a string
        "p:number": {"value": "42", "secret": False},
        "p:broken": {"value": "{not json", "secret": False},
        "p:typed": {"value": '{"a": 1}', "objectValue": {"a": 2}, "secret": False},  # objectValue wins
        "p:secret": {"value": '{"token": "t"}', "secret": True},
        "p:hidden": {"secret": True},  # history without --show-secrets leaves the text out
    })
    assert parsed == {
        "p:object": Entry({"a": [1, "x"]}), "p:list": Entry([True]), "p:word": Entry("true"),
        "p:number": Entry("42"), "p:broken": Entry("{not json"), "p:typed": Entry({"a": 2}),
        "p:secret": Entry({"token": "t"}, True), "p:hidden": Entry(SECRET_SHOWN, True),
    }
    assert engine_config(parsed)["p:object"] == '{"a": [1, "x"]}' and engine_config(parsed)["p:word"] == "true"


def test_undecryptable_secrets_are_named_and_plain_text_is_not() -> None:
    config = parse_config({"p:b": {"value": UNDECRYPTABLE, "secret": True},
                           "p:a": {"value": UNDECRYPTABLE, "secret": True},
                           "p:c": {"value": UNDECRYPTABLE, "secret": False}, "p:d": {"value": "x", "secret": True}})
    assert undecryptable(config) == ["p:a", "p:b"]


def test_history_is_newest_first_and_only_a_succeeded_update_is_good() -> None:
    raw = [{"version": v, "kind": kind, "result": result, "startTime": f"t{v}", "config": {}, **extra}
           for v, kind, result, extra in [(2, "refresh", "succeeded", {"endTime": "e"}),
                                          (4, "update", "in-progress", {}),
                                          (3, "update", "failed", {"endTime": "e"}),
                                          (1, "update", "succeeded", {"endTime": "e", "message": "m"})]]
    updates = parse_history(raw)
    assert [(u.version, u.good, u.ended) for u in updates] == [(4, False, False), (3, False, True), (2, False, True),
                                                               (1, True, True)]
    assert updates[-1].message == "m" and updates[-1].start_time == "t1"


# ---------------------------------------------------------------- changes and the config they leave


@SETTINGS
@given(CONFIGS, CONFIGS)
def test_the_changes_lead_from_one_config_to_the_other(current: dict[str, Entry], target: dict[str, Entry]) -> None:
    before = json.dumps({k: [e.value, e.secret] for k, e in current.items()})
    changes = config_changes(current, target)
    assert same_config(apply_changes(current, changes), target)
    assert json.dumps({k: [e.value, e.secret] for k, e in current.items()}) == before  # applied to a copy
    assert (changes == []) == same_config(current, target)
    assert all(c.whole_key or not c.secret for c in changes)  # a secret is never set leaf by leaf


def test_a_list_element_that_turns_into_a_structure_keeps_the_elements_after_it() -> None:
    """Removing element 0 to build a structure there shifts the rest: the list is rebuilt from there on."""
    current, target = {"p:k": Entry({"a": [1, 2, 3]})}, {"p:k": Entry({"a": [{"b": 1}, 2, 3]})}
    changes = config_changes(current, target)
    assert [(c.path, c.new) for c in changes] == [
        ("p:k.a[2]", ABSENT), ("p:k.a[1]", ABSENT), ("p:k.a[0]", ABSENT),
        ("p:k.a[0].b", 1), ("p:k.a[1]", 2), ("p:k.a[2]", 3)]
    assert apply_changes(current, changes) == target


def test_a_value_only_its_type_tells_apart_is_a_change() -> None:
    current, target = {"p:k": Entry({"a": 1})}, {"p:k": Entry({"a": True})}
    assert [(c.path, c.old, c.new) for c in config_changes(current, target)] == [("p:k.a", 1, True)]


def test_a_new_key_holding_an_empty_structure_is_set_whole() -> None:
    changes = config_changes({}, {"p:k": Entry({}), "p:l": Entry([])})
    assert [(c.path, c.new, c.whole_key) for c in changes] == [("p:k", {}, True), ("p:l", [], True)]
    assert command(changes[0], "s", 1) == "pulumi config set --stack s p:k -- '{}'"


# ---------------------------------------------------------------- the command lines


@pytest.mark.parametrize(("value", "text"), [
    ("580.173.02", "580.173.02"), (True, "true"), (3, "3"), ("0123", "0123"), ("0", None), ("-7", None),
    ("true", None), ("42", None), (1.5, None), (None, None), ({}, None), ([], None),
])
def test_path_value_text_is_none_where_the_path_form_would_retype(value: Any, text: str | None) -> None:
    assert path_value_text(value) == text


@SETTINGS
@given(st.text())
def test_a_quoted_word_is_one_word_to_the_shell(text: str) -> None:
    assert shlex.split(shell_quote(text)) == [text]


@SETTINGS
@given(KEYS, SEGMENTS, st.one_of(st.text(), st.booleans(), st.integers()), st.text(min_size=1))
def test_a_path_command_carries_the_path_and_the_value_exactly(key: str, parts: list[str | int], value: Any,
                                                                stack: str) -> None:
    change = Change(config_path(key, parts), ABSENT, value)
    words = shlex.split(command(change, stack, 7), comments=True)
    text = path_value_text(value)
    assert words == ["pulumi", "config", "set", "--path", "--stack", stack, change.path, "--",
                     text if text is not None else json.dumps(value)]
    assert ("edit the stack file" in command(change, stack, 7)) == (text is None)


def test_a_secret_command_never_prints_the_secret() -> None:
    change = Change("p:token", "old-secret", "new secret's text", secret=True, whole_key=True)
    line = command(change, "prod", 4)
    assert shlex.split(line, comments=True) == ["pulumi", "config", "set", "--secret", "--stack", "prod", "p:token"]
    assert "secret's" not in line and "old-secret" not in line and "update 4" in line


@pytest.mark.parametrize(("change", "words"), [
    (Change("p:k", "x", ABSENT, whole_key=True), ["pulumi", "config", "rm", "--stack", "my stack", "p:k"]),
    (Change("p:k[2]", "x", ABSENT), ["pulumi", "config", "rm", "--path", "--stack", "my stack", "p:k[2]"]),
    (Change("p:k", "x", {"a": [1]}, whole_key=True),
     ["pulumi", "config", "set", "--stack", "my stack", "p:k", "--", '{"a": [1]}']),
])
def test_removals_and_whole_keys(change: Change, words: list[str]) -> None:
    assert shlex.split(command(change, "my stack", 1)) == words


def test_up_runs_with_the_policy_pack_and_its_config_when_given() -> None:
    assert shlex.split(up_command("s", "/a pack", "c.json")) == [
        "pulumi", "up", "--stack", "s", "--policy-pack", "/a pack", "--policy-pack-config", "c.json"]
    assert up_command("s", "policy", None) == "pulumi up --stack s --policy-pack policy"


def test_shown_values_never_show_a_secret() -> None:
    assert Change("p:k", "a", ABSENT, secret=True).shown("a") == SECRET_SHOWN
    assert Change("p:k", 1.5, ABSENT).shown(1.5) == "1.5" and Change("p:k", "a", ABSENT).shown(ABSENT) == "(absent)"
