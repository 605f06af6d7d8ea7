"""A change to the policy pack is a risk in the PR diff (preview/pack_diff.py), named policy by policy with the
level it moves from and to, settings objects included; and `gpu-rollout diff` shows it between two commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preview import diff as compare
from engine_contracts import attestation
from preview.pack_diff import config_changes, pack_changes
from rollout import diff as verb
from rollout import documents
from tests.conftest import PROJECT_DIR
from tests.rollout.gitrepo import GitRepo

# A prod config that trusts a key: the examples' own (the shipped policy/prod.json trusts none).
PROD = json.loads((PROJECT_DIR / "policy" / "examples" / "prod.json").read_text())


def encoded(config: dict) -> bytes:
    return json.dumps(config, indent=2).encode()


def test_a_policy_set_to_advisory_names_the_policy_and_both_levels() -> None:
    found = config_changes("policy/prod.json", encoded(PROD), encoded({**PROD, "canary-attested": "advisory"}))
    (change,) = [c for c in found if c.kind == "level"]
    assert (change.kind, change.policy, change.base, change.head) == ("level", "canary-attested", "mandatory",
                                                                       "advisory")
    assert change.text == "prod: policy canary-attested moves from mandatory to advisory (policy/prod.json)"
    # A bare level drops the entry's settings too: the gate trusts no key any more, and the diff says which.
    assert [(c.kind, c.base) for c in found if c.kind != "level"] == [("trusted-key", attestation.EXAMPLE_KEY_ID)]


def test_all_moves_every_policy_without_its_own_entry_and_is_named_itself() -> None:
    found = config_changes("policy/prod.json", encoded(PROD), encoded({**PROD, "all": "advisory"}))
    moved = {c.policy for c in found if c.kind == "level"}
    assert "canary-attested" not in moved  # its own entry keeps it mandatory
    assert {"change-ticket", "facts-readable", "spare-capacity"} <= moved
    assert [c.text for c in found if c.kind == "entry"] == [
        'prod: the entry all changes from "mandatory" to "advisory" (policy/prod.json)']


def test_a_settings_object_that_changes_is_a_risk_though_its_level_does_not() -> None:
    keyed = {**PROD, "canary-attested": {"enforcementLevel": "mandatory", "trustedKeys": ["key-a"]}}
    (change,) = config_changes("policy/prod.json", encoded(keyed),
                               encoded({**keyed, "canary-attested": {**keyed["canary-attested"],
                                                                     "trustedKeys": ["key-a", "key-b"]}}))
    assert (change.kind, change.policy) == ("settings", "canary-attested")
    assert change.text == "prod: the settings of policy canary-attested change (trustedKeys) (policy/prod.json)"
    assert json.loads(change.head) == {"trustedKeys": ["key-a", "key-b"]}


def test_a_config_that_does_not_read_and_a_rule_change_are_risks() -> None:
    found = pack_changes({"policy/prod.json": encoded(PROD), "policy/compat_rules.py": b"a"},
                         {"policy/prod.json": b"{not json", "policy/compat_rules.py": b"b", "policy/new_rules.py": b"c"})
    kinds = {c.file: (c.kind, c.text) for c in found}
    assert kinds["policy/prod.json"][0] == "config" and "does not read as JSON" in kinds["policy/prod.json"][1]
    assert kinds["policy/compat_rules.py"] == ("code", "the pack's policy/compat_rules.py is changed: its rules judge "
                                               "every stack from the merge on; CODEOWNERS of policy/ review it")
    assert "is added" in kinds["policy/new_rules.py"][1]
    assert pack_changes({"policy/prod.json": encoded(PROD)}, {"policy/prod.json": encoded(PROD)}) == []


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    found = GitRepo(tmp_path / "fleet")
    (found.root / "policy").mkdir()
    (found.root / "policy" / "prod.json").write_text(json.dumps(PROD, indent=2))
    (found.root / "policy" / "rules.py").write_text("# the rules\n")
    found.commit("the pack")
    return found


def test_the_pr_diff_shows_a_pack_change_as_a_risk(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    weakened = {**PROD, "canary-attested": {**PROD["canary-attested"], "enforcementLevel": "advisory"}}
    (repo.root / "policy" / "prod.json").write_text(json.dumps(weakened, indent=2))  # the same keys, advisory
    (repo.root / "policy" / "__pycache__").mkdir()
    (repo.root / ".gitignore").write_text("__pycache__/\n")
    (repo.root / "policy" / "__pycache__" / "rules.cpython-311.pyc").write_bytes(b"\0")  # ignored: not the pack
    report = verb.build(repo.root, base, None, None)
    assert report.stacks == ()  # no stack file differs
    assert [c.text for c in report.pack] == [
        "prod: policy canary-attested moves from mandatory to advisory (policy/prod.json)"]
    markdown = compare.markdown(report)
    assert "#### The policy pack (`policy/`)" in markdown
    assert "- prod: policy canary-attested moves from mandatory to advisory (policy/prod.json)" in markdown
    assert "nothing to review" not in markdown
    assert json.loads(documents.dumps(verb.document(report)))["pack"][0]["policy"] == "canary-attested"
    committed = repo.commit("gate advisory")
    again = verb.build(repo.root, base, committed, None)  # between two commits, as CI compares them
    assert [c.policy for c in again.pack] == ["canary-attested"]
    assert verb.build(repo.root, committed, None, None).pack == ()
