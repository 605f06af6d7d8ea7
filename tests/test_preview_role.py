"""The preview identity's ClusterRole in docs/cicd.md reads every kind the program registers or reads (an engine
preview refreshes each one: a kind it cannot get fails the preview), and never Secrets."""

from __future__ import annotations

import re

import pytest
import yaml

from gpu_knowledge import kinds
from preview.run import run_program
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR, stack_config

_TOKEN = re.compile(r"^kubernetes:(?:(?P<group>[a-z0-9.-]+)/)?(?P<version>v[0-9a-z]+):(?P<kind>[A-Za-z]+)$")
# The Helm release keeps its record in Secrets, which the preview may not read (docs/cicd.md says so).
NOT_READ_BY_THE_PREVIEW = {"helm.sh"}


def _role() -> dict[str, set[str]]:
    text = (PROJECT_DIR / "docs" / "cicd.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load_all(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    (role,) = [d for docs in blocks for d in docs if d and d.get("kind") == "ClusterRole"
               and d["metadata"]["name"] == "gpu-rollout-preview"]
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        for group in rule["apiGroups"]:
            granted.setdefault(group, set()).update(rule["resources"])
    return granted


def _plural(group: str, kind: str) -> str:
    found = [k for k in vars(kinds).values() if isinstance(k, kinds.Kind) and k.group == group and k.kind == kind]
    assert found, f"{group}/{kind} is not in gpu_knowledge/kinds.py"
    return found[0].plural


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_preview_role_reads_every_kind_the_program_touches(stack: str) -> None:
    granted = _role()
    run = run_program(stack_config(stack), stack)
    # Pulumi's tokens spell the core group "core"; RBAC spells it "".
    # A server-side apply patch (ClusterPolicyPatch) reads its kind's objects.
    touched = {("" if m["group"] == "core" else m["group"] or "", m["kind"].removesuffix("Patch"))
               for r in run.resources if (m := _TOKEN.match(r.type))}
    touched.add(("", "Namespace"))  # the cluster identity's read of kube-system (not recorded as a resource)
    missing = sorted(f"{g or 'core'}/{k}" for g, k in touched
                     if g not in NOT_READ_BY_THE_PREVIEW and _plural(g, k) not in granted.get(g, set()))
    assert missing == []


def test_the_preview_role_never_reads_secrets() -> None:
    assert "secrets" not in _role().get("", set())
