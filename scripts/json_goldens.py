"""Golden records of every `gpu-rollout` verb's --json output, to compare a checkout before and after a change
that must not change behaviour (a restructure).

    python -m scripts.json_goldens record OUTDIR
    python -m scripts.json_goldens compare DIR_A DIR_B

``record`` writes one file per case (verb, stack, arguments): ``{"case", "argv", "rc", "stdout"}``, stdout parsed
as JSON where it is JSON (else the raw text), after the normalisations below. ``compare`` prints every case
missing on one side or differing, and exits 1 on any difference (0 when both folders hold the same records).

The verbs run only as subprocesses (``python -m rollout ...``, the current interpreter, from this checkout's
root): no product module is imported here, so moving modules cannot change what this script does. The live
verbs run against the tests' fake API server (tests/fakekube, in this process, on loopback), seeded with the
example stack's cluster by the tests' own fixtures, through a real kubeconfig file.

Normalisations (each applied to stdout before it is parsed and stored; all of them to every case):
- the checkout's absolute path (whatever folder it lives in) -> ``<PROJECT>``;
- this run's temporary folder -> ``<TMP>``; the traceback file an internal error names
  (/tmp/gpu-rollout-XXXX.traceback) -> ``<TRACEBACK>``;
- the commit HEAD points at, its parent (the diff--head-1-head case) and the merge base with the default branch
  (the offline basis of plan/diff), full 40-hex or any abbreviation of at least 7 -> ``<HEAD>`` / ``<HEAD~1>`` /
  ``<MERGE-BASE>`` (they change with every commit; where two are one commit, the first listed wins);
- the fake API server's loopback port (random) -> ``<PORT>``.
Live cases only (their cluster is seeded at the wall clock, so what they read moves with it):
- ISO 8601 timestamps whose date lies within two days of the recording -> ``<NOW>`` (fixed dates in the
  example data, such as the attestations', are kept);
- durations derived from them: numbers before "h"/"hours"/"minutes"/"min"/"s"/"seconds" in prose, and JSON
  number values of keys that name an age or a duration (ageSeconds, soakHours, ...) -> ``<DURATION>``.
Offline cases are pinned instead of normalised: ``--at 2026-12-09T10:00:00Z`` (a Wednesday, inside the example
prod stacks' maintenance windows) where the verb takes it. The ``*-clock`` cases run without --at on purpose
(the verb as a user runs it) and can differ when the two recordings straddle a maintenance window or a dwell.

Environment of every run: TZ=UTC, COLUMNS and every GPU_ROLLOUT_* variable unset, KUBECONFIG pointing at a file
that does not exist (no ambient cluster), PYTHONHASHSEED=0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("canary", "prod", "eks-canary", "eks-prod", "existing-canary", "existing-prod")
AT = "2026-12-09T10:00:00Z"
DEFAULT_BRANCHES = ("origin/HEAD", "main", "origin/main", "master", "origin/master")


@dataclass
class Case:
    name: str
    argv: list[str]
    live: bool = False
    cwd: Path | None = None


@dataclass
class Context:
    tmp: Path
    commits: dict[str, str] = field(default_factory=dict)  # placeholder -> full sha
    ports: list[int] = field(default_factory=list)
    started: datetime = field(default_factory=lambda: datetime.now(UTC))


# ---------------------------------------------------------------- running and normalising


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def _commits() -> dict[str, str]:
    found = {"<HEAD>": _git("rev-parse", "HEAD"), "<HEAD~1>": _git("rev-parse", "HEAD~1")}
    for branch in DEFAULT_BRANCHES:
        base = _git("merge-base", "HEAD", branch)
        if base:
            found["<MERGE-BASE>"] = base
            break
    return {k: v for k, v in found.items() if v}


def _environment(ctx: Context) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_ROLLOUT_") and k != "COLUMNS"}
    env.update(TZ="UTC", PYTHONHASHSEED="0", KUBECONFIG=str(ctx.tmp / "no-kubeconfig"), PYTHONDONTWRITEBYTECODE="1")
    return env


_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_ISO = re.compile(r"\b(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(Z|[+-]\d{2}:?\d{2})?")
_PROSE_DURATION = re.compile(r"\b\d+(?:\.\d+)?(?= ?(?:h|hours?|min|minutes?|s|seconds?|d|days?)\b)")
# JSON keys of the live documents whose numbers are read off the wall clock (time since the fake cluster was seeded).
VOLATILE_KEYS = frozenset({"secondsInState"})


def _normalise_text(text: str, ctx: Context, live: bool) -> str:
    for path in {str(ROOT), str(ROOT.resolve())}:
        text = text.replace(path, "<PROJECT>")
    for path in {str(ctx.tmp), str(ctx.tmp.resolve())}:
        text = text.replace(path, "<TMP>")
    text = re.sub(r"/tmp/gpu-rollout-[A-Za-z0-9_]+\.traceback", "<TRACEBACK>", text)
    for port in ctx.ports:
        text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:<PORT>")

    def commit(match: re.Match[str]) -> str:
        word = match.group(0)
        for placeholder, sha in ctx.commits.items():
            if sha.startswith(word):
                return placeholder
        return word

    text = _HEX.sub(commit, text)
    if live:
        recent = {(ctx.started + timedelta(days=d)).date().isoformat() for d in (-2, -1, 0, 1, 2)}
        text = _ISO.sub(lambda m: "<NOW>" if m.group(1) in recent else m.group(0), text)
        text = _PROSE_DURATION.sub("<DURATION>", text)
    return text


def _normalise_json(value: Any, ctx: Context, live: bool, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _normalise_json(v, ctx, live, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_json(v, ctx, live, key) for v in value]
    if live and isinstance(value, (int, float)) and not isinstance(value, bool):
        if key in VOLATILE_KEYS:
            return "<DURATION>"
        if abs(value - ctx.started.timestamp()) < 2 * 86400:  # an epoch timestamp of this run (watch's "at")
            return "<NOW>"
    return value


def run_case(case: Case, ctx: Context) -> dict[str, Any]:
    argv = [sys.executable, "-m", "rollout", *case.argv]
    done = subprocess.run(argv, cwd=case.cwd or ROOT, env=_environment(ctx), capture_output=True, text=True,
                          timeout=300, check=False)
    text = _normalise_text(done.stdout, ctx, case.live)
    try:
        stdout: Any = _normalise_json(json.loads(text), ctx, case.live)
    except ValueError:
        stdout = text
    shown = [_normalise_text(a, ctx, case.live) for a in case.argv]
    return {"case": case.name, "argv": ["gpu-rollout", *shown], "rc": done.returncode, "stdout": stdout}


# ---------------------------------------------------------------- the offline cases


def _bad_stack_files(tmp: Path) -> dict[str, Path]:
    """Stack files with one bad value each, copied from the examples into ``tmp``."""
    made: dict[str, Path] = {}
    edits = {
        # (example, old text, new text): a value the model refuses, and YAML that does not parse
        "bad-parallel": ("prod", "maxParallelUpgrades: 1", "maxParallelUpgrades: -3"),
        "bad-driver": ("canary", 'version: "580.173.02"', 'version: "banana"'),
        "bad-yaml": ("prod", "maxParallelUpgrades: 1", "maxParallelUpgrades: [unclosed"),
    }
    for label, (example, old, new) in edits.items():
        text = (ROOT / f"Pulumi.{example}.yaml").read_text(encoding="utf-8")
        if old not in text:
            raise SystemExit(f"json_goldens: Pulumi.{example}.yaml no longer holds {old!r}: update the {label} case")
        folder = tmp / label
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"Pulumi.{example}.yaml"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        made[label] = path
    return made


def _broken_fleet_project(tmp: Path) -> Path:
    """A copy of the project's stack files with a Fleet.yaml that names a stack there is not."""
    folder = tmp / "bad-fleet"
    folder.mkdir(parents=True, exist_ok=True)
    for path in ROOT.glob("Pulumi*.yaml"):
        shutil.copy(path, folder / path.name)
    text = (ROOT / "Fleet.yaml").read_text(encoding="utf-8")
    (folder / "Fleet.yaml").write_text(text.replace("stacks: [prod, eks-prod]", "stacks: [prod, eks-prod, nosuch]"),
                                       encoding="utf-8")
    return folder


