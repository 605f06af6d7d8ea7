"""Who owns a path, as GitHub reads a CODEOWNERS file: each line a pattern and its owners, the last line whose
pattern matches a path deciding (a line with no owners leaves the path unowned). Patterns follow gitignore's
rules as GitHub applies them: a leading or inner ``/`` anchors a pattern at the repository's root, a trailing
``/`` matches what lies under a folder, ``*`` stays within one folder, ``**`` crosses folders, and a pattern
that names a folder covers everything under it (but ``/docs/*`` only the files directly in docs/, as GitHub
documents). GitHub supports no ``!`` negation and no ``[ ]`` ranges: such a
line is reported as a problem and matches nothing, as GitHub skips it.

Read by `gpu-rollout doctor github` (the file on main, through the API) and by the test that holds every path a
deploying job runs to a code owner (tests/test_codeowners.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")  # where GitHub looks, in its order


@dataclass(frozen=True)
class Rule:
    line: int
    pattern: str
    owners: tuple[str, ...]
    regex: re.Pattern[str]


@dataclass(frozen=True)
class CodeOwners:
    rules: tuple[Rule, ...]
    problems: tuple[str, ...]  # "line N: why", for lines GitHub would skip

    def owners_of(self, path: str) -> tuple[str, ...]:
        """The owners of a file (its path from the repository's root); () when none."""
        for rule in reversed(self.rules):
            if rule.regex.match(path):
                return rule.owners
        return ()


def _regex(pattern: str) -> re.Pattern[str]:
    folder = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = pattern.startswith("/") or "/" in body
    out = []
    at = 0
    while at < len(body):
        if body.startswith("**/", at):
            out.append("(?:.*/)?")
            at += 3
        elif body.startswith("**", at):
            out.append(".*")
            at += 2
        elif body[at] == "*":
            out.append("[^/]*")
            at += 1
        elif body[at] == "?":
            out.append("[^/]")
            at += 1
        else:
            out.append(re.escape(body[at]))
            at += 1
    start = "^" if anchored else "^(?:.*/)?"
    # GitHub departs from gitignore here: a last part with a wildcard (``/docs/*``) matches files, not what lies in
    # the folders it matches.
    end = "/.*$" if folder else "$" if "*" in body.rsplit("/", 1)[-1] else "(?:/.*)?$"
    return re.compile(start + "".join(out) + end)


def parse(text: str) -> CodeOwners:
    rules: list[Rule] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        pattern, *owners = line.split()
        if pattern.startswith("!") or "[" in pattern or "]" in pattern:
            problems.append(f"line {number}: {pattern!r} uses a negation or a range, which CODEOWNERS does not support")
            continue
        if pattern == "/":
            problems.append(f"line {number}: '/' matches nothing; '*' matches every path")
            continue
        rules.append(Rule(number, pattern, tuple(owners), _regex(pattern)))
    return CodeOwners(tuple(rules), tuple(problems))
