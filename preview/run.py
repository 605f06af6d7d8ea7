"""Run the real Pulumi program offline, under Pulumi's mock runtime, and record what it registers.

This is how `gpu-rollout plan` previews a stack without a Pulumi CLI, a cloud or a cluster, and how the
tests exercise the program: the same ``__main__.py`` that ``pulumi up`` runs, fed the same config strings.
The mock engine echoes every input back as the resource's state; it never invents cloud outputs.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import runpy
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pulumi
from pulumi import _types as pulumi_types
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import rpc as pulumi_rpc
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2, source_pb2

from engine_contracts import resource_facts
from fleetspec.model import PROJECT
from preview.garbage import cyclic_gc_paused
from fleetspec.stacks import stack_name
from renderers.manifests import DEFAULT_ORGANIZATION

SOURCE_DIR = Path(__file__).resolve().parent.parent  # the checkout this package runs from


PROGRAM_FILE = "__main__.py"


@dataclass(frozen=True)
class RegisteredResource:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    urn: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)  # what a component registered (register_outputs)
    dependencies: tuple[str, ...] = ()  # URNs this resource waits for (depends_on and input dependencies)
    provider: str = ""  # "<provider URN>::<id>" of an explicit provider; empty for the default provider
    adopt: str = ""  # the ID of the existing cloud resource it imports (Pulumi's `import` option); empty: created


SECRET = "[secret]"


def _plain(value: Any) -> Any:
    """Engine values as JSON shows them: the wire format carries every number as a double, and a secret
    is shown as the engine's own preview shows it, never in clear."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict) and value.get(pulumi_rpc._special_sig_key) == pulumi_rpc._special_secret_sig:
        return SECRET
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# The offline preview never reaches a cluster: the provider's credentials point at a reserved, unresolvable
# name (RFC 2606 .invalid), and the certificate authority is the base64 of a plain-text marker.
OFFLINE_SERVER = "https://offline-preview.invalid"
OFFLINE_CA = base64.b64encode(b"offline preview: no certificate authority").decode()
_OFFLINE_KUBECONFIG = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "offline-preview", "cluster": {"server": OFFLINE_SERVER}}],
        "contexts": [{"name": "offline-preview", "context": {"cluster": "offline-preview", "user": "offline-preview"}}],
        "current-context": "offline-preview",
        "users": [{"name": "offline-preview", "user": {}}],
    }
)
OFFLINE_INVOKES: dict[str, dict[str, Any]] = {
    "azure-native:containerservice:listManagedClusterUserCredentials": {
        "kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(_OFFLINE_KUBECONFIG.encode()).decode()}]
    },
    "aws:eks/getCluster:getCluster": {"endpoint": OFFLINE_SERVER, "certificateAuthorities": [{"data": OFFLINE_CA}]},
}


STACK_REFERENCE = "pulumi:pulumi:StackReference"