def offline_cases(ctx: Context) -> list[Case]:
    cases: list[Case] = []
    for stack in STACKS:
        cases.append(Case(f"plan--{stack}", ["plan", "--stack", stack, "--json", "--at", AT]))
        cases.append(Case(f"plan--{stack}--clock", ["plan", "--stack", stack, "--json"]))
        cases.append(Case(f"simulate--{stack}", ["simulate", "--stack", stack, "--json"]))
    cases += [
        Case("plan--stack-file-prod", ["plan", "--stack-file", "Pulumi.prod.yaml", "--json", "--at", AT]),
        Case("simulate--prod-parallel-2-seed-7", ["simulate", "--stack", "prod", "--parallel", "2", "--seed", "7",
                                                   "--json"]),
        Case("simulate--prod-parallel-0", ["simulate", "--stack", "prod", "--parallel", "0", "--json"]),
        Case("diff--head-head", ["diff", "--base", "HEAD", "--head", "HEAD", "--json"]),
        Case("diff--default", ["diff", "--json"]),
        Case("diff--head-head-prod", ["diff", "--base", "HEAD", "--head", "HEAD", "--stack", "prod", "--json"]),
        Case("diff--head-1-head", ["diff", "--base", "HEAD~1", "--head", "HEAD", "--json"]),
        Case("deploy-plan", ["deploy-plan", "--json", "--at", AT]),
        Case("deploy-plan--clock", ["deploy-plan", "--json"]),
        Case("deploy-plan--stack-canary", ["deploy-plan", "--stack", "canary", "--json", "--at", AT]),
        Case("stacks", ["stacks", "--json"]),
        Case("stacks--stage-canary", ["stacks", "--stage", "canary", "--json"]),
        Case("stacks--stage-prod", ["stacks", "--stage", "prod", "--json"]),
        Case("stacks--stack-prod-eks-prod", ["stacks", "--stack", "prod", "--stack", "eks-prod", "--json"]),
        Case("fleet-plan", ["fleet", "plan", "--json", "--at", AT]),
        Case("fleet-plan--clock", ["fleet", "plan", "--json"]),
        Case("fleet-status--no-backend", ["fleet", "status", "--json"]),
        # error documents
        Case("error--plan-nosuch", ["plan", "--stack", "nosuch", "--json"]),
        Case("error--plan-no-stack", ["plan", "--json"]),
        Case("error--plan-bad-at", ["plan", "--stack", "prod", "--json", "--at", "next tuesday"]),
        Case("error--plan-naive-at", ["plan", "--stack", "prod", "--json", "--at", "2026-12-09T10:00:00"]),
        Case("error--plan-stack-file-missing", ["plan", "--stack-file", str(ctx.tmp / "none.yaml"), "--json"]),
        Case("error--plan-previous-outputs-missing", ["plan", "--stack", "prod", "--json", "--previous-outputs",
                                                      str(ctx.tmp / "none.json")]),
        Case("error--diff-markdown-json", ["diff", "--markdown", "--json"]),
        Case("error--diff-bad-base", ["diff", "--base", "no-such-revision", "--json"]),
        Case("error--diff-outputs-without-stack", ["diff", "--previous-outputs", str(ctx.tmp / "none.json"),
                                                   "--json"]),
        Case("error--deploy-plan-nosuch", ["deploy-plan", "--stack", "nosuch", "--json"]),
        Case("error--deploy-plan-bad-head", ["deploy-plan", "--head", "no-such-revision", "--json"]),
        Case("error--stacks-bad-stage", ["stacks", "--stage", "bogus", "--json"]),
        Case("error--stacks-nosuch", ["stacks", "--stack", "nosuch", "--json"]),
        Case("error--simulate-nosuch", ["simulate", "--stack", "nosuch", "--json"]),
        Case("error--simulate-kubeconfig-without-from-cluster", ["simulate", "--stack", "prod", "--kubeconfig",
                                                                 str(ctx.tmp / "none"), "--json"]),
        Case("error--simulate-negative-parallel", ["simulate", "--stack", "prod", "--parallel", "-1", "--json"]),
        Case("error--fleet-plan-markdown-json", ["fleet", "plan", "--markdown", "--json"]),
        Case("error--fleet-plan-no-fleet-file", ["fleet", "plan", "--project-dir", str(ctx.tmp), "--json"]),
        Case("error--fleet-plan-bad-fleet", ["fleet", "plan", "--project-dir", str(_broken_fleet_project(ctx.tmp)),
                                             "--json", "--at", AT]),
        Case("error--preflight-bad-kubeconfig", ["preflight", "--stack", "prod", "--kubeconfig",
                                                 str(ctx.tmp / "none"), "--json"]),
        Case("error--preflight-nosuch", ["preflight", "--stack", "nosuch", "--json"]),
        Case("error--rollback-no-backend", ["rollback", "--stack", "prod", "--dry-run", "--json"]),
    ]
    for label, path in _bad_stack_files(ctx.tmp).items():
        cases.append(Case(f"error--plan-{label}", ["plan", "--stack-file", str(path), "--json", "--at", AT]))
        cases.append(Case(f"error--simulate-{label}", ["simulate", "--stack-file", str(path), "--json"]))
    return cases


