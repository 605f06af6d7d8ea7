"""`gpu-rollout fleet plan`: the train offline, wave by wave: each stack rendered as `gpu-rollout plan` renders it
(the real program under mocks, the policy pack at the stack's stage's enforcement, on the last deployment and
canary `plan` takes: :func:`rollout.plan.judge`), the driver it moves from (that last deployment's) and to
and which pools it releases, and what each wave waits for before the next starts. No backend, no cluster.

Exit 0 when every stack would be admitted; 1 when the pack would refuse one (a mandatory violation); 2 for a fleet
file or stack file that does not load.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from policy.evaluate import Violation, mandatory
from rollout import documents, schemas
from rollout import plan as stack_plan
from rollout.console import stdout
from refusals.exits import Exit
from rollout.fleet_project import FleetProject, load_project
from fleetspec.fleet_file import Wave
from fleetspec.load import SpecError
from fleetspec.model import FleetSpec
from vocabulary.verdicts import Verdict


@dataclass
class StackPlan:
    stack: str
    spec: FleetSpec
    violations: list[Violation] = field(default_factory=list)
    problem: str | None = None  # it could not be rendered (an ownership conflict, say)
    judged: stack_plan.Judged | None = None  # as `plan` judges it: same last deployment, same canary

    @property
    def moves_from(self) -> tuple[str | None, str]:
        """The driver the stack moves from and where that was read: its last deployment's as `plan` takes it
        (the merge base offline), else, before a first deployment, the file's driver.previousVersion."""
        if self.judged is not None and self.judged.last_driver is not None:
            last = self.judged.sources[0]
            return self.judged.last_driver, f"last deployment: {last.text}" + (" (assumed offline)" if last.assumed else "")
        return self.spec.driver.previousVersion, "driver.previousVersion (no last deployment known: " + (
            self.judged.sources[0].text if self.judged is not None else "not rendered") + ")"

    @property
    def refused(self) -> bool:
        return self.problem is not None or bool(mandatory(self.violations))

    def pools(self) -> dict[str, list[str]]:
        """Released and held pools in words, for the text and markdown reports."""
        targets = [self.spec.pool_target(p) for p in self.spec.nodePools]
        return {"released": [f"{t.pool} ({t.driver}; {t.why})" for t in targets if not t.held],
                "held": [f"{t.pool} ({t.driver}; {t.why})" for t in targets if t.held]}

    def pool_models(self) -> list[schemas.FleetPlanPool]:
        return [schemas.FleetPlanPool(name=t.pool, driver=t.driver, held=t.held, why=t.why)
                for t in (self.spec.pool_target(p) for p in self.spec.nodePools)]

    def verdict(self) -> str:
        """`plan`'s verdict (:attr:`rollout.plan.Judged.verdict`), with what it counts."""
        if self.problem is not None or self.judged is None:
            return f"{Verdict.REFUSED}: {self.problem}"
        refused = mandatory(self.violations)
        if refused:
            return f"{Verdict.REFUSED}: " + "; ".join(f"{v.policy}: {v.message}" for v in refused)
        advice = [v for v in self.violations if v not in refused]
        return self.judged.verdict.value + (f" ({len(advice)} advisory finding(s))" if advice else "")

    def document(self) -> schemas.FleetPlanStack:
        spec = self.spec
        return schemas.FleetPlanStack(
            stack=self.stack, stage=spec.stage.value, cluster=spec.cluster.name,
            driver=schemas.FleetPlanDriver(from_=self.moves_from[0], fromSource=self.moves_from[1],
                                           to=spec.driver.version, owner=spec.driver.owner.value),
            pools=self.pool_models(), refused=self.refused, verdict=self.verdict(), problem=self.problem,
            violations=[schemas.Violation.of(v) for v in self.violations])


