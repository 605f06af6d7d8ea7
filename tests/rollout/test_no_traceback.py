"""Issue 12 point 5: no verb ever ends in a traceback on bad input.

Hypothesis feeds every registered verb generated stack files (random YAML, a value of another type at any key
of the prod example, other encodings, huge values) and, for the live verbs, generated kubeconfigs the same
way. Input that is refused exits 2 with its reasons on stderr, one per line, nothing on stdout and no change
made: the stack file is untouched and the fake API on loopback (one per module, shared by every example) saw
no request at all. Input that is still valid runs the verb (exit 0 or 1). Whatever happens, never exit 70
(a defect) and never a traceback.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from checks.errors import ConfigError
from checks.kubeconfig import validate
from rollout.cli import app
from refusals.exits import Exit
from fleetspec.load import SpecError, load_stack_file
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import seed
from tests.fakekube.server import FakeKube

runner = CliRunner()

# Every verb the command line registers, with what it needs to run once and stop.
VERB_ARGS = {"plan": [], "preflight": [], "watch": ["--once"], "pause": [], "resume": [], "verify": [],
             "simulate": ["--from-cluster"], "release-node": ["aks-gput4-node-0"], "soak": []}
LIVE = sorted(set(VERB_ARGS) - {"plan"})
EXAMPLE = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# Verbs that read no stack file, fed generated input where their input is: diff reads stack files at git
# revisions (tests/rollout/test_diff.py), rollback the Pulumi backend (tests/rollout/test_rollback.py and
# tests/e2e/test_rollback.py), deploy-plan and stacks every stack file of a project and the backend
# (tests/rollout/test_deploy_plan.py).
FED_ELSEWHERE = {"diff", "rollback", "deploy-plan", "stacks", "keygen",  # keygen: tests/rollout/test_keygen.py
                 "init",  # init: tests/rollout/test_init.py (flags and example stack files, never a stack file given)
                 "runbook",  # runbook: tests/rollout/test_team_runbook.py (a stack's name; its file read as plan reads it)
                 "fleet",  # fleet plan/status/advance read Fleet.yaml: tests/fleetspec/test_fleet_file.py, test_fleet_cli.py
                 "doctor",  # doctor github reads the GitHub API: tests/rollout/test_doctor_github.py
                 "review",  # review reads every stack file of a project: tests/rollout/test_review.py
                 "guard"}  # runs until stopped: tests/rollout/test_guard_metrics.py (a process; a bad --listen)


def test_every_registered_verb_is_fed() -> None:
    # A new verb joins VERB_ARGS, or FED_ELSEWHERE with the tests that feed it.
    assert set(typer.main.get_command(app).commands) == set(VERB_ARGS) | FED_ELSEWHERE


# ---------------------------------------------------------------- the shared cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[FakeKube, Path]]:
    """The prod stack's cluster, and a kubeconfig reaching it, for every example of this module."""
    with FakeKube() as fake, tempfile.TemporaryDirectory() as tmp:
        seed(fake, load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml"))
        yield fake, fake.write_kubeconfig(Path(tmp) / "kubeconfig")


# ---------------------------------------------------------------- generated documents

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
           | st.sampled_from(["", "~", "null", "yes", "0x1F", "2026-12-09", "580.173.02", "*", "&a", "%"]))
values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                      | st.dictionaries(st.text(max_size=10), children, max_size=4), max_leaves=10)


def huge(*too_big_kib: int) -> st.SearchStrategy[Any]:
    """Long values and files past the size a reader accepts (``too_big_kib``); files just under it parse for
    seconds in pure-Python YAML, so they are left to the readers' own tests."""
    return st.one_of(
        st.sampled_from([256, *too_big_kib]).map(lambda kib: Spliced("x" * (kib * 1024))),
        st.integers(20, 400).map(lambda digits: 10 ** digits),
        st.integers(1, 50_000).map(lambda n: list(range(n))),
        st.integers(50, 5000).map(lambda depth: Spliced("[" * depth + "]" * depth)),
    )


