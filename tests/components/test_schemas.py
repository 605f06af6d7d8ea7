"""Rendered objects validate against the real schemas: Kubernetes OpenAPI and the GPU Operator's CRDs."""

from __future__ import annotations

import re

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from preview.run import ProgramRun, run_program
from tests.conftest import EXAMPLE_STACKS, OPERATOR_CRDS, edited

KUBERNETES_VERSION = "1.33.0"
# Operator releases whose CRDs travel with the tests (tests/data/crds/PROVENANCE.md).
CRD_RELEASES = ("v26.7.0", "v26.3.3", "v25.10.1")


def _crd_schema(operator: str, plural: str) -> dict[str, Any]:
    path = OPERATOR_CRDS / operator / f"nvidia.com_{plural}.yaml"
    document = yaml.safe_load(Path(path).read_text())
    (version,) = [v for v in document["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def _validate(instance: Any, schema: dict[str, Any]) -> None:
    # OpenAPI v3 structural schemas are JSON Schema plus x-kubernetes-* keywords, which validators ignore.
    jsonschema.Draft7Validator(schema).validate(instance)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_pdbs_validate_against_kubernetes_openapi(rendered: dict[str, ProgramRun], stack: str) -> None:
    pdbs = rendered[stack].of_type("kubernetes:policy/v1:PodDisruptionBudget")
    assert pdbs
    for pdb in pdbs:
        manifest = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", **pdb.inputs}
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_openapi_validation_catches_a_bad_pdb() -> None:
    manifest = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "x", "namespace": "inference"},
        "spec": {"minAvailable": 1, "selektor": {"matchLabels": {"app": "x"}}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def _nvidia_drivers(run: ProgramRun) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", **copy.deepcopy(r.inputs)}
        for r in run.of_type("kubernetes:nvidia.com/v1alpha1:NVIDIADriver")
    ]


@pytest.mark.parametrize("operator", sorted(CRD_RELEASES))
def test_nvidia_drivers_validate_against_the_operator_crd(operator: str) -> None:
    run = run_program(edited("prod", "gpuOperator", lambda o: o.update(chartVersion=operator)), "prod")
    drivers = _nvidia_drivers(run)
    assert len(drivers) == 3
    schema = _crd_schema(operator, "nvidiadrivers")
    known = schema["properties"]["spec"]["properties"]
    for driver in drivers:
        _validate(driver, schema)
        # The API server prunes unknown fields silently, so every field sent must be one the CRD knows.
        assert set(driver["spec"]) <= set(known), set(driver["spec"]) - set(known)
        if "upgradePolicy" in driver["spec"]:
            assert set(driver["spec"]["upgradePolicy"]) <= set(known["upgradePolicy"]["properties"])


def test_crd_schema_knows_pod_deletion_and_rejects_bad_values(rendered: dict[str, ProgramRun]) -> None:
    (driver, *_) = _nvidia_drivers(rendered["prod"])
    policy = driver["spec"]["upgradePolicy"]
    policy["gpuPodDeletion"] = policy.pop("podDeletion")
    schema = _crd_schema("v26.7.0", "nvidiadrivers")
    # The CRD prunes unknown fields rather than rejecting them, so check the field set explicitly too.
    known = set(schema["properties"]["spec"]["properties"]["upgradePolicy"]["properties"])
    assert "gpuPodDeletion" not in known and "podDeletion" in known
    policy["maxParallelUpgrades"] = -1
    with pytest.raises(jsonschema.ValidationError):
        _validate(driver, schema)


def test_cluster_policy_patch_validates_against_the_crd(rendered: dict[str, ProgramRun]) -> None:
    (patch,) = rendered["prod"].of_type("kubernetes:nvidia.com/v1:ClusterPolicyPatch")
    spec_schema = _crd_schema("v26.7.0", "clusterpolicies")["properties"]["spec"]["properties"]
    # A patch is partial by nature: each section it sends must match its schema, every field known.
    for section, value in patch.inputs["spec"].items():
        _validate(value, spec_schema[section])
        assert set(value) <= set(spec_schema[section]["properties"]), section
    upgrade = patch.inputs["spec"]["driver"]["upgradePolicy"]
    assert set(upgrade) <= set(spec_schema["driver"]["properties"]["upgradePolicy"]["properties"])


def test_the_crd_copies_are_the_ones_their_provenance_names() -> None:
    import hashlib

    notes = (OPERATOR_CRDS / "PROVENANCE.md").read_text()
    listed = dict(re.findall(r"^\| (v[\d.]+/nvidia\.com_\w+\.yaml) \| ([0-9a-f]{64}) \|$", notes, re.MULTILINE))
    files = {str(p.relative_to(OPERATOR_CRDS)): p for p in OPERATOR_CRDS.glob("*/*.yaml")}
    assert set(listed) == set(files) and len(files) == 2 * len(CRD_RELEASES)
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], name