def waits(wave: Wave) -> str:
    """What the wave waits for before the next starts, in words."""
    wait = wave.waitFor
    parts = ["every stack's rollout complete"]
    if wait.verify == "smoke":
        parts.append("`verify --smoke` passing on each")
    if wait.attestation:
        parts.append("each canary's signed attestation of its driver merged (soak.yml's pull request)")
    if wait.soakHours:
        parts.append(f"{wait.soakHours:g} h since its last upgraded node finished")
    return "; ".join(parts)


def plan_stacks(project: FleetProject, now: datetime | None) -> list[tuple[Wave, list[StackPlan]]]:
    out = []
    for wave in project.fleet.waves:
        plans = []
        for name in wave.stacks:
            spec = project.specs[name]
            path = project.project_dir / project.stacks[name].file
            try:
                # The one admission `plan` and `diff` make: the same last deployment and canary, the same pack.
                judged = stack_plan.judge(name, path, project.project_dir, now=now)
            except SpecError as error:
                plans.append(StackPlan(name, spec, problem="; ".join(str(p) for p in error.problems)))
                continue
            plans.append(StackPlan(name, spec, judged.violations, judged=judged))
        out.append((wave, plans))
    return out


def markdown(planned: list[tuple[Wave, list[StackPlan]]], project: FleetProject) -> str:
    refused = [p.stack for _, plans in planned for p in plans if p.refused]
    lines = [f"### Fleet plan: {len(planned)} wave(s), {sum(len(p) for _, p in planned)} stack(s)", ""]
    lines.append(f"**Refused:** {', '.join(f'`{s}`' for s in refused)}" if refused else
                 "Every stack would be admitted by the policy pack.")
    limits = project.fleet.limits
    lines += ["", f"Limits across clusters: GPUs out at once {limits.maxGpusUnavailable or 'unlimited'}, clusters in "
              f"flight {limits.maxClustersInFlight or 'unlimited'}; halts on {', '.join(project.fleet.haltOn)}.", ""]
    for index, (wave, plans) in enumerate(planned, start=1):
        lines += [f"#### Wave {index}: `{wave.name}` ({wave.maxConcurrent} at once)", "",
                  "| stack | cluster | driver | released | held | policy pack |", "|---|---|---|---|---|---|"]
        for p in plans:
            pools = p.pools()
            lines.append(f"| `{p.stack}` | {p.spec.cluster.name} | {p.moves_from[0]} → "
                         f"{p.spec.driver.version} | {'<br>'.join(pools['released']) or '-'} | "
                         f"{'<br>'.join(pools['held']) or '-'} | {_cell(p.verdict())} |")
        lines += ["", f"Before the next wave: {waits(wave)}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def execute(project_dir: Path, as_json: bool, as_markdown: bool, now: datetime | None) -> Exit:
    project = load_project(project_dir)
    planned = plan_stacks(project, now)
    refused = any(p.refused for _, plans in planned for p in plans)
    if as_json:
        documents.write(schemas.FleetPlanDocument(refused=refused, waves=[
            schemas.FleetPlanWave(
                name=wave.name, maxConcurrent=wave.maxConcurrent,
                waitFor=schemas.FleetWaitFor(verify=wave.waitFor.verify, attestation=wave.waitFor.attestation,
                                             soakHours=wave.waitFor.soakHours),
                waits=waits(wave), stacks=[p.document() for p in plans]) for wave, plans in planned]))
    elif as_markdown:
        sys.stdout.write(markdown(planned, project))
    else:
        console = stdout(highlight=False)
        for index, (wave, plans) in enumerate(planned, start=1):
            console.print(f"wave {index} {wave.name} ({wave.maxConcurrent} at once):", markup=False)
            for p in plans:
                console.print(f"  {p.stack} ({p.spec.stage.value}, {p.spec.cluster.name}): driver "
                              f"{p.moves_from[0]} -> {p.spec.driver.version}: {p.verdict()}",
                              markup=False, soft_wrap=True)
                console.print(f"    from: {p.moves_from[1]}", markup=False, soft_wrap=True)
            console.print(f"  before the next wave: {waits(wave)}", markup=False, soft_wrap=True)
    return Exit.failed_if(refused)