# ---------------------------------------------------------------- the live cases (the fake API server)


def _live_project(tmp: Path) -> Path:
    """The project's stack files, attestations and fleet file, with every maintenance window open around the
    clock (the live verbs have no --at: a window would make watch's answer depend on the hour it runs)."""
    import yaml  # the project's own dependency (PyYAML), in its virtual environment

    folder = tmp / "live-project"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "Fleet.yaml"):
        shutil.copy(ROOT / name, folder / name)
    for name in ("attestations", "policy"):
        shutil.copytree(ROOT / name, folder / name, dirs_exist_ok=True)
    always = {"timeZone": "UTC", "weekly": [{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                                             "start": "00:00", "end": "24:00"}]}
    for stack in STACKS:
        document = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8"))
        for value in document.get("config", {}).values():
            if isinstance(value, dict) and "maintenanceWindow" in value:
                value["maintenanceWindow"] = always
        (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return folder


@contextlib.contextmanager
def _cluster(stack: str, name: str, ctx: Context) -> Iterator[Path]:
    """The fake API server seeded with the example stack's cluster in its steady state; yields its kubeconfig."""
    from tests.fakekube.fixtures import seed
    from tests.fakekube.plugin import stack_spec
    from tests.fakekube.server import FakeKube

    spec = stack_spec(stack)
    existing = getattr(spec.cluster, "existing", None)  # an existing cluster's stack names its kubeconfig context
    with FakeKube() as fake:
        seed(fake, spec)
        ctx.ports.append(int(fake.url.rsplit(":", 1)[1]))
        path = ctx.tmp / f"kubeconfig-{name}"
        yield fake.write_kubeconfig(path, existing.context if existing is not None and existing.context else "fake")


# Per stack: the verbs run one after the other against one seeded cluster (pause changes what resume and watch
# see). {K} is the kubeconfig, {P} the live project folder.
LIVE: dict[str, list[tuple[str, list[str]]]] = {
    "prod": [
        ("preflight", ["preflight"]),
        ("watch-once", ["watch", "--once"]),
        ("simulate-from-cluster", ["simulate", "--from-cluster"]),
        ("pause", ["pause", "--reason", "golden record"]),
        ("watch-once-paused", ["watch", "--once"]),
        ("resume", ["resume"]),
        ("resume-again", ["resume"]),
        ("soak-not-a-canary", ["soak"]),
        ("verify-smoke", ["verify", "--smoke"]),
        ("release-node-not-held", ["release-node", "no-such-node"]),
        ("watch-bad-prometheus", ["watch", "--once", "--prometheus", "not-a-url"]),
    ],
    "canary": [
        ("preflight", ["preflight"]),
        ("watch-once", ["watch", "--once"]),
        ("pause", ["pause"]),
        ("resume", ["resume"]),
        ("soak", ["soak"]),
        ("verify-smoke", ["verify", "--smoke"]),
    ],
    "eks-prod": [
        ("preflight", ["preflight"]),
        ("watch-once", ["watch", "--once"]),
        ("pause-image-owned", ["pause"]),
        ("resume-image-owned", ["resume"]),
        ("simulate-from-cluster", ["simulate", "--from-cluster"]),
    ],
    "eks-canary": [("preflight", ["preflight"]), ("watch-once", ["watch", "--once"]), ("soak", ["soak"])],
    "existing-canary": [("preflight", ["preflight"]), ("watch-once", ["watch", "--once"]), ("soak", ["soak"])],
    "existing-prod": [("preflight", ["preflight"]), ("watch-once", ["watch", "--once"])],
}
# Another cluster than the stack's: the prod stack's verbs against the canary-only eks cluster's API.
WRONG_CLUSTER = [("preflight-wrong-cluster", ["preflight"])]


def _live_group(stack: str, seeded: str, steps: list[tuple[str, list[str]]], project: Path,
                ctx: Context) -> list[dict[str, Any]]:
    records = []
    with _cluster(seeded, f"{stack}-on-{seeded}-cluster", ctx) as kubeconfig:
        for label, verb in steps:
            argv = [*verb, "--stack", stack, "--project-dir", str(project), "--kubeconfig", str(kubeconfig), "--json"]
            records.append(run_case(Case(f"live--{stack}--{label}", argv, live=True, cwd=project), ctx))
    return records


def live_records(ctx: Context, jobs: ThreadPoolExecutor) -> list[dict[str, Any]]:
    project = _live_project(ctx.tmp)
    futures = [jobs.submit(_live_group, stack, stack, steps, project, ctx) for stack, steps in LIVE.items()]
    futures.append(jobs.submit(_live_group, "prod", "eks-prod", WRONG_CLUSTER, project, ctx))
    return [record for future in futures for record in future.result()]


# ---------------------------------------------------------------- record and compare


def record(out: Path, live: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="json-goldens-") as name:
        ctx = Context(Path(name), _commits())
        with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as jobs:
            futures = [jobs.submit(run_case, case, ctx) for case in offline_cases(ctx)]
            records = [future.result() for future in futures]
            if live:
                records += live_records(ctx, jobs)
    names = [r["case"] for r in records]
    assert len(names) == len(set(names)), "two cases share a name"
    for existing in out.glob("*.json"):
        existing.unlink()
    for entry in records:
        (out / f"{entry['case']}.json").write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n",
                                                   encoding="utf-8")
    sys.stdout.write(f"recorded {len(records)} cases in {out}\n")
    return 0


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{path}/{key}"))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(_flatten(item, f"{path}[{index}]"))
        return out or {path: []}
    return {path: value}