class RecordingMocks(pulumi.runtime.Mocks):
    """Records each registration; a resource's state is its inputs plus a fake id.

    A stack reference answers with the outputs `pulumi stack output --json` shows: a reference to the
    stack itself (the program reads its own last deployment through one) with ``previous_outputs``, none
    before a first deployment; a reference to another stack (a prod stack reads its canary's) with that
    stack's entry in ``stack_outputs``, keyed by its name as the reference's last part, none when absent.

    A read of a cluster object (``Namespace.get``: the kube-system UID of the cluster identity) answers with its
    entry in ``cluster_objects``, keyed by type token and ID: offline there is none (an object with empty
    metadata), so nothing the cluster assigns is ever invented. A read is not a resource the program manages, so it is not recorded.
    """

    def __init__(
        self, previous_outputs: dict[str, Any] | None = None, stack_outputs: dict[str, dict[str, Any]] | None = None,
        stack: str | None = None, cluster_objects: dict[tuple[str, str], dict[str, Any]] | None = None,
    ) -> None:
        self.resources: list[RegisteredResource] = []
        self._registered: set[tuple[str, str]] = set()  # (type, name) of each in resources
        self.previous_outputs = dict(previous_outputs or {})
        self.stack_outputs = {name: dict(outputs) for name, outputs in (stack_outputs or {}).items()}
        self.stack = stack
        self.cluster_objects = dict(cluster_objects or {})

    def referenced_outputs(self, reference: object) -> dict[str, Any]:
        name = stack_name(str(reference))
        if self.stack is None or name == self.stack:
            return self.previous_outputs
        return self.stack_outputs.get(name, {})

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        # The mock monitor leaves ``custom`` unset for a read (ReadResource) and sets it for a registration.
        if args.custom is None and args.typ != STACK_REFERENCE and args.resource_id:
            # Offline the object is known and empty: a property left out would be unknown in a preview, and an
            # unknown in the identity output would leave every export unresolved.
            return args.resource_id, dict(self.cluster_objects.get((args.typ, args.resource_id), {"metadata": {}}))
        if (args.typ, args.name) in self._registered:
            # The engine refuses two resources with one URN; so must the offline preview.
            raise ValueError(f"duplicate resource {args.typ} named {args.name!r}")
        self._registered.add((args.typ, args.name))
        self.resources.append(
            RegisteredResource(args.typ, args.name, _plain(dict(args.inputs)), bool(args.custom),
                               provider=args.provider or "",
                               # A registration's ID is its `import` option's: the resource is adopted, not created.
                               adopt=(args.resource_id or "") if args.custom else "")
        )
        if args.typ == STACK_REFERENCE:
            outputs = self.referenced_outputs(args.inputs.get("name"))
            return f"{args.name}-id", {**args.inputs, "outputs": outputs, "secretOutputNames": []}
        return f"{args.name}-id", args.inputs  # the echo: itself, so the monitor answers with the request's bytes

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # Only the lookups that build the Kubernetes provider are answered, with values that cannot be
        # mistaken for a real cluster; any other invoke is a new dependency on the cloud and fails loudly.
        answer = OFFLINE_INVOKES.get(args.token)
        if answer is None:
            raise NotImplementedError(f"offline preview does not answer invoke {args.token}")
        return answer, []


class _DependencyRecordingMonitor(MockMonitor):
    """The mock monitor, also keeping what each registration waits for (the engine orders by it)."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.dependencies: dict[str, tuple[str, ...]] = {}
        self.component_outputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        # The stack's own registration asks the mocks nothing; transforms are MockMonitor's to resolve.
        response = (super().RegisterResource(request) if request.type == "pulumi:pulumi:Stack" or request.transforms
                    else self._register(request))
        self.dependencies[response.urn] = tuple(request.dependencies)
        return response

    def _register(self, request: Any) -> Any:
        """MockMonitor's registration, but a state that is the inputs echoed (:class:`RecordingMocks` echoes all
        but a StackReference's) is answered with the request's own serialized inputs instead of deserialized and
        serialized again: the same bytes, for a tenth of a 150-pool plan's rendering (benchmarks/plan_scale.py)."""
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs = pulumi_rpc.deserialize_properties(request.object)
        resource_id, state = self.mocks.new_resource(pulumi.runtime.MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=request.importId, custom=request.custom or False))
        if state is inputs:
            serialized = request.object
        else:  # the worker thread's own loop (run_program gives each one), as MockMonitor serializes
            serialized = asyncio.get_event_loop().run_until_complete(pulumi_rpc.serialize_properties(state, {}))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id or "", state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id or "", object=serialized)

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        # What a component registers is what the engine shows a stack policy of it.
        self.component_outputs[request.urn] = _plain(pulumi_rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)


@dataclass
class ProgramRun:
    stack: str
    resources: list[RegisteredResource]
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def custom_resources(self) -> list[RegisteredResource]:
        return [r for r in self.resources if r.custom]

    def of_type(self, type_token: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_token]


def _no_stack_trace() -> source_pb2.StackTrace:
    return source_pb2.StackTrace()


