"""The shape of each verb's ``--json`` document, one model per document: the verbs build their documents as these
models and rollout/documents.py prints them (``model_dump``), ``make docs`` writes docs/schemas/<verb>.schema.json
from them, and the tests validate what every verb really prints against those files.

The schema is the code: a field declared here is a key printed, in the order declared (a field with a default only
where the verb sets it, see :class:`Document`). Records below ``rollout`` (a policy's verdict, a check's result, a
stack file) know nothing of these shapes: the verb, or a builder here (``Violation.of``, ``CheckResult.of``), makes
the model from their attributes. Payloads that are not ours to shape (a resource's inputs, a check's evidence,
stack outputs as the program exports them, the simulator's and watch's per-pool records) are objects without a
fixed key set.

Versioning (``schemaVersion``, rollout/documents.py): adding a key keeps the version; removing or renaming one,
or changing what a value means, raises it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

import checks.results
from checks.results import Status
from engine_contracts.resource_facts import outputs_json_schema
from vocabulary.verdicts import ChangeMarker, Verdict as PlanVerdict
from vocabulary.errors import ErrorKind

if TYPE_CHECKING:
    from checks.hold import Release
    from checks.pause import PauseReport
    from checks.soak import Soak
    from policy.evaluate import Violation as Verdict


# A JSON number as the verb computed it: an int stays an int (pydantic's ``float`` would print 24 as 24.0).
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _version_first_and_required(schema: dict[str, Any]) -> None:
    """``schemaVersion`` is in every document (rollout/documents.py prints it first), so the schema requires it,
    although a verb need not pass it."""
    schema["properties"]["schemaVersion"].pop("default", None)
    required = schema.setdefault("required", [])
    if "schemaVersion" not in required:
        required.insert(0, "schemaVersion")


class Document(_Shape):
    """A verb's document. Dumped with ``exclude_unset``: a key that has a default here is printed only where the
    verb gives it a value (None included), so the models say which keys may be absent and the verbs which are."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_version_first_and_required)

    schemaVersion: Literal[1] = Field(1, description="The version of this document's shape (rollout/documents.py).")


# ---------------------------------------------------------------- shared parts


class Problem(_Shape):
    key: str = Field(description="The key path as `pulumi config set --path` takes it, or the flag or file.")
    item: str = Field(description="The names of the list items on the path (a pool's name), else empty.")
    message: str


class ErrorBody(_Shape):
    code: int = Field(description="The exit code (2 invalid input, 1 a cluster or backend failure, 70 a defect).")
    kind: ErrorKind = Field(
        description="refused: the verb itself declined (rollback refused, and why); the rest name the input at fault.")
    message: str = Field(description="What stderr says.")
    problems: list[Problem]


class ErrorDocument(Document):
    """What stdout carries when a verb stops on an error in --json mode."""

    error: ErrorBody


class Violation(_Shape):
    policy: str
    enforcement: Literal["mandatory", "advisory", "disabled"]
    resource: str = Field(description="The resource's logical name, or 'stack'.")
    message: str
    configKeys: list[str] = Field(description="The stack-config keys whose edit fixes it (docs/config.md paths).")
    fix: str = Field(description="The policy's remediation.")
    assumption: str | None = Field(None, description="Present when the finding rests on an offline assumption.")

    @classmethod
    def of(cls, verdict: Verdict, assumption: str | None = None) -> Violation:
        """A policy's verdict; ``assumption`` (the key present) where it rests on an offline assumption."""
        found = cls(policy=verdict.policy, enforcement=verdict.enforcement.value, resource=verdict.resource,
                    message=verdict.message, configKeys=list(verdict.config_keys), fix=verdict.fix)
        if assumption is not None:
            found.assumption = assumption
        return found


class CheckResult(_Shape):
    id: str
    status: Status
    subject: str
    message: str
    evidence: dict[str, Any] | None = Field(None, description="Present where the check gathered evidence.")

    @classmethod
    def of(cls, result: checks.results.CheckResult) -> CheckResult:
        found = cls(id=result.id, status=result.status, subject=result.subject, message=result.message)
        if result.evidence is not None:
            found.evidence = result.evidence
        return found


# What pause or resume did to a stack's nodes (checks.pause.PauseReport): PauseDocument and StackPause declare these
# keys where they print them.
Changed = Annotated[list[str], Field(description="Nodes this run labelled or unlabelled.")]
Foreign = Annotated[list[str], Field(description="Nodes held by a skip label someone else set: never touched.")]