def compare(first: Path, second: Path, limit: int = 20) -> int:
    a = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(first.glob("*.json"))}
    b = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(second.glob("*.json"))}
    if not a or not b:
        sys.stdout.write(f"nothing to compare: {first} holds {len(a)} records, {second} {len(b)}\n")
        return 2
    differing = 0
    for name in sorted(set(a) | set(b)):
        if name not in b or name not in a:
            differing += 1
            sys.stdout.write(f"{name}: only in {first if name in a else second}\n")
            continue
        if a[name] == b[name]:
            continue
        differing += 1
        left, right = _flatten(a[name]), _flatten(b[name])
        changed = [k for k in sorted(set(left) | set(right)) if left.get(k, "<absent>") != right.get(k, "<absent>")]
        sys.stdout.write(f"{name}: {len(changed)} difference(s)\n")
        for key in changed[:limit]:
            sys.stdout.write(f"  {key}\n    - {json.dumps(left.get(key, '<absent>'))[:400]}\n"
                             f"    + {json.dumps(right.get(key, '<absent>'))[:400]}\n")
        if len(changed) > limit:
            sys.stdout.write(f"  ... and {len(changed) - limit} more\n")
    sys.stdout.write(f"{len(set(a) | set(b))} cases, {differing} differ\n")
    return 1 if differing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.json_goldens", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    rec = verbs.add_parser("record", help="run every case and write one JSON file per case into OUTDIR")
    rec.add_argument("outdir", type=Path)
    rec.add_argument("--offline-only", action="store_true", help="leave out the live verbs (fake API server)")
    cmp_ = verbs.add_parser("compare", help="print the differences between two recordings; exit 1 on any")
    cmp_.add_argument("first", type=Path)
    cmp_.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    actions: dict[str, Callable[[], int]] = {
        "record": lambda: record(args.outdir, not args.offline_only),
        "compare": lambda: compare(args.first, args.second),
    }
    return actions[args.verb]()


if __name__ == "__main__":
    raise SystemExit(main())