class Spliced:
    """YAML text put in place after dumping: nesting no dumper writes, megabytes no dumper writes quickly."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Spliced({self.text[:10]!r}... {len(self.text)} characters)"


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        found += [p for k, v in value.items() for p in _paths(v, (*path, k))]
    elif isinstance(value, list):
        found += [p for i, v in enumerate(value) for p in _paths(v, (*path, i))]
    return found


def _at(document: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        document = document[part]
    return document


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    _at(copy, path[:-1])[path[-1]] = value
    return copy


def _dump(document: Any) -> bytes:
    spliced: list[Spliced] = []

    def placeholders(value: Any) -> Any:
        if isinstance(value, Spliced):
            spliced.append(value)
            return f"__spliced_{len(spliced) - 1}__"
        if isinstance(value, dict):
            return {k: placeholders(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholders(v) for v in value]
        return value

    text = yaml.safe_dump(placeholders(document), sort_keys=False, allow_unicode=True, width=1 << 30)
    for index, value in enumerate(spliced):
        text = text.replace(f"__spliced_{index}__", value.text)
    return text.encode("utf-8")


def mutations(base: Any, enormous_values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """Files made from ``base``: a value of another type at any key, a huge value at any key, the file in
    another encoding, random YAML and random bytes."""
    paths = _paths(base)
    other_type = st.tuples(st.sampled_from(paths), values).filter(
        lambda pv: type(pv[1]) is not type(_at(base, pv[0]))).map(lambda pv: _dump(_replaced(base, *pv)))
    enormous = st.tuples(st.sampled_from(paths), enormous_values).map(lambda pv: _dump(_replaced(base, *pv)))
    text = _dump(base).decode("utf-8")
    encoded = st.tuples(st.sampled_from(["utf-16", "utf-32", "latin-1", "cp1252"]), st.integers(0, len(text)),
                        st.sampled_from("éß€ü")).map(lambda e: (text[:e[1]] + e[2] + text[e[1]:]).encode(e[0], "replace"))
    random_yaml = values.map(_dump)
    return st.one_of(other_type, enormous, encoded, random_yaml, st.binary(max_size=200))


# ---------------------------------------------------------------- the property


def _invoke(verb: str, stack_file: Path, kubeconfig: Path) -> Any:
    args = [verb, "--stack-file", str(stack_file), *VERB_ARGS[verb]]
    if verb in LIVE:
        args += ["--kubeconfig", str(kubeconfig)]
    return runner.invoke(app, args)


def _stack_refused(path: Path) -> bool:
    try:
        load_stack_file(path)
    except SpecError:
        return True
    return False


def _kubeconfig_refused(path: Path) -> bool:
    try:
        validate(str(path), None)
    except ConfigError:
        return True
    return False


def assert_clean_outcome(result: Any, refused: bool, fake: FakeKube, before: dict[str, int], prefix: str) -> None:
    assert result.exit_code != Exit.INTERNAL, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    event(f"exit {int(result.exit_code)}, {'refused' if refused else 'accepted'}")
    if not refused:
        assert result.exit_code in (Exit.OK, Exit.FAILED, Exit.INVALID), result.output
        return
    assert result.exit_code == Exit.INVALID, result.output
    assert result.stdout == ""
    first, *more = result.stderr.splitlines()
    assert first.startswith(prefix), first
    assert all(line.startswith("  ") and ": " in line for line in more), more  # one reason per line
    assert dict(fake.counts) == before  # no change made: not a single request reached the cluster


def _inserted(encoding: str, offset: int, char: str) -> bytes:
    text = _dump(EXAMPLE).decode("utf-8")
    return (text[:offset] + char + text[offset:]).encode(encoding, "replace")


@SETTINGS
@given(verb=st.sampled_from(sorted(VERB_ARGS)), content=mutations(EXAMPLE, huge(5 * 1024)))  # 4 MiB at most
@example(verb="pause", content=_inserted("latin-1", 514, "€"))  # found: a YAML error quoting its line, over 4 lines
@example(verb="plan", content=b"config:\n  gpu-driver-upgrade:stage: prod\n    bad: [1\n")
def test_any_stack_file_gives_an_outcome_never_a_traceback(cluster: tuple[FakeKube, Path], verb: str,
                                                           content: bytes) -> None:
    fake, kubeconfig = cluster
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzzed.yaml"
        path.write_bytes(content)
        refused = _stack_refused(path)
        if not refused and verb == "plan":
            return  # a valid stack's plan is the plan tests' business (and takes seconds)
        before = dict(fake.counts)
        result = _invoke(verb, path, kubeconfig)
        assert path.read_bytes() == content
        assert_clean_outcome(result, refused, fake, before, "invalid config")


@SETTINGS
@given(verb=st.sampled_from(LIVE), data=st.data())
def test_any_kubeconfig_gives_an_outcome_never_a_traceback(cluster: tuple[FakeKube, Path], verb: str,
                                                           data: st.DataObject) -> None:
    fake, kubeconfig = cluster
    valid = json.loads(kubeconfig.read_text(encoding="utf-8"))
    content = data.draw(mutations(valid, huge(17 * 1024)))  # 16 MiB at most
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubeconfig"
        path.write_bytes(content)
        refused = _kubeconfig_refused(path)
        before = dict(fake.counts)
        result = _invoke(verb, PROJECT_DIR / "Pulumi.prod.yaml", path)
        assert path.read_bytes() == content
        assert_clean_outcome(result, refused, fake, before, f"--kubeconfig/--context: kubeconfig {path}")