# ---------------------------------------------------------------- offline verbs


class Source(_Shape):
    role: str
    source: str
    assumed: bool
    answeredBy: list[str]
    line: str


class Basis(_Shape):
    stack: str
    stackFile: str
    projectDir: str
    projectFound: str
    sources: list[Source]


class PlannedResource(_Shape):
    type: str
    name: str
    inputs: dict[str, Any]
    adopt: str | None = Field(None, description="The ID of the existing cloud pool it adopts (Pulumi's `import`: "
                              "nodePools[].aks.adopt / eks.adopt); null where it is created or managed already.")


class ChangedField(_Shape):
    field: str
    old: str
    new: str


class PlannedChange(_Shape):
    marker: ChangeMarker = Field(
        description="Against the last deployment's rendering (preview/changes.py).")
    type: str
    name: str
    fields: list[ChangedField] = Field(description="What a reviewer checks, old → new (update, replace).")
    replacedBy: list[str] = Field(description="The replace-only fields that differ (replace).")


class PlanDocument(Document):
    stack: str
    resources: list[PlannedResource]
    outputs: Annotated[dict[str, Any], WithJsonSchema(outputs_json_schema())] = Field(
        description="The stack outputs as `pulumi up` would export them (engine_contracts.resource_facts.outputs).")
    basis: Basis | None = None
    violations: list[Violation]
    verdict: PlanVerdict = Field(
        description="The one verdict (vocabulary/verdicts.py): refused on a mandatory violation or, with "
        "--from-cluster, a failed live check; admitted-with-advice where advisory ones are left; else admitted.")
    live: list[CheckResult] | None = Field(None, description="With --from-cluster: preflight's checks of the "
                                           "policies' own questions, on what the cluster runs; null offline.")
    changes: list[PlannedChange] | None = Field(
        None, description="Each resource marked against the last deployment's rendering; null where the last "
        "deployment is known by its outputs alone (--previous-outputs, --from-backend).")


class Revision(_Shape):
    revision: str
    commit: str | None


class Change(_Shape):
    subject: str
    field: str
    base: Any
    head: Any


class Risk(_Shape):
    kind: str
    text: str
    policy: str | None
    enforcement: str | None


class ViolationDiff(_Shape):
    introduced: list[Violation]
    fixed: list[Violation]
    standing: list[Violation]


class StackDiff(_Shape):
    stack: str
    file: str
    status: str
    changes: list[Change]
    violations: ViolationDiff
    risks: list[Risk]
    note: str | None
    basis: list[Source] | None = None
    owners: list[str] | None = Field(None, description="models[].owners of the models on the pools this change "
                                     "moves (only where any)")


class PackChange(_Shape):
    kind: str = Field(description="level | trusted-key | settings | entry | config | code")
    file: str = Field(description="The path in the project, e.g. policy/prod.json.")
    policy: str | None
    base: str | None
    head: str | None
    text: str


class DiffDocument(Document):
    base: Revision
    head: Revision
    stacks: list[StackDiff]
    unchanged: list[str]
    pack: list[PackChange] | None = Field(
        None, description="Present only where the change touches policy/: every change of the pack, each a risk.")


class StackEntry(_Shape):
    stack: str
    file: str
    stage: str
    environment: str
    cloud: str
    canary: str
    minSoakHours: Number | None
    aksResourceGroup: str
    aksClusterName: str
    eksClusterName: str
    eksRegion: str
    existingContext: str
    maintenanceWindow: str
    problem: str | None


class StacksDocument(Document):
    stacks: list[StackEntry]


class Deployment(StackEntry):
    deploy: bool
    reason: str
    packRef: str
    deployedCommit: str


class Skipped(_Shape):
    stack: str
    reason: str


class DeployPlanDocument(Document):
    head: str
    canary: list[Deployment]
    prod: list[Deployment]
    skip: list[Skipped]


IntOrPercent = int | str  # an upgrade policy's maxUnavailable: a count or "25%"


class SimulatedPolicy(_Shape):
    policy: str = Field(description="The upgrade policy (the ClusterPolicy's, or a pool's NVIDIADriver's).")
    pools: list[str]
    autoUpgrade: bool
    maxParallelUpgrades: int
    maxUnavailable: IntOrPercent


