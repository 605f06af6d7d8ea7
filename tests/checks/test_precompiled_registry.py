"""kernel-precompiled asks the registry (issue 36, point 3): for an operator pool on precompiled kernel modules,
preflight asks the driver image's registry, over the OCI distribution API and its token flow, for
``<branch>-<kernel>-<os>`` of the target branch for every kernel of the pool's nodes; a missing one fails naming
the kernel. The registry is tests/registry_server.py on loopback (TLS with the test's own CA), anonymous or with
the operator's pull secret read from the fake cluster."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

from checks import kube as k
from checks.preflight import run_preflight
from checks.registry import DOCKER_HUB, Presence, Registry, logins_of, parse_image
from checks.results import Status
from fleetspec.model import FleetSpec
from tests.fakekube.server import FakeKube
from tests.registry_server import serve

KERNEL = "5.15.0-1079-azure"  # what the fixture's nodes run
TAG = f"580-{KERNEL}-ubuntu22.04"  # gput4 moves to 580.173.02


def _precompiled(fake: FakeKube, secret: str | None = None) -> None:
    """gput4's NVIDIADriver on precompiled images, pulled with ``secret`` where given."""
    spec = {"usePrecompiled": True, **({"imagePullSecrets": [secret]} if secret else {})}
    fake.update("nvidiadrivers", "gpu-gput4", {"spec": spec})


def _mirror(spec: FleetSpec, host: str) -> FleetSpec:
    return spec.model_copy(update={"gpuOperator": spec.gpuOperator.model_copy(
        update={"driverRepository": f"{host}/nvidia"})})


def _judge(kube: k.Kube, spec: FleetSpec, registry: Registry | None) -> tuple[Status, str]:
    (found,) = [r for r in run_preflight(kube, spec, None, registry)
                if r.id == "kernel-precompiled" and r.subject == "gput4"]
    return found.status, found.message


def _pull_secret(fake: FakeKube, name: str, host: str, user: str, password: str) -> None:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = json.dumps({"auths": {f"https://{host}": {"auth": auth}}}).encode()
    fake.add({"kind": "Secret", "metadata": {"name": name, "namespace": "gpu-operator"},
              "type": "kubernetes.io/dockerconfigjson",
              "data": {".dockerconfigjson": base64.b64encode(config).decode()}})


def test_an_image_the_registry_has_passes_through_its_token_flow(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                                 tmp_path: Path) -> None:
    _precompiled(prod)
    with serve(tmp_path, {("nvidia/driver", TAG)}) as registry:
        status, message = _judge(kube, _mirror(prod_spec, registry.host), Registry(ca_file=registry.ca_file))
    assert status == Status.PASS, message
    assert f"{TAG} ({registry.host} has it (asked anonymously))" in message
    methods = [(method, path.split("?")[0], "authorization" in headers) for method, path, headers in registry.seen]
    assert methods == [("HEAD", f"/v2/nvidia/driver/manifests/{TAG}", False), ("GET", "/token", False),
                       ("HEAD", f"/v2/nvidia/driver/manifests/{TAG}", True)]


def test_an_image_the_registry_does_not_have_fails_naming_the_kernel(prod: FakeKube, kube: k.Kube,
                                                                     prod_spec: FleetSpec, tmp_path: Path) -> None:
    _precompiled(prod)
    with serve(tmp_path, {("nvidia/driver", f"570-{KERNEL}-ubuntu22.04")}) as registry:  # the old branch only
        status, message = _judge(kube, _mirror(prod_spec, registry.host), Registry(ca_file=registry.ca_file))
    assert status == Status.FAIL
    assert f"the target branch 580 has no precompiled driver for kernel {KERNEL} (" in message
    assert f"{registry.host}/nvidia/driver:{TAG}: {registry.host} answers 404" in message


def test_a_private_registry_is_asked_with_the_operators_pull_secret(prod: FakeKube, kube: k.Kube,
                                                                    prod_spec: FleetSpec, tmp_path: Path) -> None:
    with serve(tmp_path, {("nvidia/driver", TAG)}, login=("$oauthtoken", "ngc-key")) as registry:
        spec = _mirror(prod_spec, registry.host)
        _precompiled(prod)
        status, message = _judge(kube, spec, Registry(ca_file=registry.ca_file))
        assert status == Status.WARN  # no secret: the registry refuses an anonymous token, so nothing is known
        assert "token service refused a pull token anonymously (HTTP 401)" in message
        _precompiled(prod, secret="ngc")
        _pull_secret(prod, "ngc", registry.host, "$oauthtoken", "ngc-key")
        status, message = _judge(kube, spec, Registry(ca_file=registry.ca_file))
    assert status == Status.PASS, message
    assert "asked with pull secret gpu-operator/ngc" in message


