"""Find a vocabulary's words spelled outside their home: string literals of product source (docstrings and the text
pieces of f-strings are prose, not spellings)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

from tests.conftest import PROJECT_DIR
from tests.product_source import product_files

Hit = tuple[str, int, str]  # (path, line, value)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring literals of ``tree`` (its module's, classes' and functions')."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _prose(tree: ast.AST) -> set[int]:
    """Docstrings and the text pieces of f-strings."""
    found = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.update(id(value) for value in node.values if isinstance(value, ast.Constant))
    return found


def spellings(source: str, path: str, values: Collection[str],
              where: Callable[[ast.AST], set[int]] | None = None) -> list[Hit]:
    """Each literal of ``source`` equal to one of ``values``; with ``where``, only the literals whose ids it returns
    (the places a word names this vocabulary's thing)."""
    tree = ast.parse(source)
    prose = _prose(tree)
    only = where(tree) if where is not None else None
    return [(path, node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values
            and id(node) not in prose and (only is None or id(node) in only)]


def stray(values: Collection[str], homes: Collection[str], *,
          where: Callable[[ast.AST], set[int]] | None = None) -> list[Hit]:
    """Every spelling of ``values`` in product source (workload/, shipped alone, left out) outside ``homes``."""
    found: list[Hit] = []
    for file in product_files(home=Path("-"), leave_out=("workload",)):
        path = file.relative_to(PROJECT_DIR).as_posix()
        if path not in homes:
            found += spellings(file.read_text(encoding="utf-8"), path, values, where)
    return sorted(found)


def unexplained(found: list[Hit], allowed: dict[tuple[str, str], str]) -> tuple[list[Hit], list[tuple[str, str]]]:
    """(hits no allowance explains, allowances no hit uses: stale ones)."""
    return ([hit for hit in found if (hit[0], hit[2]) not in allowed],
            sorted(set(allowed) - {(path, value) for path, _, value in found}))
