"""The validation program, run for real on the CPU: its own ``main`` against an OpenAI-compatible server on
loopback and a fake NVML imported as ``pynvml``; what it writes to the node is read back and parsed as a
reader (`gpu-rollout verify`) would. Each failure mode gives exit 1, outcome failed and the check that saw it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.workload.conftest import MODEL, NODE, TARGET, Run, program_config
from tests.workload.fake_nvml import FakeGpu, FakeNvml
from tests.workload.kube_api import KubeApi
from tests.workload.openai_server import OpenAIServer
from workload import openai, result

CHECKOUT = Path(__file__).resolve().parents[2]
FAKE_NVML_PATH = Path(__file__).parent / "fakenvml"


def statuses(run: Run) -> dict[str, str]:
    assert run.result is not None
    return {c.id: c.status for c in run.result.checks}


def digest_of(server: OpenAIServer, max_tokens: int = 16) -> str:
    return openai.digest("".join(server.behaviour.tokens(max_tokens, ignore_eos=False)))


def baseline(server: OpenAIServer, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"timeToFirstTokenSeconds": 1.0, "tokensPerSecond": 50.0,
                              "tokenDigest": digest_of(server), "recordedOn": "570.195.03"}
    values.update(changes)
    return values


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------- pass


def test_a_healthy_node_passes_and_the_node_records_it(gpu: FakeNvml, server: OpenAIServer, kube: KubeApi,
                                                       run_validation: Callable[..., Run]) -> None:
    run = run_validation(program_config(server.url, baseline=baseline(server)))
    assert run.code == result.EXIT_PASSED
    assert run.result is not None and run.result.outcome == result.PASSED
    assert statuses(run) == {check: result.PASS for check in result.CHECKS}
    labels = run.node["metadata"]["labels"]
    assert labels[result.LABEL_VALIDATED_DRIVER] == TARGET and labels[result.LABEL_OUTCOME] == "passed"
    assert labels["gpu.example.com/pool"] == "l40s-canary"  # a merge patch: the node's own labels stay
    # One PATCH, a merge patch, authenticated with the token file's token.
    (request,) = kube.requests
    assert (request.method, request.path) == ("PATCH", f"/api/v1/nodes/{NODE}")
    assert request.content_type == "application/merge-patch+json"
    assert request.authorization == "Bearer validation-token"
    assert set(request.body["metadata"]) == {"labels", "annotations"}
    assert "spec" not in request.body and result.HOLD_ANNOTATION not in request.body["metadata"]["annotations"]
    written = run.result
    assert (written.node, written.pool, written.targetDriver, written.stage, written.cluster) == (
        NODE, "l40s-canary", TARGET, "canary", "lab-gpu-1")
    assert written.gpus == [{"index": 0, "name": "NVIDIA L40S", "uuid": gpu.gpus[0].uuid}]
    measured = written.measurements
    assert measured["tokenDigest"] == digest_of(server)
    assert 0 < measured["timeToFirstTokenSeconds"] < 1.0 and measured["tokensPerSecond"] > 50
    assert len(measured["samples"]) == 3
    assert written.program == result.program_digest(
        {name: (CHECKOUT / "workload" / name).read_bytes() for name in result.PROGRAM_FILES})
    # The server saw: one greedy completion (digest), one warm-up and three timed streams of exactly maxTokens.
    requests = server.behaviour.requests
    assert [r["stream"] for r in requests] == [False, True, True, True, True]
    assert all(r["temperature"] == 0 and r["max_tokens"] == 16 and r["prompt"] == "Count from one to ten."
               for r in requests)
    assert all(r["ignore_eos"] and r["stream_options"] == {"include_usage": True} for r in requests[1:])
    # NVML was shut down; the event set freed.
    assert gpu.calls[-1] == "nvmlShutdown" and gpu.event_sets == []


def test_without_a_baseline_the_relative_checks_are_skipped_and_the_floor_still_holds(
        gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    run = run_validation(program_config(server.url))
    assert run.code == 0
    assert statuses(run)["token-digest"] == result.SKIPPED
    assert statuses(run)["time-to-first-token"] == result.SKIPPED
    assert statuses(run)["tokens-per-second"] == result.PASS
    assert run.result is not None
    digest_check = run.result.check("token-digest")
    assert digest_check is not None and digest_of(server) in digest_check.message  # ready to be recorded


# ---------------------------------------------------------------- each failure mode


def test_wrong_driver_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    gpu.driver = "570.195.03"
    run = run_validation(program_config(server.url))
    assert run.code == result.EXIT_FAILED
    assert run.result is not None and run.result.outcome == result.FAILED
    assert run.node["metadata"]["labels"][result.LABEL_OUTCOME] == "failed"
    # The node is marked validated for the target all the same: the job's pod leaves and frees the GPUs.
    assert run.node["metadata"]["labels"][result.LABEL_VALIDATED_DRIVER] == TARGET
    check = run.result.check("driver-version")
    assert check is not None and check.status == result.FAIL
    assert check.evidence == {"reported": "570.195.03", "target": TARGET}
    assert [c.id for c in run.result.checks if c.status == result.FAIL] == ["driver-version"]


def test_a_failed_validation_cordons_its_node_and_records_why(gpu: FakeNvml, server: OpenAIServer, kube: KubeApi,
                                                              run_validation: Callable[..., Run]) -> None:
    gpu.driver = "570.195.03"
    run = run_validation(program_config(server.url))
    assert run.code == result.EXIT_FAILED and run.result is not None
    assert run.node["spec"] == {"unschedulable": True}
    hold = result.parse_hold(run.node["metadata"]["annotations"][result.HOLD_ANNOTATION])
    assert (hold.node, hold.pool, hold.stage, hold.driver, hold.checks) == (
        NODE, "l40s-canary", "canary", TARGET, ("driver-version",))
    assert hold.at == run.result.finishedAt and "not the target" in hold.message
    (request,) = kube.requests  # one patch: result, labels and hold together
    assert set(request.body) == {"metadata", "spec"}


def test_a_branch_target_accepts_its_releases_only(gpu: FakeNvml, server: OpenAIServer,
                                                   run_validation: Callable[..., Run]) -> None:
    assert run_validation(program_config(server.url, targetDriver="580")).code == 0
    gpu.driver = "575.57.08"
    run = run_validation(program_config(server.url, targetDriver="580"))
    assert run.code == 1 and statuses(run)["driver-version"] == result.FAIL


def test_lost_gpu_fails(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer,
                        run_validation: Callable[..., Run]) -> None:
    fake = FakeNvml.uniform(8)
    fake.gpus[5].lost = True  # fell off the bus: NVML lists seven
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    run = run_validation(program_config(server.url, gpusPerNode=8))
    assert run.code == 1
    check = run.result.check("gpu-count") if run.result else None
    assert check is not None and check.status == result.FAIL
    assert (check.evidence["seen"], check.evidence["expected"]) == (7, 8)
    assert [c.id for c in run.result.checks if c.status == result.FAIL] == ["gpu-count"]


def test_digest_mismatch_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    recorded = "sha256:" + "0" * 64
    run = run_validation(program_config(server.url, baseline=baseline(server, tokenDigest=recorded)))
    assert run.code == 1
    check = run.result.check("token-digest") if run.result else None
    assert check is not None and check.status == result.FAIL
    assert check.evidence == {"measured": digest_of(server), "recorded": recorded}


def test_slow_first_token_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    server.behaviour.first_token_delay = 0.2  # baseline 0.1s + 50% allows 0.15s
    run = run_validation(program_config(server.url, baseline=baseline(server, timeToFirstTokenSeconds=0.1)))
    assert run.code == 1
    assert statuses(run)["time-to-first-token"] == result.FAIL
    assert statuses(run)["tokens-per-second"] == result.PASS
    check = run.result.check("time-to-first-token") if run.result else None
    assert check is not None and check.evidence["limit"] == pytest.approx(0.15)
    assert check.evidence["measured"] >= 0.2


def test_slow_decoding_fails_against_the_baseline(gpu: FakeNvml, server: OpenAIServer,
                                                  run_validation: Callable[..., Run]) -> None:
    server.behaviour.token_delay = 0.02  # at most 50 tokens/s; the baseline says 200, -10% allows 180
    run = run_validation(program_config(server.url, baseline=baseline(server, tokensPerSecond=200)))
    assert run.code == 1
    assert statuses(run)["tokens-per-second"] == result.FAIL
    assert statuses(run)["time-to-first-token"] == result.PASS
    check = run.result.check("tokens-per-second") if run.result else None
    assert check is not None and check.evidence["floor"] == pytest.approx(180) and check.evidence["measured"] <= 50


def test_slow_decoding_fails_the_floor_without_a_baseline(gpu: FakeNvml, server: OpenAIServer,
                                                          run_validation: Callable[..., Run]) -> None:
    server.behaviour.token_delay = 0.02
    run = run_validation(program_config(server.url, minTokensPerSecond=100))
    assert run.code == 1 and statuses(run)["tokens-per-second"] == result.FAIL


def test_xid_during_the_run_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    server.behaviour.on_completion = lambda body: gpu.xid(0, 79) if body.get("stream") else None
    run = run_validation(program_config(server.url))
    assert run.code == 1
    check = run.result.check("no-xid") if run.result else None
    assert check is not None and check.status == result.FAIL
    assert {e["xid"] for e in check.evidence["xids"]} == {79}
    assert all(e["gpu"] == 0 and e["uuid"] == gpu.gpus[0].uuid for e in check.evidence["xids"])
    assert "Xid 79 on GPU 0" in check.message


def test_an_xid_before_the_run_is_not_the_runs(gpu: FakeNvml, server: OpenAIServer,
                                               run_validation: Callable[..., Run]) -> None:
    gpu.initialised = True
    gpu.xid(0, 45)  # during the upgrade's pod deletion, before the program registered for events
    gpu.initialised = False
    run = run_validation(program_config(server.url))
    assert run.code == 0 and statuses(run)["no-xid"] == result.PASS


def test_new_uncorrectable_ecc_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    gpu.gpus[0].ecc_uncorrected = 2  # from before the run: not this run's
    server.behaviour.on_completion = lambda body: gpu.uncorrectable_ecc(0) if not body.get("stream") else None
    run = run_validation(program_config(server.url))
    assert run.code == 1
    check = run.result.check("no-new-uncorrectable-ecc") if run.result else None
    assert check is not None and check.status == result.FAIL
    assert check.evidence["counters"] == [{"gpu": 0, "before": 2, "after": 3}]


def test_row_remap_failure_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    server.behaviour.on_completion = lambda body: gpu.row_remap_failure(0)
    run = run_validation(program_config(server.url))
    assert run.code == 1 and statuses(run)["no-row-remap-failure"] == result.FAIL


def test_counters_nvml_does_not_support_are_skipped_not_failed(monkeypatch: pytest.MonkeyPatch,
                                                               server: OpenAIServer,
                                                               run_validation: Callable[..., Run]) -> None:
    fake = FakeNvml("580.173.02", [FakeGpu(name="Tesla T4", ecc_uncorrected=None, remapped_correctable=None,
                                           events_supported=False)])
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    run = run_validation(program_config(server.url))
    assert run.code == 0
    assert {k: statuses(run)[k] for k in ("no-xid", "no-new-uncorrectable-ecc", "no-row-remap-failure")} == {
        "no-xid": result.SKIPPED, "no-new-uncorrectable-ecc": result.SKIPPED, "no-row-remap-failure": result.SKIPPED}


def test_server_not_answering_fails(gpu: FakeNvml, run_validation: Callable[..., Run]) -> None:
    config = program_config(f"http://127.0.0.1:{free_port()}")
    config["server"]["startupTimeoutSeconds"] = 1
    started = time.monotonic()
    run = run_validation(config)
    assert time.monotonic() - started < 10
    assert run.code == 1
    check = run.result.check("server-ready") if run.result else None
    assert check is not None and check.status == result.FAIL and "not ready after 1s" in check.message
    for later in ("model-answers", "token-digest", "time-to-first-token", "tokens-per-second"):
        assert statuses(run)[later] == result.SKIPPED
    # The GPU checks still ran and passed: the evidence says where it broke.
    assert statuses(run)["driver-version"] == result.PASS and statuses(run)["no-xid"] == result.PASS


def test_server_never_ready_fails(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run]) -> None:
    server.behaviour.ready = False
    config = program_config(server.url)
    config["server"]["startupTimeoutSeconds"] = 1
    run = run_validation(config)
    check = run.result.check("server-ready") if run.result else None
    assert run.code == 1 and check is not None and "/health answered 503" in check.message


def test_server_serving_another_model_fails(gpu: FakeNvml, server: OpenAIServer,
                                            run_validation: Callable[..., Run]) -> None:
    config = program_config(server.url, model="another-model")
    config["server"]["startupTimeoutSeconds"] = 1
    run = run_validation(config)
    check = run.result.check("server-ready") if run.result else None
    assert run.code == 1 and check is not None and "not 'another-model'" in check.message


def test_no_nvml_fails(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer,
                       run_validation: Callable[..., Run]) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    run = run_validation(program_config(server.url))
    assert run.code == 1
    assert statuses(run)["nvml"] == result.FAIL
    assert statuses(run)["driver-version"] == result.SKIPPED and statuses(run)["no-xid"] == result.SKIPPED


# ---------------------------------------------------------------- the serving process the program starts


def test_the_program_starts_and_stops_its_serving_process(gpu: FakeNvml, run_validation: Callable[..., Run],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    command = [sys.executable, "-m", "tests.workload.openai_server", "--port", str(port), "--model", MODEL]
    config = program_config(f"http://127.0.0.1:{port}")
    config["server"]["command"] = command
    run = run_validation(config)
    assert run.code == 0, run.result and run.result.to_json()
    with pytest.raises(ConnectionRefusedError):  # stopped before the result was written: nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_serving_process_that_dies_fails_at_once(gpu: FakeNvml, run_validation: Callable[..., Run],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    port = free_port()
    config = program_config(f"http://127.0.0.1:{port}")
    config["server"].update(startupTimeoutSeconds=60, command=[
        sys.executable, "-m", "tests.workload.openai_server", "--port", str(port), "--exit-after", "0.2"])
    started = time.monotonic()
    run = run_validation(config)
    assert time.monotonic() - started < 30
    check = run.result.check("server-ready") if run.result else None
    assert run.code == 1 and check is not None and "exited with code 3" in check.message


def test_a_serving_command_that_does_not_exist_fails(gpu: FakeNvml, run_validation: Callable[..., Run]) -> None:
    config = program_config(f"http://127.0.0.1:{free_port()}")
    config["server"]["command"] = ["/nonexistent/vllm", "serve"]
    run = run_validation(config)
    check = run.result.check("server-ready") if run.result else None
    assert run.code == 1 and check is not None and "could not start" in check.message


# ---------------------------------------------------------------- recording


def test_a_result_that_cannot_be_written_ends_in_failure_after_bounded_starts(
        gpu: FakeNvml, server: OpenAIServer, kube: KubeApi, run_validation: Callable[..., Run], tmp_path: Path) -> None:
    """An admission refusal (403) on every write: each container start retries the write once (a 403 is not
    retried within a start), never the validation; after RECORD_STARTS starts the program only reports."""
    kube.status = 403
    state = str(tmp_path / "state")
    first = run_validation(program_config(server.url), "--state-dir", state)
    assert first.code == result.EXIT_UNRECORDED  # every check passed, but nothing says so on the node
    assert len(kube.requests) == 1  # a 403 is not retried
    served = len(server.behaviour.requests)
    assert served > 0
    for start in range(2, result.RECORD_STARTS + 1):  # the kubelet restarts the container
        again = run_validation(program_config(server.url), "--state-dir", state)
        assert again.code == result.EXIT_UNRECORDED
        assert len(kube.requests) == start  # one more write, of the same result
    assert len(server.behaviour.requests) == served  # validated once
    assert {json.dumps(r.body, sort_keys=True) for r in kube.requests} == {json.dumps(kube.requests[0].body,
                                                                                      sort_keys=True)}
    gave_up = run_validation(program_config(server.url), "--state-dir", state)
    assert gave_up.code == result.EXIT_UNRECORDED
    assert len(kube.requests) == result.RECORD_STARTS and len(server.behaviour.requests) == served


def test_without_a_state_directory_an_unwritable_result_is_one_try(gpu: FakeNvml, server: OpenAIServer,
                                                                   kube: KubeApi,
                                                                   run_validation: Callable[..., Run]) -> None:
    kube.status = 422
    run = run_validation(program_config(server.url))
    assert run.code == result.EXIT_UNRECORDED and len(kube.requests) == 1


def test_a_later_start_records_the_first_runs_result(gpu: FakeNvml, server: OpenAIServer, kube: KubeApi,
                                                     run_validation: Callable[..., Run], tmp_path: Path) -> None:
    gpu.driver = "570.195.03"
    state = str(tmp_path / "state")
    kube.status = 403
    assert run_validation(program_config(server.url), "--state-dir", state).code == result.EXIT_UNRECORDED
    refused = kube.requests[-1].body
    served = len(server.behaviour.requests)
    kube.status = None  # whatever refused the write is fixed
    recorded = run_validation(program_config(server.url), "--state-dir", state)
    assert recorded.code == result.EXIT_FAILED  # the validation's own outcome, now on the node
    assert kube.requests[-1].body == refused and len(server.behaviour.requests) == served
    assert recorded.result is not None and recorded.node["spec"] == {"unschedulable": True}
    # Recorded: a further start neither validates nor writes.
    writes = len(kube.requests)
    assert run_validation(program_config(server.url), "--state-dir", state).code == result.EXIT_FAILED
    assert (len(kube.requests), len(server.behaviour.requests)) == (writes, served)


def test_unreadable_state_is_never_a_second_validation(gpu: FakeNvml, server: OpenAIServer, kube: KubeApi,
                                                       run_validation: Callable[..., Run], tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / f"{TARGET}.json").write_text("{")
    run = run_validation(program_config(server.url), "--state-dir", str(state))
    assert run.code == result.EXIT_UNRECORDED
    assert kube.requests == [] and server.behaviour.requests == []


def test_a_restarted_container_does_not_validate_twice(gpu: FakeNvml, server: OpenAIServer, kube: KubeApi,
                                                       run_validation: Callable[..., Run], tmp_path: Path) -> None:
    gpu.driver = "570.195.03"
    state = str(tmp_path / "state")
    first = run_validation(program_config(server.url), "--state-dir", state)
    assert first.code == 1
    seen = (len(server.behaviour.requests), len(kube.requests))
    again = run_validation(program_config(server.url), "--state-dir", state)
    assert again.code == 1  # the recorded outcome's code
    assert (len(server.behaviour.requests), len(kube.requests)) == seen  # no request of any kind


def test_metrics_for_the_textfile_collector(gpu: FakeNvml, server: OpenAIServer, run_validation: Callable[..., Run],
                                            tmp_path: Path) -> None:
    server.behaviour.on_completion = lambda body: gpu.xid(0, 119) if body.get("stream") else None
    run = run_validation(program_config(server.url, textfileDirectory=str(tmp_path)))
    assert run.code == 1
    text = (tmp_path / result.TEXTFILE_NAME).read_text()
    base = f'node="{NODE}",pool="l40s-canary",stage="canary",driver="{TARGET}"'
    assert f"gpu_driver_validation_passed{{{base}}} 0.0" in text
    assert f'gpu_driver_validation_check_passed{{{base},check="no-xid"}} 0.0' in text
    assert f'gpu_driver_validation_check_passed{{{base},check="driver-version"}} 1.0' in text
    assert 'check="token-digest"' not in text  # skipped checks are absent, not 0
    assert f'gpu_driver_validation_xid_events{{{base},xid="119"}}' in text
    assert f"gpu_driver_validation_tokens_per_second{{{base}}}" in text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # written atomically


def test_an_invalid_configuration_exits_2(run_validation: Callable[..., Run], kube: KubeApi) -> None:
    run = run_validation(program_config("http://127.0.0.1:1", maxTokens=0))
    assert run.code == result.EXIT_INVALID and kube.requests == []


# ---------------------------------------------------------------- the real entry point, as the pod runs it


def _subprocess_env(scenario: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_NVML_PATH), str(CHECKOUT)]),
            "FAKE_NVML": json.dumps(scenario), "NODE_NAME": NODE}


@pytest.mark.parametrize(("driver", "code", "outcome"), [(TARGET, 0, "passed"), ("570.195.03", 1, "failed")])
def test_python_dash_m_as_in_the_pod(server: OpenAIServer, kube: KubeApi, tmp_path: Path,
                                     driver: str, code: int, outcome: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps(program_config(server.url)))
    (tmp_path / "token").write_text("t")
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "workload.validate", "--config", str(tmp_path / "config.json"),
         "--api-server", kube.url, "--token-file", str(tmp_path / "token")],
        env=_subprocess_env({"driver": driver}), capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == code, proc.stderr
    printed = result.parse_result(proc.stdout.strip().splitlines()[-1])  # the result is in the pod's log too
    assert printed.outcome == outcome
    assert kube.nodes[NODE]["metadata"]["labels"][result.LABEL_OUTCOME] == outcome


def test_sigterm_during_the_run_writes_nothing(kube: KubeApi, tmp_path: Path) -> None:
    """The pod is removed mid-run (the node left upgrade-done): no result, the serving process stopped."""
    port = free_port()
    config = program_config(f"http://127.0.0.1:{port}")
    pidfile = tmp_path / "server.pid"
    # A "serving process" that writes its pid and never becomes ready.
    config["server"].update(startupTimeoutSeconds=60, command=[
        sys.executable, "-c", f"import os,time; open({str(pidfile)!r},'w').write(str(os.getpid())); time.sleep(120)"])
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "token").write_text("t")
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "workload.validate", "--config", str(tmp_path / "config.json"),
         "--api-server", kube.url, "--token-file", str(tmp_path / "token")],
        env=_subprocess_env({}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.is_file() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        server_pid = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == result.EXIT_INTERRUPTED, err
    assert kube.requests == []
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