class SimulatedSpan(_Shape):
    name: str = Field(description="The wave (its number) or the pool.")
    nodes: int
    startSeconds: Number | None = Field(description="null: it never started.")
    endSeconds: Number | None = Field(description="null: it never ended.")
    minutes: Number | None


class SimulatedModel(_Shape):
    model: str
    replicas: int
    minAvailable: int
    availableAtStart: int
    lowestAvailable: int
    minutesBelowMinAvailable: Number


class SimulatedStall(_Shape):
    node: str
    pool: str
    state: str
    cause: str
    pdb: str | None = Field(description="namespace/name of the PodDisruptionBudget that blocked it; null: none.")
    detail: str
    sinceSeconds: Number
    untilSeconds: Number | None = Field(description="null: it never ended (a stall for good).")


class Prediction(_Shape):
    seconds: Number | None = Field(description="null: the rollout never ends.")
    minutes: Number | None
    waves: list[SimulatedSpan]
    pools: list[SimulatedSpan]
    models: list[SimulatedModel]
    stalls: list[SimulatedStall]
    failedNodes: list[str]
    peakUnavailableNodes: int
    peakUnavailableGpus: int
    replicasUnplacedAtStart: int
    validationJobWaits: int


class BoundPool(_Shape):
    pool: str
    wave: int
    nodes: int
    maxNodesOutAtOnce: int
    packAdmits: int | None = Field(None, description="In the bound within what the policy pack admits: the most "
                                   "nodes of the pool at once it admits (null: no limit, or the physical bound).")
    nodeSeconds: Number
    seconds: Number


class BoundModel(_Shape):
    model: str
    evictions: int
    allowance: int
    loadSeconds: Number
    seconds: Number


class LowerBound(_Shape):
    seconds: Number
    minutes: Number
    limitedBy: str
    pools: list[BoundPool]
    models: list[BoundModel]


class Parallelism(_Shape):
    maxParallelUpgrades: int
    maxUnavailable: IntOrPercent
    podDeletionTimeoutSeconds: int | None = Field(None, description="podDeletion.timeoutSeconds set with it (per "
                                                  "pool); null: the configured one is kept.")


class PolicyRecommendation(_Shape):
    policy: str
    pools: list[str]
    nodes: int
    maxParallelUpgrades: int | None = Field(description="null: none keeps every model at its minimum.")
    maxUnavailable: IntOrPercent | None
    podDeletionTimeoutSeconds: int | None = Field(None, description="The pod-deletion timeout that parallelism "
                                                  "needs (per pool); null: the configured one.")
    reason: str = Field(description="How it was chosen, in words.")
    runs: int
    confirmed: Parallelism | None = Field(description="The values the whole-fleet simulation confirmed; null: none.")


class StackChangeEntry(_Shape):
    key: str = Field(description="The config key path, as `pulumi config set --path` takes it.")
    value: int | str
    pool: str | None = Field(None, description="The pool whose own upgradePolicy it is (per-pool recommendations).")


class Recommendation(_Shape):
    perPool: bool
    maxParallelUpgrades: int | None
    maxUnavailable: IntOrPercent | None
    perPolicy: list[PolicyRecommendation]
    predicted: Prediction | None = Field(description="The rollout with the recommendation; null: none found.")
    ratio: Number | None
    withinPackRatio: Number | None = Field(None, description="The predicted duration over withinPackBound: what the "
                                           "controller's schedule costs beyond the pack's rules.")
    stackChange: list[StackChangeEntry] | None = Field(None, description="The stack-file change that applies it; "
                                                      "present where a recommendation was found.")


class ScheduleChange(_Shape):
    waves: list[int]
    pools: list[str]
    seconds: Number | None


class ScheduleHeld(_Shape):
    waves: list[int]
    pools: list[str]


class Schedule(_Shape):
    thisChange: ScheduleChange
    held: ScheduleHeld
    waveDwellHours: Number
    upgradeSeconds: Number | None
    wholeRolloutSeconds: Number | None


