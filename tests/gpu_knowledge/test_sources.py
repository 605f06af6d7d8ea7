"""The data tables cite public documents only: a reader outside this workplace can check every source."""

from __future__ import annotations

import re

import pytest

from tests.conftest import PROJECT_DIR

TABLES = sorted((PROJECT_DIR / "gpu_knowledge").glob("*.py"))
PRIVATE = re.compile(r"/work/|shared/reference|research notes|reference section|stored code index|find_string")


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_no_source_note_points_at_a_private_note(table):
    assert not PRIVATE.search(table.read_text()), f"{table.name}: cite the public document itself"