def test_a_pull_secret_that_cannot_be_read_is_named(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                    tmp_path: Path) -> None:
    _precompiled(prod, secret="absent")
    with serve(tmp_path, set()) as registry:
        status, message = _judge(kube, _mirror(prod_spec, registry.host), Registry(ca_file=registry.ca_file))
    assert status == Status.FAIL
    assert "pull secret gpu-operator/absent does not exist; asked anonymously" in message


def test_an_image_the_operator_runs_is_not_asked_for(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                     tmp_path: Path) -> None:
    _precompiled(prod)
    labels_ = {"app": "nvidia-gpu-driver-precompiled", "nvidia.com/precompiled": "true"}
    with serve(tmp_path, set()) as registry:
        prod.add({"kind": "DaemonSet", "metadata": {"name": "nvidia-gpu-driver-precompiled",
                                                   "namespace": "gpu-operator", "labels": labels_},
                  "spec": {"selector": {"matchLabels": labels_}, "template": {"metadata": {"labels": labels_}, "spec": {
                      "nodeSelector": {"feature.node.kubernetes.io/kernel-version.full": KERNEL},
                      "containers": [{"name": "driver", "image": f"{registry.host}/nvidia/driver:{TAG}"}]}}}})
        status, message = _judge(kube, _mirror(prod_spec, registry.host), Registry(ca_file=registry.ca_file))
    assert status == Status.PASS and f"{TAG} (running)" in message
    assert not [path for _, path, _ in registry.seen if TAG in path]  # (the held pools' 570 images were asked)


def test_a_registry_not_asked_or_not_reachable_is_no_pass(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _precompiled(prod)
    status, message = _judge(kube, prod_spec, None)
    assert status == Status.WARN and "the registry was not asked" in message
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    status, message = _judge(kube, _mirror(prod_spec, f"127.0.0.1:{port}"), Registry(timeout=2))
    assert status == Status.WARN and f"registry 127.0.0.1:{port} not reachable" in message


def test_image_names_read_as_the_kubelet_reads_them() -> None:
    assert str(parse_image(f"nvcr.io/nvidia/driver:{TAG}")) == f"nvcr.io/nvidia/driver:{TAG}"
    hub = parse_image("nvidia/driver:580")
    assert (hub.registry, hub.repository, hub.tag) == (DOCKER_HUB, "nvidia/driver", "580")
    assert parse_image("busybox").repository == "library/busybox" and parse_image("busybox").tag == "latest"
    assert parse_image("localhost:5000/driver:1").registry == "localhost:5000"


def test_a_docker_config_login_reads_by_host() -> None:
    config = {"auths": {"https://index.docker.io/v1/": {"username": "u", "password": "p"}}}
    secret = {"data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}}
    (host, login), = logins_of(secret, "pull secret ns/hub").items()
    assert host == DOCKER_HUB and (login.username, login.password) == ("u", "p")
    assert Presence.MISSING.value == "missing"


def test_the_train_s_preflight_asks_the_registry_and_a_missing_image_holds_the_stack(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec, tmp_path: Path) -> None:
    """The train gates its ups on what preflight fails (checks.fleet.preflight_failures): given the registry, a
    kernel with no precompiled driver of the target branch is one of them; without it, nothing is known and
    nothing is claimed (a warning, which gates nothing)."""
    from checks.fleet import preflight_failures

    _precompiled(prod)
    spec = _mirror(prod_spec, "registry.invalid")
    assert not [r for r in preflight_failures(kube, spec, None) if r.id == "kernel-precompiled"]
    with serve(tmp_path, {("nvidia/driver", f"570-{KERNEL}-ubuntu22.04")}) as registry:
        failed = preflight_failures(kube, _mirror(prod_spec, registry.host), None,
                                    registry=Registry(ca_file=registry.ca_file))
    assert [(r.id, r.subject) for r in failed if r.id == "kernel-precompiled"] == [("kernel-precompiled", "gput4")]