class SimulateDocument(Document):
    stack: str
    source: str
    seed: int
    policies: list[SimulatedPolicy]
    beyondThePack: list[str] = Field(
        default_factory=list, description="Where a policy as simulated is one the policy pack refuses: "
        "canary-one-node-at-a-time (maxParallelUpgrades not 1 on a canary's pool) or "
        "parallelism-within-spare-capacity (more nodes of a pool at once than it admits); `gpu-rollout plan` refuses "
        "a stack that sends it. Empty: neither rule refuses the upgrade controller's policies (EKS node-group "
        "updates, which the second rule also judges, are not simulated).")
    predicted: Prediction
    lowerBound: LowerBound
    withinPackBound: LowerBound | None = Field(
        None, description="The same bound with no pool rolling more nodes at once than the policy pack admits "
        "(canary-one-node-at-a-time, parallelism-within-spare-capacity): the least any schedule the pack lets "
        "through needs; null where it admits no parallelism on a pool.")
    ratio: Number | None
    recommended: Recommendation
    schedule: Schedule = Field(description="This change's released waves and the held ones, and how long the change "
                               "and the whole rollout take with rollout.waveDwellHours between waves "
                               "(simulate/schedule.py).")


class RollbackChange(_Shape):
    path: str
    old: Any
    new: Any
    secret: bool
    remove: bool


class RollbackStep(_Shape):
    title: str
    changes: list[RollbackChange]
    commands: list[str] = Field(description="The pulumi commands of the step, in order, the last one `pulumi up`.")


class RollbackDocument(Document):
    stack: str
    target: dict[str, Any]
    driver: dict[str, Any]
    how: str
    canary: Any
    allConfig: bool
    changes: list[RollbackChange]
    leftAlone: list[RollbackChange]
    notes: list[str]
    steps: list[RollbackStep]
    applies: bool


# ---------------------------------------------------------------- live verbs


class PreflightDocument(Document):
    stack: str
    checks: list[CheckResult]


class VerifyDocument(Document):
    stack: str
    passed: bool
    smoke: bool
    checks: list[CheckResult]
    attestation: str | None = Field(description="The attestation file written, if any.")
    attestationError: str | None = None


class WatchDocument(Document):
    stack: str
    owner: Literal["operator", "image"]
    at: Number
    complete: bool
    pools: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    models: list[dict[str, Any]]
    operator: list[dict[str, Any]] | None = None
    events: list[dict[str, Any]] | None = None
    triggers: list[dict[str, Any]]
    slo: list[dict[str, Any]]
    paused: dict[str, Any] | None = Field(None, description="Operator-owned stacks: what a trigger's pause did.")
    pauseError: str | None = None
    evictions: dict[str, Any] | None = None


class PauseDocument(Document):
    stack: str
    verb: Literal["pause", "resume"]
    changed: Changed
    unchanged: list[str]
    foreign: Foreign
    done: list[str]
    held: list[str]
    validationHeld: list[str]
    error: str | None

    @classmethod
    def of(cls, stack: str, verb: Literal["pause", "resume"], report: PauseReport, error: str | None) -> PauseDocument:
        return cls(stack=stack, verb=verb, changed=report.changed, unchanged=report.unchanged, foreign=report.foreign,
                   done=report.done, held=report.held, validationHeld=report.validation_held, error=error)


class Hold(_Shape):
    driver: str
    checks: list[str]
    at: str
    message: str


# release-node prints one of two shapes, each in its own key order, and this is the schema of both: refused, this
# model with its four required keys only (stack, node, released false, the error); released, ReleasedDocument,
# every key of it (in that model's order). A key added to one is added to the other.
class ReleaseDocument(Document):
    stack: str
    node: str
    released: bool
    error: str | None
    pool: str | None = Field(None, description="Present once released, as are hold, uncordoned and note.")
    hold: Hold | None = None
    uncordoned: bool | None = None
    note: str | None = None


class ReleasedDocument(Document):
    """The node released: what release-node prints then, in its order (its schema is :class:`ReleaseDocument`)."""

    stack: str
    released: Literal[True]
    node: str
    pool: str
    uncordoned: bool
    note: str | None
    hold: Hold | None
    error: None

    @classmethod
    def of(cls, stack: str, release: Release) -> ReleasedDocument:
        hold = release.hold
        return cls(stack=stack, released=True, node=release.node, pool=release.pool, uncordoned=release.uncordoned,
                   note=release.note or None, error=None,
                   hold=None if hold is None else Hold(driver=hold.driver, checks=list(hold.checks), at=hold.at,
                                                       message=hold.message))


