"""The one reader of YAML files a user hands the project (stack files, kubeconfigs): bounded in size, in
alias expansion and in nesting, so a hostile file costs a few milliseconds to refuse, and every refusal is
one sentence that names the byte, line or key at fault.

Pulumi's own reader (Go yaml.v3) refuses "excessive aliasing" too; this one checks the composed node graph
before anything expands, so a billion-laughs file is rejected without being built.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

MAX_EXPANDED_NODES = 100_000  # nodes of a document with every alias expanded (a 150-pool stack is ~10,000)


class YamlFileError(ValueError):
    """A file that cannot be read as YAML; the message is one line and does not name the file (callers do)."""


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: object, first_line: int, second_line: int) -> None:
        super().__init__(f"key {key!r} is given twice, on lines {first_line} and {second_line}")
        self.key, self.first_line, self.second_line = key, first_line, second_line


# libyaml's parser where PyYAML was built with it: the pure-Python one spends 0.3 s on a 150-pool stack.
# Both build the same nodes and objects; only their error texts differ (each names line and column).
if TYPE_CHECKING:
    SafeLoader = yaml.SafeLoader
else:
    SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DuplicateKeysRefused(yaml.constructor.SafeConstructor):
    """A constructor on which a mapping key given twice is an error, not last-one-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                raise DuplicateKeyError(key, first.start_mark.line + 1, key_node.start_mark.line + 1)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


class StrictLoader(DuplicateKeysRefused, SafeLoader):
    """A safe loader on which a mapping key given twice is an error, not last-one-wins."""


def expanded_size(root: yaml.Node, budget: int = MAX_EXPANDED_NODES) -> int:
    """Nodes of the document with aliases expanded, counted without expanding them (an alias is the same node
    object twice, so sizes are memoised per node); stops early once past ``budget``. Iterative, so a deeply
    nested document cannot exhaust Python's recursion limit here."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
            if sizes[id(node)] > budget:
                return sizes[id(node)]
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: the problem and where (PyYAML's own text quotes the offending line)."""
    if isinstance(exc, DuplicateKeyError):
        return str(exc)
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def parse(text: str, loader: type[yaml.SafeLoader] = SafeLoader) -> Any:
    """One YAML document from ``text``; YamlFileError for anything that is not one, or costs too much."""
    try:
        reader = loader(text)  # the pure-Python reader checks characters here, libyaml as it parses
    except yaml.YAMLError as exc:
        raise YamlFileError(f"not valid YAML: {_problem(exc)}") from None
    try:
        root = reader.get_single_node()
        if root is None:
            return None
        if expanded_size(root) > MAX_EXPANDED_NODES:
            raise YamlFileError(
                f"refused for excessive aliasing: the document expands to more than {MAX_EXPANDED_NODES} nodes"
            )
        return reader.construct_document(root)
    except yaml.YAMLError as exc:
        raise YamlFileError(f"not valid YAML: {_problem(exc)}") from None
    except RecursionError:
        raise YamlFileError("nested too deeply") from None
    finally:
        reader.dispose()


def read(path: Path, max_bytes: int, loader: type[yaml.SafeLoader] = SafeLoader) -> Any:
    """The YAML document in ``path``: refused unread past ``max_bytes``, then as UTF-8, then as YAML."""
    try:
        if path.stat().st_size > max_bytes:
            raise YamlFileError(f"larger than {max_bytes // (1024 * 1024)} MiB")
        raw = path.read_bytes()
    except OSError as exc:
        raise YamlFileError(f"unreadable: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(
            f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte offset {exc.start} cannot be decoded ({exc.reason})"
        ) from None
    return parse(text, loader)
