"""The docs agree with one another and with the code: every doc is reachable from the README, every relative
link lands on a file of the repository and never outside it, the runbook opens with step 0 and stays short, its
rollback step points at `gpu-rollout rollback`, and the README's exit-code table names every `Exit`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refusals.exits import Exit
from tests.conftest import PROJECT_DIR

README = PROJECT_DIR / "README.md"
DOCS = PROJECT_DIR / "docs"
# JSON Schemas of the stack file and of each verb's --json document: linked from the README, written elsewhere.
SCHEMAS = DOCS / "schemas"
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
RUNBOOK_WORD_LIMIT = 3000


def _docs() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _relative_links(path: Path) -> list[str]:
    """Link targets that are files of the repository: no URL, no in-page anchor, no mail address."""
    return [target for m in LINK.finditer(_text(path))
            if not re.match(r"[a-z][a-z0-9+.-]*:", (target := m["target"])) and not target.startswith("#")]


def _resolved(path: Path, target: str) -> Path:
    return (path.parent / target.split("#", 1)[0]).resolve()


def _section(text: str, heading_prefix: str) -> str:
    """The body of the first `## ` section whose heading starts with ``heading_prefix``, up to the next `## `."""
    match = re.search(rf"^## {re.escape(heading_prefix)}.*?$(?P<body>.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, heading_prefix
    return match["body"]


def test_there_are_docs_to_check() -> None:
    assert len(_docs()) >= 10  # a glob that found nothing would make every test below vacuous


@pytest.mark.parametrize("doc", _docs(), ids=lambda p: p.name)
def test_every_doc_is_linked_from_the_readme(doc: Path) -> None:
    linked = {_resolved(README, target) for target in _relative_links(README)}
    assert doc.resolve() in linked, f"README.md does not link {doc.relative_to(PROJECT_DIR)}"


def test_the_readme_links_the_schemas_folder() -> None:
    assert "docs/schemas/" in _relative_links(README)


@pytest.mark.parametrize("path", [README, *_docs()], ids=lambda p: p.name)
def test_every_relative_link_stays_in_the_repository_and_lands_on_a_file(path: Path) -> None:
    root = PROJECT_DIR.resolve()
    links = _relative_links(path)
    for target in links:
        assert "shared/" not in target, (path.name, target)
        resolved = _resolved(path, target)
        assert resolved.is_relative_to(root), f"{path.name}: {target} leaves the repository"
        if resolved.is_relative_to(SCHEMAS.resolve()) and not SCHEMAS.exists():
            continue  # the schemas folder is linked ahead of its arrival
        assert resolved.exists(), f"{path.name}: {target} names nothing in the repository"


@pytest.mark.parametrize("path", [README, *_docs()], ids=lambda p: p.name)
def test_no_doc_points_outside_the_repository_or_at_a_later_issue(path: Path) -> None:
    text = _text(path)
    for phrase in ("checklist.md", "later issue", "shared/"):
        assert phrase not in text, (path.name, phrase)


def test_the_runbook_is_under_its_word_limit() -> None:
    words = len(_text(DOCS / "runbook.md").split())  # what `wc -w` counts
    assert words < RUNBOOK_WORD_LIMIT, words


def test_the_runbook_opens_with_step_0() -> None:
    text = _text(DOCS / "runbook.md")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## 0. "), headings[0]
    intro = text.split(headings[0], 1)[0]
    assert len([line for line in intro.splitlines() if line.strip()]) <= 12  # a short intro, then step 0


def test_the_runbook_keeps_the_steps_in_the_checklists_order() -> None:
    headings = [line[3:] for line in _text(DOCS / "runbook.md").splitlines() if line.startswith("## ")]
    numbered = [h.split(".", 1)[0] for h in headings if h[0].isdigit()]
    assert numbered == ["0", "1", "2-3", "4", "5", "6", "7"]
    assert headings[-1].startswith("Image-owned fleets")


def test_the_runbooks_rollback_points_at_the_rollback_verb() -> None:
    rollback = _section(_text(DOCS / "runbook.md"), "7. Rollback")
    assert "gpu-rollout rollback" in rollback
    assert "](rollback.md)" in rollback


def test_the_readmes_exit_code_table_names_every_exit() -> None:
    exit_codes = _section(_text(README), "The command").split("### Exit codes", 1)[1].split("\n### ", 1)[0]
    first_table = exit_codes.split("\n\n| ", 2)[1]  # the codes; the table after it says what 1 means per verb
    rows = {m["code"]: m["name"] for m in re.finditer(r"^\| `(?P<code>\d+)` \| `(?P<name>[A-Z]+)` \|", first_table,
                                                      re.M)}
    assert rows == {str(member.value): member.name for member in Exit}
