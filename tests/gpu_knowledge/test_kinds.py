"""gpu_knowledge.kinds: each Kubernetes kind the project writes or reads, spelled once, and spelled as the API serves it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from kubernetes_validate.utils import schema_contents

from gpu_knowledge import kinds
from engine_contracts import resource_facts as rf
from tests.product_source import product_files
from tests.vocabulary.spellings import docstrings
from tests.conftest import OPERATOR_CRDS, PROJECT_DIR

KUBERNETES_VERSION = "1.33.0"
CRD_RELEASES = ("v26.7.0", "v26.3.3", "v25.10.1")  # tests/data/crds/PROVENANCE.md
ALL = [value for value in vars(kinds).values() if isinstance(value, kinds.Kind)]
BUILT_IN = [kind for kind in ALL if kind.group not in (kinds.NVIDIA_GROUP, kinds.MONITORING_GROUP)]
MONITORING_CRDS = PROJECT_DIR / "tests" / "data" / "monitoring-crds"  # PROVENANCE.md there


def test_every_kind_is_listed_once() -> None:
    # Lease: the fleet train's lock (checks/lease.py); Role, RoleBinding, events.k8s.io Event, ServiceMonitor and
    # PrometheusRule: the in-cluster guard's (components/guard.py).
    assert len(ALL) == 23
    assert len({(k.group, k.kind) for k in ALL}) == len(ALL)
    assert len({(k.group, k.plural) for k in ALL}) == len(ALL)


def test_api_version_is_the_bare_version_in_the_core_group() -> None:
    assert kinds.NODE.api_version == "v1"
    assert kinds.POD_DISRUPTION_BUDGET.api_version == "policy/v1"
    assert kinds.NVIDIA_DRIVER.api_version == "nvidia.com/v1alpha1"
    assert kinds.CLUSTER_ROLE.api_version == "rbac.authorization.k8s.io/v1"


def _openapi_group_version_kinds(kind: kinds.Kind) -> list[dict[str, str]]:
    """What Kubernetes' own OpenAPI schema of the kind (kubernetes-validate's copy) says it is."""
    short = f"{kind.group.split('.')[0]}-{kind.version}" if kind.group else kind.version
    try:
        schema = schema_contents(f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local/{kind.kind.lower()}-{short}.json",
                                 KUBERNETES_VERSION)
    except FileNotFoundError:
        return []
    return list(schema["x-kubernetes-group-version-kind"])


@pytest.mark.parametrize("kind", BUILT_IN, ids=lambda k: k.kind)
def test_the_built_in_kinds_are_kubernetes_own(kind: kinds.Kind) -> None:
    assert {"group": kind.group, "version": kind.version, "kind": kind.kind} in _openapi_group_version_kinds(kind)
    # The plural is the kind's name in lower case, pluralised (what the API's discovery serves for these).
    assert kind.plural.startswith(kind.kind.lower().removesuffix("y"))


def test_the_lookup_finds_no_kind_kubernetes_does_not_have() -> None:
    assert _openapi_group_version_kinds(kinds.Kind("policy", "v1beta2", "PodDisruptionBudget", "-", True)) == []
    assert {"group": "rbac.example.io", "version": "v1", "kind": "ClusterRole"} not in _openapi_group_version_kinds(
        kinds.Kind("rbac.example.io", "v1", "ClusterRole", "clusterroles", False))


@pytest.mark.parametrize("release", CRD_RELEASES)
@pytest.mark.parametrize("kind", [kinds.CLUSTER_POLICY, kinds.NVIDIA_DRIVER], ids=lambda k: k.kind)
def test_the_operator_kinds_are_what_its_crds_define(release: str, kind: kinds.Kind) -> None:
    crd = yaml.safe_load((OPERATOR_CRDS / release / f"{kind.group}_{kind.plural}.yaml").read_text())["spec"]
    assert (crd["group"], crd["names"]["kind"], crd["names"]["plural"]) == (kind.group, kind.kind, kind.plural)
    assert crd["scope"] == ("Namespaced" if kind.namespaced else "Cluster")
    assert kind.version in [v["name"] for v in crd["versions"] if v.get("served")]


@pytest.mark.parametrize("kind", [kinds.SERVICE_MONITOR, kinds.PROMETHEUS_RULE], ids=lambda k: k.kind)
def test_the_monitoring_kinds_are_what_the_prometheus_operator_crds_define(kind: kinds.Kind) -> None:
    crd = yaml.safe_load((MONITORING_CRDS / f"{kind.group}_{kind.plural}.yaml").read_text())["spec"]
    assert (crd["group"], crd["names"]["kind"], crd["names"]["plural"]) == (kind.group, kind.kind, kind.plural)
    assert crd["scope"] == "Namespaced" and kind.namespaced
    assert kind.version in [v["name"] for v in crd["versions"] if v.get("served")]


def test_the_monitoring_crd_copies_are_the_ones_their_provenance_names() -> None:
    import hashlib

    notes = (MONITORING_CRDS / "PROVENANCE.md").read_text()
    listed = dict(re.findall(r"^\| (monitoring\.coreos\.com_\w+\.yaml) \| ([0-9a-f]{64}) \|$", notes, re.MULTILINE))
    files = {p.name: p for p in MONITORING_CRDS.glob("*.yaml")}
    assert set(listed) == set(files) and len(files) == 2
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], name


def test_the_type_tokens_are_pulumi_kubernetes_spelling_of_the_kinds() -> None:
    assert rf.CONFIG_MAP == "kubernetes:core/v1:ConfigMap"
    assert rf.PDB == "kubernetes:policy/v1:PodDisruptionBudget"
    assert rf.NVIDIA_DRIVER == "kubernetes:nvidia.com/v1alpha1:NVIDIADriver"
    assert rf.CLUSTER_POLICY_CR == "kubernetes:nvidia.com/v1:ClusterPolicy"
    assert rf.CLUSTER_POLICY_PATCH == "kubernetes:nvidia.com/v1:ClusterPolicyPatch"


# ---------------------------------------------------------------- no group, version or plural outside gpu_knowledge/kinds.py

HOME = Path("gpu_knowledge/kinds.py")
# workload/ is left out: it is shipped to a pod alone and imports nothing of the project (its one API call
# patches a node). The fake API server in tests/ plays the API server and keeps its own spelling.
# Spellings that name a kind and nothing else here: an apiVersion with a group, a group that is a domain ("apps"
# and "policy" are words too), a plural that is no common word ("nodes", "pods", "events", "evictions" also key JSON documents).
API_VERSIONS = {k.api_version for k in ALL if k.group}
GROUPS = {k.group for k in ALL if "." in k.group}
PLURALS = {k.plural for k in ALL} - {"nodes", "pods", "events", "namespaces", "evictions"}


def stray_kind_spellings(source: str, module: str) -> list[str]:
    tree = ast.parse(source)
    prose = docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            if (text in GROUPS or text in PLURALS or any(version in text for version in API_VERSIONS)
                    or "kubernetes:core/" in text):
                hits.append(f"{module}:{node.lineno}: {text!r}")
    return hits


def test_no_product_module_spells_a_kind_s_group_version_or_plural() -> None:
    files = product_files(home=HOME, leave_out=("workload",))
    assert len(files) > 50 and PROJECT_DIR / "checks" / "kube.py" in files
    stray = [hit for f in files for hit in stray_kind_spellings(f.read_text(encoding="utf-8"),
                                                                 f.relative_to(PROJECT_DIR).as_posix())]
    assert stray == [], f"use gpu_knowledge.kinds: {stray}"


@pytest.mark.parametrize(("source", "found"), [
    ('CustomResource("x", api_version="nvidia.com/v1alpha1", kind="NVIDIADriver")', ["'nvidia.com/v1alpha1'"]),
    ('TOKEN = "kubernetes:nvidia.com/v1:ClusterPolicy"', ["'kubernetes:nvidia.com/v1:ClusterPolicy'"]),
    ('TOKEN = "kubernetes:core/v1:Namespace"', ["'kubernetes:core/v1:Namespace'"]),
    ('{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"}', ["'rbac.authorization.k8s.io'"]),
    ('Resource("nvidia.com", "v1", "clusterpolicies", False)', ["'nvidia.com'", "'clusterpolicies'"]),
    ('def f():\n    """Lists nvidia.com/v1alpha1 nvidiadrivers."""\n', []),  # prose
    ('{"nodes": 4, "pods": 2}', []),
    ('GPU_PRODUCT = "nvidia.com/gpu.product"', []),
])
def test_the_search_finds_a_kind_spelled_where_it_is_one(source: str, found: list[str]) -> None:
    assert [hit.split(": ", 1)[1] for hit in stray_kind_spellings(source, "example.py")] == found
