"""The diff benchmark's repository is what it claims: every one of the four example stacks changed, each
diffed with its one change and no new verdict (it prints figures; timings are never asserted)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.diff_scale import STACKS, changed_repo
from rollout import diff as verb


def test_the_benchmark_diffs_all_four_example_stacks(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    base = changed_repo(root)

    report = verb.build(root, base, None, None)

    assert sorted(s.stack for s in report.stacks) == sorted(STACKS)
    for diff in report.stacks:
        assert [(c.subject, c.field, c.head) for c in diff.changes] == [
            ("stack", "change ticket", f"CHG-BENCH-{diff.stack}")
        ]
        assert diff.introduced == () and diff.fixed == ()  # a new ticket moves no verdict
