"""What the README and docs/ say of the command line and the workflows is what the code does: every
`gpu-rollout ...` they show names a verb that exists and only options that verb takes, and every workflow they
say runs a verb runs it (in its own steps or the scripts they call)."""

from __future__ import annotations

import re
import shlex
from functools import cache

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR

runner = CliRunner()
DOCS = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
GROUPS = ("fleet", "doctor")  # verbs with verbs of their own
_SPAN = re.compile(r"`((?:\.venv/bin/)?gpu-rollout [^`]+)`")
_BLOCK = re.compile(r"```(?:sh|bash|console)?\n(.*?)```", re.S)


def _commands(text: str) -> list[str]:
    found = [m.group(1) for m in _SPAN.finditer(text)]
    for block in _BLOCK.findall(text):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip().rstrip("\\").strip()
            if line.startswith(("gpu-rollout ", ".venv/bin/gpu-rollout ")):
                found.append(line)
    return found


def _verb_and_flags(command: str) -> tuple[tuple[str, ...], set[str]]:
    try:
        words = shlex.split(command.replace("|", " "))
    except ValueError:
        words = command.split()
    words = words[1:]
    verb = tuple(words[:2]) if words and words[0] in GROUPS and len(words) > 1 and not words[1].startswith("-") \
        else tuple(words[:1])
    flags = {w.split("=", 1)[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w.strip("[]()"))}
    return verb, {f.strip("[]()") for f in flags}


@cache
def _help(verb: tuple[str, ...]) -> str | None:
    result = runner.invoke(app, [*verb, "--help"], terminal_width=200)
    return result.output if result.exit_code == 0 else None


CLAIMS = sorted({(doc.relative_to(PROJECT_DIR).as_posix(), command) for doc in DOCS
                 for command in _commands(doc.read_text(encoding="utf-8"))})


def test_there_are_commands_to_check() -> None:
    assert len(CLAIMS) > 50


@pytest.mark.parametrize(("doc", "command"), CLAIMS)
def test_each_command_the_docs_show_exists_with_its_options(doc: str, command: str) -> None:
    verb, flags = _verb_and_flags(command)
    if not verb or verb[0].startswith("-") or not verb[0].islower() or "<" in verb[0]:
        return  # gpu-rollout --help, --version; a placeholder (`gpu-rollout VERB`, `gpu-rollout <verb>`)
    shown = _help(verb)
    assert shown is not None, f"{doc}: `{command}`: no verb `gpu-rollout {' '.join(verb)}`"
    unknown = sorted(f for f in flags if f not in shown and f != "--help")
    assert unknown == [], f"{doc}: `{command}`: `gpu-rollout {' '.join(verb)}` takes no {', '.join(unknown)}"


def _workflow_text(name: str) -> str:
    """A workflow's text with the text of every repository script it calls."""
    text = (PROJECT_DIR / ".github" / "workflows" / name).read_text(encoding="utf-8")
    for script in re.findall(r"\.github/scripts/[\w.-]+", text):
        path = PROJECT_DIR / script
        if path.is_file():
            text += path.read_text(encoding="utf-8")
    return text


def _workflow_claims() -> list[tuple[str, str, str]]:
    """(doc, workflow, verb) for each sentence of the README that names one workflow and says it runs a verb."""
    text = (PROJECT_DIR / "README.md").read_text(encoding="utf-8")
    claims = []
    for sentence in re.split(r"(?<=[.;])\s+", " ".join(text.split())):
        workflows = re.findall(r"`([\w-]+\.yml)`", sentence)
        verbs = re.findall(r"\(`gpu-rollout ([a-z-]+(?: [a-z-]+)?)`\)|runs `gpu-rollout ([a-z-]+(?: [a-z-]+)?)`",
                           sentence)
        if len(set(workflows)) == 1:
            claims += [("README.md", workflows[0], a or b) for a, b in verbs]
    return claims


@pytest.mark.parametrize(("doc", "workflow", "verb"), _workflow_claims())
def test_each_workflow_runs_the_verb_the_readme_says_it_runs(doc: str, workflow: str, verb: str) -> None:
    text = _workflow_text(workflow)
    words = verb.split()
    command = " ".join(words[:2]) if words[0] in GROUPS else words[0]
    assert re.search(rf"(gpu-rollout|-m rollout|\$ROLLOUT|rollout) {re.escape(command)}\b", text), \
        f"{doc} says {workflow} runs `gpu-rollout {verb}`, but neither it nor a script it calls does"
