"""Issue 12 point 4: a kubeconfig that cannot be used is refused with exit 2 and one line naming the file (and
the context, cluster, user or credentials plugin), before any request; never a traceback. A working exec
plugin, by name on PATH or by a path relative to the kubeconfig, still works."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from tests.conftest import PROJECT_DIR
from tests.fakekube.server import FakeKube

runner = CliRunner()
VERBS = (("preflight",), ("watch", "--once"), ("pause",), ("resume",))


def kubeconfig_doc(fake: FakeKube) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
            "users": [{"name": "tester", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}]}


def with_exec(command: str) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        doc["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                            "command": command, "args": ["get-token"]}}
    return edit


def live(verb: tuple[str, ...], *args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, [verb[0], "--stack", "prod", *args, *verb[1:]], env=env)


# (name, file content (bytes) or an edit of the fake's kubeconfig, extra flags, what stderr must name)
CASES: list[tuple[str, Any, tuple[str, ...], tuple[str, ...]]] = [
    ("not-yaml", b"clusters: [{{{:\n", (), ("is not valid YAML", "line 1")),
    ("not-utf8", b"\xff\xfeapiVersion: v1\n", (), ("is not UTF-8: byte 0xff at byte offset 0",)),
    ("empty", b"", (), ("must be a YAML mapping", "not empty")),
    ("a-list", b"- apiVersion\n- v1\n", (), ("must be a YAML mapping", "not a list")),
    ("contexts-a-number", lambda d: d.update(contexts=5), (), ("contexts must be a list, not a number",)),
    ("cluster-a-string", lambda d: d["clusters"].__setitem__(0, "fake"), (),
     ("clusters[0] must be a mapping with name and cluster, not a string",)),
    ("context-without-body", lambda d: d["contexts"][0].pop("context"), (),
     ("contexts[0] (fake) must have a context mapping",)),
    ("context-of-a-missing-cluster", lambda d: d["contexts"][0]["context"].update(cluster="gone"), (),
     ("context fake names cluster gone, which is not in its clusters",)),
    ("cluster-without-server", lambda d: d["clusters"][0]["cluster"].pop("server"), (),
     ("cluster fake of context fake has no server URL",)),
    ("current-context-missing", lambda d: d.update({"current-context": "prod-aks"}), (),
     ("has no context prod-aks (its contexts: fake)",)),
    ("no-current-context", lambda d: d.pop("current-context"), (), ("sets no current-context", "--context")),
    ("flag-context-missing", lambda d: None, ("--context", "nope"), ("has no context nope (its contexts: fake)",)),
    ("exec-plugin-not-installed", with_exec("kubelogin-not-installed"), (),
     ("user tester of context fake", "credentials plugin 'kubelogin-not-installed' is not installed or not on PATH")),
    ("exec-plugin-path-missing", with_exec("./bin/get-token"), (),
     ("credentials plugin './bin/get-token' is not installed",)),
    ("exec-without-command", lambda d: d["users"][0].update(user={"exec": {"apiVersion": "v1"}}), (),
     ("exec has no command",)),
    ("token-a-list", lambda d: d["users"][0]["user"].update(token=["a"]), (),
     ("user tester: token must be a string, not a list",)),
    ("server-a-number", lambda d: d["clusters"][0]["cluster"].update(server=5), (), ("has no server URL",)),
    ("server-not-a-url", lambda d: d["clusters"][0]["cluster"].update(server="x" * 100), (),
     ("cluster fake: server must be an https:// URL, not 'xxxx", "x'...")),
]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
@pytest.mark.parametrize(("content", "flags", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_broken_kubeconfig_exits_2_naming_it(prod: FakeKube, tmp_path: Path, verb: tuple[str, ...], content: Any,
                                               flags: tuple[str, ...], named: tuple[str, ...]) -> None:
    path = tmp_path / "kubeconfig"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        doc = kubeconfig_doc(prod)
        content(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")
    result = live(verb, "--kubeconfig", str(path), *flags)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("--kubeconfig/--context: ") and str(path) in line
    for part in named:
        assert part in line
    assert sum(prod.counts.values()) == 0  # refused before any request


def test_a_missing_context_declared_by_the_stack_is_named(fake: FakeKube, tmp_path: Path) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig", context="elsewhere")
    text = (PROJECT_DIR / "Pulumi.existing-prod.yaml").read_text(encoding="utf-8").replace(
        "    existing:\n      context: lab-gpu-1\n", f"    existing:\n      context: lab-gpu-1\n      kubeconfig: {kubeconfig}\n")
    stack = tmp_path / "Pulumi.existing-prod.yaml"
    stack.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["preflight", "--stack-file", str(stack)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"--kubeconfig/--context: kubeconfig {kubeconfig} has no context lab-gpu-1 "
                                     "(its contexts: elsewhere)")


PLUGIN = """#!/bin/sh
printf '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}}'
"""


@pytest.mark.parametrize("where", ["on-path", "relative"])
def test_an_installed_exec_plugin_is_used(prod: FakeKube, tmp_path: Path, where: str) -> None:
    plugin = tmp_path / "bin" / "get-token"
    plugin.parent.mkdir()
    plugin.write_text(PLUGIN, encoding="utf-8")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    doc = kubeconfig_doc(prod)
    with_exec("get-token" if where == "on-path" else "./bin/get-token")(doc)
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(doc), encoding="utf-8")
    env = {"PATH": f"{plugin.parent}:/usr/bin:/bin"} if where == "on-path" else None
    result = live(("preflight",), "--kubeconfig", str(path), "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stack"] == "prod" and prod.counts["list"] > 0