@contextmanager
def _stack_traces_off() -> Iterator[None]:
    """No call-stack capture per resource while the mock engine runs a program. The SDK records, for every
    registration and read, the program's call stack (``pulumi.runtime.resource._get_stack_trace``: every frame
    and its source line, for the engine's state and error positions) and sends it with the request; the mock
    monitor drops it unread, so the offline preview never uses it. On a 150-pool plan it was a fifth of each
    rendering (benchmarks/plan_scale.py). Pulumi 3.272 has no setting for it (no option, no environment
    variable: the capture is unconditional in register_resource and read_resource), hence this swap of the one
    function, for the mock run only and restored afterwards; under `pulumi up` the program runs unpatched."""
    captured = pulumi_resource._get_stack_trace
    pulumi_resource._get_stack_trace = _no_stack_trace
    try:
        yield
    finally:
        pulumi_resource._get_stack_trace = captured


@contextmanager
def _type_unwrapping_memoised() -> Iterator[None]:
    """The SDK's unwrapping of a property's type annotation (``Optional[Input[DaemonSetSpecArgs]]`` to
    ``DaemonSetSpecArgs``: ``pulumi._types.unwrap_type`` and ``unwrap_optional_type``) remembered per annotation
    while the mock engine runs a program. The SDK works it out again for every value it serializes and every output
    it resolves, from the same few hundred annotation objects, and the answer depends on the annotation alone; on a
    150-pool plan that was a tenth of each rendering (benchmarks/plan_scale.py). Pulumi has no setting for it, hence
    this swap for the mock run only, restored afterwards (the memory with it); under `pulumi up` the program runs
    unpatched."""
    originals = pulumi_types.unwrap_type, pulumi_types.unwrap_optional_type
    pulumi_types.unwrap_type = functools.lru_cache(maxsize=None)(originals[0])
    pulumi_types.unwrap_optional_type = functools.lru_cache(maxsize=None)(originals[1])
    try:
        yield
    finally:
        pulumi_types.unwrap_type, pulumi_types.unwrap_optional_type = originals


def run_program(
    config: dict[str, str],
    stack: str,
    program: Path = SOURCE_DIR / PROGRAM_FILE,
    previous_outputs: dict[str, Any] | None = None,
    stack_outputs: dict[str, dict[str, Any]] | None = None,
    cluster_objects: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> ProgramRun:
    """Run ``program`` under mocks with ``config`` (engine-style strings) and return what it registered.

    ``previous_outputs`` are the stack's last deployment as its outputs (none: a first deployment);
    ``stack_outputs`` the outputs of other stacks the program references, by stack name; ``cluster_objects``
    what the stack's cluster answers to the program's reads (none offline: ``RecordingMocks``). The program runs
    in its own folder, as the engine runs it (it reads the project's ``attestations/`` there).
    Exceptions the program raises (a SpecError for bad config) propagate unchanged.
    """
    # The mock runtime needs a current event loop (Python 3.12+ no longer makes one implicitly).
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    # The SDK calls the mock monitor from the loop's worker threads, and the monitor gives each worker an
    # event loop of its own. Make those loops here so they can be closed with ours; left to interpreter
    # exit they print "Exception ignored ... Invalid file descriptor".
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def _give_worker_a_loop() -> None:
        worker_loops.append(asyncio.new_event_loop())
        asyncio.set_event_loop(worker_loops[-1])

    loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="mock-monitor", initializer=_give_worker_a_loop))
    mocks = RecordingMocks(previous_outputs, stack_outputs, stack, cluster_objects)
    outputs: dict[str, Any] = {}
    # Only the given config may reach the program: an ambient PULUMI_CONFIG (say, from a Pulumi hook)
    # would otherwise leak into the preview through the runtime's environment fallback.
    ambient = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("PULUMI_CONFIG")}
    working_dir, program = Path.cwd(), program.absolute()
    with cyclic_gc_paused(), _stack_traces_off(), _type_unwrapping_memoised():
        try:
            os.chdir(program.parent)
            pulumi.runtime.reset_options(project=PROJECT, stack=stack, preview=True)
            monitor = _DependencyRecordingMonitor(mocks)
            # The file backend's organization, as `pulumi` names a stack there (renderers.manifests.DEFAULT_ORGANIZATION).
            pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor,
                                     organization=DEFAULT_ORGANIZATION)
            pulumi.runtime.set_all_config(dict(config))

            @pulumi.runtime.test
            def _run() -> pulumi.Output[None]:
                runpy.run_path(str(program), run_name="__main__")
                root = pulumi_settings.get_root_resource()
                exported = dict(getattr(root, "outputs", {}))
                return pulumi.Output.from_input(exported).apply(outputs.update)

            _run()
            urns = _urns_by_type_and_name(monitor)
        finally:
            pulumi.runtime.reset_options(project=PROJECT, stack=stack)
            loop.run_until_complete(loop.shutdown_default_executor())
            for worker_loop in worker_loops:
                worker_loop.close()
            loop.close()
            os.environ.update(ambient)
            os.chdir(working_dir)
            asyncio.set_event_loop(None)
    resources = []
    for recorded in mocks.resources:
        urn = urns.get((recorded.type, recorded.name), "")
        resources.append(replace(recorded, urn=urn, dependencies=monitor.dependencies.get(urn, ()),
                                 outputs=monitor.component_outputs.get(urn, {})))
    # The order of arrival is the SDK's (each resource registers when its inputs resolve, on worker
    # threads): every reader gets them in one canonical order instead.
    resources.sort(key=resource_facts.canonical_order)
    return ProgramRun(stack=stack, resources=resources, outputs=outputs)


