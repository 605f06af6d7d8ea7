"""notifications.webhook.url: a Pulumi secret in the stack file (plain text is refused there, naming the key), which
the program writes into the Secret the stack names in kube-system, where the deploy step and the in-cluster guard
read it; offline, where only the engine could decrypt it, the Secret holds a placeholder, never the ciphertext."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetspec.load import SpecError, load_stack_file, spec_from_config
from fleetspec.notifications import PulumiSecret
from renderers import manifests
from tests.conftest import PROJECT_DIR, as_planned, stack_config

SECRET = "kubernetes:core/v1:Secret"


def _stack_file(tmp_path: Path, url: object) -> Path:
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.canary.yaml").read_text())
    document["config"]["gpu-driver-upgrade:notifications"] = {"webhook": {"kind": "slack", "url": url}}
    path = tmp_path / "Pulumi.canary.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_plain_url_in_a_stack_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as error:
        load_stack_file(_stack_file(tmp_path, "https://hooks.slack.com/services/T/B/x"))
    [problem] = error.value.problems
    assert problem.path == "gpu-driver-upgrade:notifications.webhook.url" and "pulumi config set --secret" in str(problem)


def test_a_pulumi_secret_loads_and_plan_writes_a_placeholder_not_the_ciphertext(tmp_path: Path) -> None:
    spec = load_stack_file(_stack_file(tmp_path, {"secure": "v1:AAAAciphertext"}))
    assert spec.notifications is not None and spec.notifications.webhook is not None
    assert spec.notifications.webhook.url == PulumiSecret(secure="v1:AAAAciphertext")
    config = stack_config("canary")
    config["gpu-driver-upgrade:notifications"] = json.dumps(
        {"webhook": {"kind": "slack", "url": {"secure": "v1:AAAAciphertext"}}})
    [secret] = as_planned("canary", config).of_type(SECRET)
    assert secret.inputs["metadata"] == {"name": "gpu-driver-upgrade-webhook", "namespace": "kube-system"}
    assert secret.inputs["stringData"] == "[secret]"  # a secret in the engine's state, never shown
    assert manifests.webhook_secret(spec_from_config(config)) == (
        {"name": "gpu-driver-upgrade-webhook", "namespace": "kube-system"}, {"url": manifests.OFFLINE_SECRET})


def test_the_engine_s_decrypted_url_goes_into_the_secret() -> None:
    config = stack_config("canary")
    config["gpu-driver-upgrade:notifications"] = json.dumps(
        {"webhook": {"kind": "teams", "secret": "fleet-hook", "url": "https://example.invalid/hook"}})
    [secret] = as_planned("canary", config).of_type(SECRET)
    assert secret.inputs["metadata"]["name"] == "fleet-hook" and secret.inputs["stringData"] == "[secret]"
    assert manifests.webhook_secret(spec_from_config(config)) == (
        {"name": "fleet-hook", "namespace": "kube-system"}, {"url": "https://example.invalid/hook"})


def test_no_url_no_secret_of_the_program() -> None:
    config = stack_config("canary")
    config["gpu-driver-upgrade:notifications"] = json.dumps({"webhook": {"kind": "json"}})
    assert as_planned("canary", config).of_type(SECRET) == []