class SoakDocument(Document):
    stack: str
    driver: str | None = Field(description="null where its upgraded nodes move to more than one driver.")
    soakStart: str | None
    minSoakHours: Number | None
    prodStacks: list[str]
    readyAt: str | None
    ready: bool
    attested: str | None
    waiting: list[str]
    reason: str

    @classmethod
    def of(cls, soak: Soak) -> SoakDocument:
        """A canary's readiness (checks.soak.readiness), its moments as UTC timestamps to the second."""

        def stamp(value: float | None) -> str | None:
            return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None

        return cls(stack=soak.stack, driver=soak.driver, soakStart=stamp(soak.start), minSoakHours=soak.hours_needed,
                   prodStacks=list(soak.prod_stacks), readyAt=stamp(soak.ready_at), ready=soak.ready,
                   attested=soak.attested, waiting=list(soak.waiting), reason=soak.reason)


# ---------------------------------------------------------------- the fleet


class FleetWaitFor(_Shape):
    verify: str
    attestation: bool
    soakHours: Number


class FleetPlanDriver(_Shape):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str | None = Field(alias="from", description="The last deployment's driver, as `plan` judges the stack "
                              "against; driver.previousVersion before a first deployment.")
    fromSource: str = Field(description="Where `from` was read.")
    to: str = Field(description="driver.version.")
    owner: Literal["operator", "image"]


class FleetPlanPool(_Shape):
    name: str
    driver: str = Field(description="What the pool's nodes move to (FleetSpec.pool_target).")
    held: bool
    why: str = Field(description="Released in which wave, or why it is held, in words.")


class FleetPlanStack(_Shape):
    stack: str
    stage: str
    cluster: str
    driver: FleetPlanDriver
    pools: list[FleetPlanPool] = Field(description="Each pool, released or held, with its driver and why.")
    refused: bool
    verdict: str
    problem: str | None = Field(description="Why the stack could not be rendered, if so.")
    violations: list[Violation]


class FleetPlanWave(_Shape):
    name: str
    maxConcurrent: int
    waitFor: FleetWaitFor
    waits: str
    stacks: list[FleetPlanStack]


class FleetPlanDocument(Document):
    # 2: stacks' pools are objects (name, driver, held, why), no longer strings under released/held.
    schemaVersion: Literal[2] = Field(2, description="The version of this document's shape (rollout/documents.py).")  # type: ignore[assignment]
    refused: bool
    waves: list[FleetPlanWave]


class TrainHalt(_Shape):
    stack: str
    kind: str = Field(description="The trigger kind (fleet file haltOn).")
    message: str


class HaltRecord(_Shape):
    cause: str
    at: str = Field(description="When, as a Kubernetes MicroTime.")
    by: str
    wave: str | None = Field(None, description="A rollback's halt of this wave and those after it; absent: the "
                             "whole train.")


class FleetStatusDocument(Document):
    current: str | None
    complete: bool
    next: str
    halt: TrainHalt | None = Field(description="The bad sign that halts the train now; null: none.")
    halted: HaltRecord | None = Field(description="The halt record (cause, at, by) while the train is halted: the "
                                      "earliest found in any cluster of the fleet.")
    wavesHalted: list[HaltRecord] = Field(default_factory=list, description="Each wave a rollback halted (cause, "
                                          "at, by, wave): it and the waves after it stay where they are.")
    unread: list[str] = Field(default_factory=list, description="The clusters whose halt record could not be read, "
                              "and why.")
    lease: dict[str, Any] | None
    blocked: list[str]
    signs: list[dict[str, Any]]
    limits: dict[str, Any]
    waves: list[dict[str, Any]]


class StackPause(_Shape):
    stack: str
    changed: Changed
    unchanged: list[str]
    foreign: Foreign
    done: list[str]
    held: list[str]
    validationHeld: list[str]
    error: str | None
    imageOwned: str | None

    @classmethod
    def of(cls, stack: str, report: PauseReport, error: str | None, image_owned: str | None) -> StackPause:
        return cls(stack=stack, changed=report.changed, unchanged=report.unchanged, foreign=report.foreign,
                   done=report.done, held=report.held, validationHeld=report.validation_held, error=error,
                   imageOwned=image_owned)


class StackPauseError(_Shape):
    stack: str
    error: str | None
    imageOwned: str | None


class Up(_Shape):
    stack: str
    ok: bool | None = Field(description="Did its `up` succeed; null without --yes (not run).")
    detail: str