def redeployed(run: ProgramRun) -> ProgramRun:
    """What the program registers when ``run`` is its own last deployment, without running it again.

    The program reads its last deployment only through ``components.previous.PreviousDeployment``: the
    component registers the referenced outputs, and each cloud pool's replace-only record defaults to what
    it plans, which is what ``run``'s outputs hold. So the second rendering differs from ``run`` only in
    that component's outputs (tests/preview/test_run.py renders both ways for every example and compares).
    """
    own = {"outputs": _without_nulls(run.outputs)}  # as registered: the SDK sends no key whose value is None
    resources = [
        replace(r, outputs=dict(own)) if r.type == resource_facts.PREVIOUS_DEPLOYMENT_COMPONENT else r
        for r in run.resources
    ]
    return ProgramRun(stack=run.stack, resources=resources, outputs=run.outputs)


def recanaried(run: ProgramRun, canary_outputs: dict[str, Any]) -> ProgramRun:
    """What the program registers when its canary's outputs are ``canary_outputs``, without running it again.

    The program reads its canary only through ``components.promotion.CanaryGate``'s StackReference, into the
    promotion record's canary fields (``resource_facts.canary_fields``); nothing else it registers or exports
    depends on the canary. So the rendering differs from ``run`` only in those fields (tests/preview/test_run.py
    renders both ways for every example prod stack and compares)."""
    fields = resource_facts.canary_fields(resource_facts.read_stack_outputs(canary_outputs))

    def patched(resource: RegisteredResource) -> RegisteredResource:
        if resource.type != resource_facts.CONFIG_MAP or not resource_facts.is_promotion_record(resource.inputs):
            return resource
        return replace(resource, inputs={**resource.inputs, "data": {**resource.inputs.get("data", {}), **fields}})

    return ProgramRun(stack=run.stack, resources=[patched(r) for r in run.resources], outputs=run.outputs)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _urns_by_type_and_name(monitor: Any) -> dict[tuple[str, str], str]:
    """URNs carry the parent chain (``Parent$Child``), which is how tests see the component tree."""
    urns = {}
    for urn in monitor.get_registered_resources():
        type_chain, name = urn.split("::")[2:4]
        urns[(type_chain.split("$")[-1], name)] = urn
    return urns


__all__ = ["ProgramRun", "RecordingMocks", "RegisteredResource", "recanaried", "redeployed", "run_program"]
