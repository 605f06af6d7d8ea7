"""The validation program: ``python -m workload.validate --config FILE [--node NAME]``.

On the node it runs on, right after the node's driver upgrade, it checks (docs/validation.md):
the driver NVML reports is the pool's target; NVML sees the pool's GPU count; the serving process
(``vllm serve`` of a small model from a cache volume, started here on loopback) becomes ready and
answers the fixed prompt; the greedy completion has the recorded token digest (when one is recorded);
time to first token and tokens per second are within tolerance of the pool's baseline; no Xid event
and no new uncorrectable ECC error or row-remap failure happened during the run. It then stops the
serving process, writes one result for this node and driver (``workload.result``) on its Node object
(cordoning the node when a check failed), and exits 0 when every check passed, 1 when one failed, 2 on an
invalid configuration, 3 when the result could not be written.

A pod validates its node once. The result is kept in the state directory (an emptyDir, which outlives
container restarts) before it is written, so a restarted container only retries the write, never the
validation, and after ``result.RECORD_STARTS`` starts it stops trying: it logs the result and exits 3 at
once, which leaves the pod failing visibly (CrashLoopBackOff) instead of holding the GPUs in a rerun loop.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from workload import nvml, openai, result
from workload.kube import ApiServer, KubeError
from workload.result import FAIL, PASS, SKIPPED, Check, Result
from workload.serving import Serving


class ConfigError(ValueError):
    pass


class Interrupted(Exception):
    """SIGTERM while validating: the pod is being removed (the node left the state the job waits for)."""


def log(message: str) -> None:
    print(f"{datetime.now(UTC).strftime('%H:%M:%S')} validate: {message}", file=sys.stderr, flush=True)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- configuration (rendered by components/validation.py)


@dataclass(frozen=True)
class Baseline:
    time_to_first_token: float
    tokens_per_second: float
    token_digest: str | None
    recorded_on: str | None


@dataclass(frozen=True)
class Config:
    stage: str
    cluster: str
    pool: str
    target_driver: str
    gpus_per_node: int
    image: str
    model: str
    model_path: str
    prompt: str
    max_tokens: int
    requests: int
    min_tokens_per_second: float
    baseline: Baseline | None
    tolerance_time_to_first_token: float  # a fraction: 0.5 allows 50 % slower
    tolerance_tokens_per_second: float  # a fraction: 0.1 allows 10 % fewer
    server_command: list[str]
    server_url: str
    startup_timeout: float
    request_timeout: float
    textfile_directory: str | None


def _take(document: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    if key not in document:
        raise ConfigError(f"{where}{key}: required")
    value = document[key]
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise ConfigError(f"{where}{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _positive(document: dict[str, Any], key: str, where: str = "") -> float:
    value = _take(document, key, (int, float), where)
    if value <= 0:
        raise ConfigError(f"{where}{key}: must be > 0, got {value!r}")
    return float(value)


def _fraction(document: dict[str, Any], key: str, where: str) -> float:
    value = _take(document, key, (int, float), where)
    if not 0 <= value <= 1:
        raise ConfigError(f"{where}{key}: must be a fraction from 0 to 1, got {value!r}")
    return float(value)


def _exactly(document: dict[str, Any], keys: set[str], where: str) -> None:
    unknown = sorted(set(document) - keys)
    if unknown:
        raise ConfigError(f"{where}{unknown[0]}: unknown key")


CONFIG_KEYS = {"apiVersion", "stage", "cluster", "pool", "targetDriver", "gpusPerNode", "image", "model", "modelPath",
               "prompt", "maxTokens", "requests", "minTokensPerSecond", "baseline", "tolerance", "server",
               "textfileDirectory"}


def parse_config(document: Any) -> Config:
    if not isinstance(document, dict):
        raise ConfigError("the configuration must be a JSON object")
    _exactly(document, CONFIG_KEYS, "")
    if document.get("apiVersion") != result.CONFIG_API_VERSION:
        raise ConfigError(f"apiVersion: expected {result.CONFIG_API_VERSION!r}, got {document.get('apiVersion')!r}")
    raw_baseline = document.get("baseline")
    baseline = None
    if raw_baseline is not None:
        if not isinstance(raw_baseline, dict):
            raise ConfigError("baseline: expected an object or null")
        _exactly(raw_baseline, {"timeToFirstTokenSeconds", "tokensPerSecond", "tokenDigest", "recordedOn"}, "baseline.")
        token_digest = raw_baseline.get("tokenDigest")
        if token_digest is not None and not (isinstance(token_digest, str) and token_digest.startswith("sha256:")):
            raise ConfigError(f"baseline.tokenDigest: expected sha256:<hex> or null, got {token_digest!r}")
        baseline = Baseline(_positive(raw_baseline, "timeToFirstTokenSeconds", "baseline."),
                            _positive(raw_baseline, "tokensPerSecond", "baseline."), token_digest,
                            raw_baseline.get("recordedOn"))
    tolerance = _take(document, "tolerance", dict)
    _exactly(tolerance, {"timeToFirstToken", "tokensPerSecond"}, "tolerance.")
    server = _take(document, "server", dict)
    _exactly(server, {"command", "url", "startupTimeoutSeconds", "requestTimeoutSeconds"}, "server.")
    command = _take(server, "command", list, "server.")
    if not all(isinstance(part, str) and part for part in command):
        raise ConfigError("server.command: expected a list of non-empty strings")
    gpus = _take(document, "gpusPerNode", int)
    if gpus <= 0:
        raise ConfigError(f"gpusPerNode: must be > 0, got {gpus}")
    counts = {key: _take(document, key, int) for key in ("maxTokens", "requests")}
    for key, value in counts.items():
        if value <= 0:
            raise ConfigError(f"{key}: must be > 0, got {value}")
    textfile = document.get("textfileDirectory")
    if textfile is not None and not isinstance(textfile, str):
        raise ConfigError("textfileDirectory: expected a path or null")
    strings = {key: _take(document, key, str) for key in
               ("stage", "cluster", "pool", "targetDriver", "image", "model", "modelPath", "prompt")}
    for key, value in strings.items():
        if not value:
            raise ConfigError(f"{key}: must not be empty")
    return Config(
        stage=strings["stage"], cluster=strings["cluster"], pool=strings["pool"],
        target_driver=strings["targetDriver"], gpus_per_node=gpus, image=strings["image"], model=strings["model"],
        model_path=strings["modelPath"], prompt=strings["prompt"], max_tokens=counts["maxTokens"],
        requests=counts["requests"], min_tokens_per_second=_positive(document, "minTokensPerSecond"),
        baseline=baseline, tolerance_time_to_first_token=_fraction(tolerance, "timeToFirstToken", "tolerance."),
        tolerance_tokens_per_second=_fraction(tolerance, "tokensPerSecond", "tolerance."),
        server_command=list(command), server_url=_take(server, "url", str, "server.").rstrip("/"),
        startup_timeout=_positive(server, "startupTimeoutSeconds", "server."),
        request_timeout=_positive(server, "requestTimeoutSeconds", "server."), textfile_directory=textfile,
    )


def load_config(path: Path) -> Config:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    except ValueError as error:
        raise ConfigError(f"{path} is not JSON: {error}") from None
    return parse_config(document)


def own_program_digest() -> str:
    here = Path(__file__).resolve().parent
    return result.program_digest({name: (here / name).read_bytes() for name in result.PROGRAM_FILES})


# ---------------------------------------------------------------- the checks


def _fail_missing(checks: dict[str, Check], ids: tuple[str, ...], reason: str) -> None:
    for check_id in ids:
        checks.setdefault(check_id, Check(check_id, FAIL, reason))


def _skip_all(checks: dict[str, Check], ids: tuple[str, ...], reason: str) -> None:
    for check_id in ids:
        checks.setdefault(check_id, Check(check_id, SKIPPED, reason))


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _gpu_checks(gpu: nvml.Nvml, config: Config, checks: dict[str, Check]) -> list[nvml.GpuHealth]:
    reported = gpu.driver_version()
    ok = result.driver_matches(config.target_driver, reported)
    checks["driver-version"] = Check(
        "driver-version", PASS if ok else FAIL,
        f"NVML reports driver {reported}" + ("" if ok else f", not the target {config.target_driver}"),
        {"reported": reported, "target": config.target_driver},
    )
    count = gpu.count()
    ok = count == config.gpus_per_node
    health = gpu.health()
    checks["gpu-count"] = Check(
        "gpu-count", PASS if ok else FAIL,
        f"NVML sees {count} GPU(s)" + ("" if ok else f", the pool has {config.gpus_per_node} per node"),
        {"seen": count, "expected": config.gpus_per_node, "gpus": [g.describe() for g in health]},
    )
    return health


def _serving_checks(config: Config, checks: dict[str, Check], measurements: dict[str, Any]) -> None:
    """server-ready, model-answers, token-digest, time-to-first-token, tokens-per-second (in this order)."""
    order = ("server-ready", "model-answers", "token-digest", "time-to-first-token", "tokens-per-second")
    serving = None
    step = "server-ready"
    try:
        if config.server_command:
            try:
                serving = Serving.start(config.server_command)
            except OSError as error:
                raise openai.ServerError(f"the serving process could not start: {error}") from None
        log(f"waiting for {config.server_url} to serve {config.model} (at most {config.startup_timeout:.0f}s)")
        ready = openai.wait_ready(config.server_url, config.model, config.startup_timeout,
                                  serving.exited if serving is not None else lambda: None)
        measurements["serverReadySeconds"] = _rounded(ready, 2)
        checks[step] = Check(step, PASS, f"serving {config.model} after {ready:.1f}s", {"seconds": _rounded(ready, 2)})

        step = "model-answers"
        completion = openai.complete(config.server_url, config.model, config.prompt, config.max_tokens,
                                     config.request_timeout)
        measured_digest = openai.digest(completion.text)
        measurements.update(tokenDigest=measured_digest, completionTokens=completion.completion_tokens,
                            completion=completion.text[:500])
        answered = bool(completion.text.strip())
        checks[step] = Check(step, PASS if answered else FAIL,
                             "answered the fixed prompt" if answered else "answered the fixed prompt with no text",
                             {"completionTokens": completion.completion_tokens, "finishReason": completion.finish_reason})

        step = "token-digest"
        recorded = config.baseline.token_digest if config.baseline else None
        if recorded is None:
            checks[step] = Check(step, SKIPPED, f"no digest recorded for pool {config.pool}; this run's is "
                                 f"{measured_digest}", {"measured": measured_digest})
        else:
            same = recorded == measured_digest
            checks[step] = Check(step, PASS if same else FAIL,
                                 "greedy completion as recorded" if same else
                                 "greedy completion differs from the recorded one",
                                 {"measured": measured_digest, "recorded": recorded})

        step = "time-to-first-token"
        openai.stream(config.server_url, config.model, config.prompt, config.max_tokens, config.request_timeout)
        timings = [openai.stream(config.server_url, config.model, config.prompt, config.max_tokens,
                                 config.request_timeout) for _ in range(config.requests)]
        ttft = statistics.median(t.time_to_first_token for t in timings)
        rates = [t.tokens_per_second for t in timings]
        measurements["samples"] = [{"timeToFirstTokenSeconds": _rounded(t.time_to_first_token),
                                    "tokensPerSecond": _rounded(t.tokens_per_second, 2),
                                    "completionTokens": t.completion_tokens} for t in timings]
        measurements["timeToFirstTokenSeconds"] = _rounded(ttft)
        _time_to_first_token(config, ttft, checks)

        step = "tokens-per-second"
        if any(rate is None for rate in rates):
            raise openai.ServerError("a timed request returned fewer than two tokens: no decode rate")
        rate = statistics.median(r for r in rates if r is not None)
        measurements["tokensPerSecond"] = _rounded(rate, 2)
        _tokens_per_second(config, rate, checks)
    except openai.ServerError as error:
        checks[step] = Check(step, FAIL, str(error))
        _skip_all(checks, order, f"not measured: {step} failed")
    finally:
        if serving is not None:
            serving.stop()


def _time_to_first_token(config: Config, ttft: float, checks: dict[str, Check]) -> None:
    evidence: dict[str, Any] = {"measured": _rounded(ttft)}
    if config.baseline is None:
        checks["time-to-first-token"] = Check("time-to-first-token", SKIPPED,
                                              f"no baseline for pool {config.pool}; measured {ttft:.3f}s", evidence)
        return
    limit = config.baseline.time_to_first_token * (1 + config.tolerance_time_to_first_token)
    evidence.update(baseline=config.baseline.time_to_first_token, tolerance=config.tolerance_time_to_first_token,
                    limit=_rounded(limit))
    ok = ttft <= limit
    checks["time-to-first-token"] = Check(
        "time-to-first-token", PASS if ok else FAIL,
        f"{ttft:.3f}s to the first token, {'within' if ok else 'over'} the limit of {limit:.3f}s "
        f"(baseline {config.baseline.time_to_first_token:.3f}s + {config.tolerance_time_to_first_token:.0%})",
        evidence,
    )


def _tokens_per_second(config: Config, rate: float, checks: dict[str, Check]) -> None:
    floor, why = config.min_tokens_per_second, f"minTokensPerSecond {config.min_tokens_per_second:g}"
    evidence: dict[str, Any] = {"measured": _rounded(rate, 2), "minTokensPerSecond": config.min_tokens_per_second}
    if config.baseline is not None:
        relative = config.baseline.tokens_per_second * (1 - config.tolerance_tokens_per_second)
        evidence.update(baseline=config.baseline.tokens_per_second, tolerance=config.tolerance_tokens_per_second)
        if relative > floor:
            floor = relative
            why = (f"baseline {config.baseline.tokens_per_second:g} - "
                   f"{config.tolerance_tokens_per_second:.0%}")
    evidence["floor"] = _rounded(floor, 2)
    ok = rate >= floor
    checks["tokens-per-second"] = Check(
        "tokens-per-second", PASS if ok else FAIL,
        f"{rate:.1f} tokens/s, {'at or above' if ok else 'below'} the floor of {floor:.1f} ({why})", evidence,
    )


def _health_checks(before: list[nvml.GpuHealth], after: list[nvml.GpuHealth] | None, after_error: str | None,
                   checks: dict[str, Check]) -> None:
    if after is None:
        for check_id in ("no-new-uncorrectable-ecc", "no-row-remap-failure"):
            checks[check_id] = Check(check_id, FAIL, f"NVML could not read the GPUs after the run: {after_error}")
        return
    by_uuid = {g.uuid: g for g in after}
    missing = [g.uuid for g in before if g.uuid not in by_uuid]

    ecc_rows, ecc_new, ecc_supported = [], [], False
    for old in before:
        new = by_uuid.get(old.uuid)
        if new is None or old.uncorrectable_ecc is None or new.uncorrectable_ecc is None:
            continue
        ecc_supported = True
        ecc_rows.append({"gpu": old.index, "before": old.uncorrectable_ecc, "after": new.uncorrectable_ecc})
        if new.uncorrectable_ecc > old.uncorrectable_ecc:
            ecc_new.append(old.index)
    if missing:
        checks["no-new-uncorrectable-ecc"] = Check("no-new-uncorrectable-ecc", FAIL,
                                                   f"GPU(s) gone from NVML during the run: {', '.join(missing)}")
    elif not ecc_supported:
        checks["no-new-uncorrectable-ecc"] = Check(
            "no-new-uncorrectable-ecc", SKIPPED, "ECC counters not supported on these GPUs (ECC off?)",
            {"reasons": sorted({g.ecc_unsupported for g in before if g.ecc_unsupported})})
    else:
        checks["no-new-uncorrectable-ecc"] = Check(
            "no-new-uncorrectable-ecc", FAIL if ecc_new else PASS,
            f"new uncorrectable ECC errors on GPU(s) {', '.join(map(str, ecc_new))}" if ecc_new
            else "no new uncorrectable ECC errors", {"counters": ecc_rows})

    remap_rows, remap_bad, remap_supported, notes = [], [], False, []
    for old in before:
        new = by_uuid.get(old.uuid)
        if new is None or new.remap_failure is None:
            continue
        remap_supported = True
        remap_rows.append({"gpu": old.index, "uncorrectableBefore": old.remapped_uncorrectable,
                           "uncorrectableAfter": new.remapped_uncorrectable, "pending": new.remap_pending,
                           "failure": new.remap_failure})
        grew = (old.remapped_uncorrectable is not None and new.remapped_uncorrectable is not None
                and new.remapped_uncorrectable > old.remapped_uncorrectable)
        if new.remap_failure or grew or (new.remap_pending and not old.remap_pending):
            remap_bad.append(old.index)
        elif new.remap_pending:
            notes.append(f"GPU {old.index} has a remap pending from before the run (it applies at the next reset)")
    if missing:
        checks["no-row-remap-failure"] = Check("no-row-remap-failure", FAIL,
                                               f"GPU(s) gone from NVML during the run: {', '.join(missing)}")
    elif not remap_supported:
        checks["no-row-remap-failure"] = Check(
            "no-row-remap-failure", SKIPPED, "row remapping not supported on these GPUs (before Ampere)",
            {"reasons": sorted({g.remap_unsupported for g in before if g.remap_unsupported})})
    else:
        message = (f"row remap failure or new uncorrectable remapped rows on GPU(s) {', '.join(map(str, remap_bad))}"
                   if remap_bad else "no row remap failure and no new uncorrectable remapped rows")
        checks["no-row-remap-failure"] = Check("no-row-remap-failure", FAIL if remap_bad else PASS,
                                               "; ".join([message, *notes]), {"rows": remap_rows})


def _xid_check(watch: nvml.XidWatch | None, watch_error: str, before: list[nvml.GpuHealth],
               checks: dict[str, Check]) -> None:
    if watch is None or not watch.registered:
        reasons = sorted(set(watch.unsupported.values())) if watch else [watch_error]
        checks["no-xid"] = Check("no-xid", SKIPPED, "Xid events cannot be watched on these GPUs", {"reasons": reasons})
        return
    try:
        events = watch.drain({g.uuid: g.index for g in before})
    except Exception as error:  # noqa: BLE001 - any NVML failure here is the finding
        checks["no-xid"] = Check("no-xid", FAIL, f"reading Xid events failed: {nvml.error_text(error)}")
        return
    unwatched = sorted(watch.unsupported)
    evidence: dict[str, Any] = {"xids": events, "watchedGpus": watch.registered}
    if unwatched:
        evidence["unwatchedGpus"] = unwatched
    if events:
        listed = ", ".join(f"Xid {e['xid']} on GPU {e['gpu'] if e['gpu'] is not None else e['uuid']}" for e in events)
        checks["no-xid"] = Check("no-xid", FAIL, f"Xid event(s) during the run: {listed}", evidence)
    else:
        checks["no-xid"] = Check("no-xid", PASS, "no Xid event during the run", evidence)


def run(config: Config, node: str, program: str) -> Result:
    """Every check on this node, the serving process stopped at the end; never raises for a failed check."""
    started, clock = utc_now(), time.monotonic()
    checks: dict[str, Check] = {}
    measurements: dict[str, Any] = {}
    gpu = None
    before: list[nvml.GpuHealth] = []
    watch, watch_error = None, "NVML unavailable"
    try:
        gpu = nvml.Nvml(nvml.load())
        checks["nvml"] = Check("nvml", PASS, "NVML initialised")
    except Exception as error:  # noqa: BLE001 - no NVML (or a broken one) is a failed validation, not a crash
        checks["nvml"] = Check("nvml", FAIL, f"NVML could not be initialised: {nvml.error_text(error)}")
        _skip_all(checks, ("driver-version", "gpu-count"), "NVML unavailable")
    if gpu is not None:
        try:
            before = _gpu_checks(gpu, config, checks)
        except Exception as error:  # noqa: BLE001
            _fail_missing(checks, ("driver-version", "gpu-count"), f"NVML: {nvml.error_text(error)}")
        try:
            watch = gpu.watch_xid()
        except Exception as error:  # noqa: BLE001
            watch_error = f"no NVML event set: {nvml.error_text(error)}"
    try:
        _serving_checks(config, checks, measurements)
        after, after_error = None, None
        if gpu is None or not before:
            reason = "NVML unavailable" if gpu is None else "NVML sees no GPU"
            _skip_all(checks, ("no-xid", "no-new-uncorrectable-ecc", "no-row-remap-failure"), reason)
        else:
            try:
                after = gpu.health()
            except Exception as error:  # noqa: BLE001
                after_error = nvml.error_text(error)
            _xid_check(watch, watch_error, before, checks)
            _health_checks(before, after, after_error, checks)
    finally:
        if watch is not None:
            watch.close()
        if gpu is not None:
            gpu.shutdown()
    return Result(
        node=node, pool=config.pool, stage=config.stage, cluster=config.cluster, targetDriver=config.target_driver,
        image=config.image, model=config.model, program=program, startedAt=started, finishedAt=utc_now(),
        durationSeconds=round(time.monotonic() - clock, 2),
        checks=[checks[c] for c in result.CHECKS if c in checks], measurements=measurements,
        gpus=[g.describe() for g in before],
    )


# ---------------------------------------------------------------- recording and the command line


def write_textfile(directory: str, text: str) -> None:
    """Atomically, so the collector never reads half a file."""
    target = Path(directory) / result.TEXTFILE_NAME
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    temporary.write_text(text)
    os.replace(temporary, target)


def record(validation: Result, config: Config, args: argparse.Namespace) -> list[str]:
    """Write the result everywhere it goes; the problems met (an empty list when it all went)."""
    problems = []
    if not args.no_kubernetes:
        try:
            ApiServer.in_cluster(args.api_server, args.token_file, args.ca_file).patch_node(
                validation.node, result.node_patch(validation))
            log(f"recorded on node {validation.node}: {validation.outcome}")
        except (KubeError, OSError) as error:
            problems.append(f"the result could not be written to node {validation.node}: {error}")
    if config.textfile_directory:
        try:
            write_textfile(config.textfile_directory, result.prometheus_text(validation, time.time()))
        except OSError as error:
            problems.append(f"the metrics could not be written to {config.textfile_directory}: {error}")
    if args.result_file:
        Path(args.result_file).write_text(json.dumps(validation.to_json(), indent=1, sort_keys=True) + "\n")
    return problems


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workload.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path, help="the pool's configuration (JSON)")
    parser.add_argument("--node", default=os.environ.get("NODE_NAME"), help="this node (default: $NODE_NAME)")
    parser.add_argument("--state-dir", type=Path, help="remembers a recorded result across container restarts")
    parser.add_argument("--linger", type=float, default=0.0,
                        help="seconds to wait, after recording, for the pod's removal (SIGTERM) before exiting")
    parser.add_argument("--no-kubernetes", action="store_true", help="do not write the result to the node")
    parser.add_argument("--api-server", help="API server URL (default: the pod's in-cluster one)")
    parser.add_argument("--token-file", help="bearer token file (default: the pod's service-account token)")
    parser.add_argument("--ca-file", help="CA bundle of the API server (default: the pod's)")
    parser.add_argument("--result-file", help="also write the result JSON here")
    return parser.parse_args(argv)


class _Lifecycle:
    """SIGTERM aborts a run in progress (nothing is recorded) and ends the wait after recording."""

    def __init__(self) -> None:
        self.recording = False
        self.terminated = threading.Event()

    def on_sigterm(self, _signum: int, _frame: FrameType | None) -> None:
        self.terminated.set()
        if not self.recording:
            raise Interrupted

    def linger(self, seconds: float) -> None:
        if seconds > 0:
            log(f"waiting up to {seconds:.0f}s for the pod's removal")
            self.terminated.wait(seconds)


@dataclass
class Pending:
    """The state of this pod's one validation, kept in the state directory across container restarts."""

    path: Path | None  # None without --state-dir: one start, one try
    validation: Result | None = None  # the result once the run finished
    recorded: bool = False
    exit_code: int = result.EXIT_PASSED
    starts: int = 0  # starts that tried to record it

    @classmethod
    def load(cls, path: Path | None) -> Pending:
        if path is None or not path.is_file():
            return cls(path)
        state = json.loads(path.read_text())
        return cls(path, result.parse_result(state["result"]), bool(state["recorded"]), int(state["exitCode"]),
                   int(state["starts"]))

    def save(self) -> None:
        if self.path is None or self.validation is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temporary.write_text(json.dumps({"result": self.validation.dumps(), "recorded": self.recorded,
                                         "exitCode": self.exit_code, "starts": self.starts}))
        os.replace(temporary, self.path)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        config = load_config(args.config)
        if not args.node:
            raise ConfigError("no node: pass --node or set NODE_NAME (the downward API's spec.nodeName)")
    except ConfigError as error:
        log(f"invalid configuration: {error}")
        return result.EXIT_INVALID
    try:
        pending = Pending.load(args.state_dir / f"{config.target_driver}.json" if args.state_dir else None)
    except (OSError, ValueError, KeyError, TypeError) as error:
        # Validating again could loop; the state is the pod's own, so a new pod starts clean.
        log(f"the state of this pod's validation cannot be read ({error}); delete the pod to validate again")
        return result.EXIT_UNRECORDED
    lifecycle = _Lifecycle()
    previous = signal.signal(signal.SIGTERM, lifecycle.on_sigterm)
    try:
        if pending.recorded:
            # The container restarted after recording (the pod was not removed yet): never run twice.
            assert pending.validation is not None
            log(f"already recorded {pending.validation.outcome} for driver {config.target_driver} on this node")
            lifecycle.recording = True
            lifecycle.linger(args.linger)
            return pending.exit_code
        if pending.validation is None:
            log(f"validating node {args.node} (pool {config.pool}) on driver {config.target_driver}")
            try:
                validation = run(config, args.node, own_program_digest())
            except Interrupted:
                log("interrupted before a result was recorded: nothing written")
                return result.EXIT_INTERRUPTED
            lifecycle.recording = True
            pending.validation, pending.exit_code = validation, validation.exit_code
            pending.save()  # before the write: a restart retries the write, never the validation
            for check in validation.checks:
                log(f"{check.status:7} {check.id}: {check.message}")
        else:
            lifecycle.recording = True
            validation = pending.validation
            log(f"validated before this container started ({validation.outcome}); not recorded yet")
        print(validation.dumps(), flush=True)  # the result in the pod's log, on every start until it is recorded
        if pending.starts >= result.RECORD_STARTS:
            log(f"gave up recording the result after {pending.starts} starts: it is in this log; fix what refused "
                "the write, then delete this pod (its DaemonSet validates the node again in a new one)")
            return result.EXIT_UNRECORDED
        pending.starts += 1
        problems = record(validation, config, args)
        for problem in problems:
            log(problem)
        if problems:
            pending.save()
            left = result.RECORD_STARTS - pending.starts if pending.path is not None else 0
            log(f"result not recorded; exit {result.EXIT_UNRECORDED}"
                + (f" (the next {left} container start(s) retry the write, not the validation)" if left else ""))
            return result.EXIT_UNRECORDED
        pending.recorded = True
        pending.save()
        log(f"validation {validation.outcome}; exit {pending.exit_code}")
        lifecycle.linger(args.linger)
        return pending.exit_code
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