class ApprovedUp(_Shape):
    stack: str
    configDigest: str = Field(description="sha256 of the stack file its `up` runs.")
    packRef: str | None = Field(description="The commit whose policy pack its `up` enforces.")


class ApprovalPlan(_Shape):
    """What a person approves for the withheld `up`s (`fleet advance --expect` refuses anything else)."""

    commit: str = Field(description="The commit the plan was made at.")
    doneWaves: list[str] = Field(description="The waves the plan's run saw done.")
    ups: list[ApprovedUp]


class HaltRecordDocument(_Shape):
    cluster: str
    stacks: list[str]
    halted: dict[str, Any] | None = Field(description="The train's halt recorded there (cause, at, by).")
    wavesHalted: list[dict[str, Any]]
    changed: bool = Field(description="This run wrote (halt) or removed (resume) the record.")
    error: str | None = Field(description="Why the record could not be read or written.")


class FleetAdvanceDocument(FleetStatusDocument):
    applies: bool = Field(description="false: what --yes would do; true: what was done.")
    ups: list[Up]
    withheld: list[str]
    approval: ApprovalPlan | None = Field(None, description="The withheld `up`s as a person approves them.")
    paused: list[StackPause | StackPauseError] | None = None
    records: list[HaltRecordDocument] | None = Field(None, description="A halt: its record in each cluster.")
    ownPauses: list[StackPause | StackPauseError] | None = None


class FleetHaltDocument(Document):
    halted: HaltRecord | None
    records: list[HaltRecordDocument] = Field(description="The halt record in each cluster of the fleet.")
    paused: list[StackPause | StackPauseError]


class FleetResumeDocument(Document):
    cleared: dict[str, Any] | None
    records: list[HaltRecordDocument] = Field(description="The halt record of each cluster, after: an error names "
                                              "one not cleared.")
    resumed: list[StackPause | StackPauseError]


class SettingFinding(_Shape):
    setting: str = Field(description="The setting read, in the words of GitHub's settings pages.")
    verdict: Literal["ok", "unsafe", "unreadable"] = Field(
        description="unreadable: the API refused or failed; never taken as safe.")
    seen: str
    fix: str | None = Field(description="How to make it safe (unsafe), or what the token lacks (unreadable).")


class DoctorGithubDocument(Document):
    repository: str
    apiUrl: str
    findings: list[SettingFinding]
    unsafe: int
    unreadable: int


class ReviewPin(_Shape):
    stack: str
    component: str = Field(description="driver, previous driver (held pools), operator chart, DCGM Exporter, "
                           "driver or node image of <pool> generation <id>, fabric manager of <pool>, CUDA of <model>")
    pinned: str
    status: str = Field(description="supported | end of support | unsupported | unknown (not in the tables)")
    endOfSupport: str | None = Field(description="ISO date, where the tables have one")
    newer: str | None = Field(description="The newest release the tables know in the same branch or line")
    why: str


class ReviewUnloadable(_Shape):
    stack: str
    problem: str


class ReviewDocument(Document):
    date: str = Field(description="The day judged (end of support is compared with it)")
    pins: list[ReviewPin]
    unloadable: list[ReviewUnloadable]


# The document each --json verb prints (besides ErrorDocument, which any of them may print instead).
DOCUMENTS: dict[str, type[Document]] = {
    "plan": PlanDocument,
    "diff": DiffDocument,
    "deploy-plan": DeployPlanDocument,
    "stacks": StacksDocument,
    "review": ReviewDocument,
    "simulate": SimulateDocument,
    "rollback": RollbackDocument,
    "preflight": PreflightDocument,
    "verify": VerifyDocument,
    "watch": WatchDocument,
    "pause": PauseDocument,
    "resume": PauseDocument,
    "release-node": ReleaseDocument,
    "soak": SoakDocument,
    "fleet-plan": FleetPlanDocument,
    "fleet-status": FleetStatusDocument,
    "fleet-advance": FleetAdvanceDocument,
    "fleet-halt": FleetHaltDocument,
    "fleet-resume": FleetResumeDocument,
    "doctor-github": DoctorGithubDocument,
    "error": ErrorDocument,
}


def schema(verb: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a verb's document."""
    document = DOCUMENTS[verb].model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"docs/schemas/{verb}.schema.json", **document}
