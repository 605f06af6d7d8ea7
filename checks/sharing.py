"""What a GPU node advertises to the scheduler, whole or sliced, as verify's ``gpu-count`` compares it: full GPUs
(``nvidia.com/gpu``), time-sliced ones (``nvidia.com/gpu.replicas`` on each GPU, advertised as ``nvidia.com/gpu``
or, renamed, ``nvidia.com/gpu.shared``), MIG devices (``nvidia.com/mig-<profile>``), and the MIG layout
mig-manager applied (``nvidia.com/mig.config``, ``nvidia.com/mig.config.state``).

An upgrade that resets the device plugin's config or mig-manager's layout leaves the node Ready with the wrong
resources: the models that asked for a slice no longer schedule. So an upgraded node is held to its pool's
declaration (``nodePools[].gpusPerNode``, ``gpuReplicas``, ``migConfig``) and to the pool's nodes not yet upgraded,
which show what the pool advertised before the change.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from checks.nodestate import upgrade_state
from checks.objects import Obj, labels_of, status_of
from fleetspec.model import NodePool
from gpu_knowledge import labels

SHARED_RESOURCE = f"{labels.GPU_RESOURCE}.shared"  # time-sliced GPUs under the plugin's renameByDefault
MIG_CONFIG_STATE = f"{labels.MIG_CONFIG}.state"  # set by mig-manager: pending, rebooting, success, failed
MIG_APPLIED = "success"
# A node of the pool not yet upgraded shows what the pool advertised, unless the upgrade is working on it.
_SETTLED = {"", labels.UPGRADE_REQUIRED, labels.UPGRADE_DONE}


def _count(value: object) -> int | None:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Advertised:
    """A node's GPU resources (allocatable) and the sharing labels they follow from."""

    gpus: int | None  # nvidia.com/gpu; None: not advertised
    shared: int | None  # nvidia.com/gpu.shared; None: not advertised
    mig: dict[str, int] = field(default_factory=dict)  # nvidia.com/mig-<profile> -> devices
    replicas: int = 1  # nvidia.com/gpu.replicas (time-slicing or MPS); 1 when unset
    strategy: str | None = None  # nvidia.com/gpu.sharing-strategy
    mig_config: str | None = None  # nvidia.com/mig.config
    mig_state: str | None = None  # nvidia.com/mig.config.state

    def facts(self) -> dict[str, object]:
        """What must survive the upgrade, by the name the cluster gives it."""
        out: dict[str, object] = {labels.GPU_RESOURCE: self.gpus, SHARED_RESOURCE: self.shared,
                                  labels.GPU_REPLICAS: self.replicas, labels.GPU_SHARING_STRATEGY: self.strategy,
                                  labels.MIG_CONFIG: self.mig_config}
        out.update(self.mig)
        return out

    def as_json(self) -> dict[str, object]:
        return {**{k: v for k, v in self.facts().items() if v is not None}, MIG_CONFIG_STATE: self.mig_state}


def advertised(node: Obj) -> Advertised:
    allocatable = status_of(node).get("allocatable") or {}
    node_labels = labels_of(node)
    mig = {key: count for key, value in allocatable.items()
           if key.startswith(labels.MIG_RESOURCE_PREFIX) and (count := _count(value)) is not None}
    return Advertised(
        gpus=_count(allocatable.get(labels.GPU_RESOURCE)), shared=_count(allocatable.get(SHARED_RESOURCE)),
        mig=dict(sorted(mig.items())), replicas=_count(node_labels.get(labels.GPU_REPLICAS)) or 1,
        strategy=node_labels.get(labels.GPU_SHARING_STRATEGY), mig_config=node_labels.get(labels.MIG_CONFIG),
        mig_state=node_labels.get(MIG_CONFIG_STATE))


def uses_mig(pool: NodePool, seen: Advertised) -> bool:
    return pool.migConfig != labels.MIG_CONFIG_DISABLED or bool(seen.mig)


def against_declaration(pool: NodePool, seen: Advertised) -> list[str]:
    """How the node differs from what its pool declares (nothing: as declared)."""
    problems = []
    declared = pool.migConfig
    if declared != labels.MIG_CONFIG_DISABLED:
        if seen.mig_config != declared:
            problems.append(f"{labels.MIG_CONFIG} is {seen.mig_config or 'unset'}, pool {pool.name} declares "
                            f"migConfig {declared}")
        if seen.mig_state != MIG_APPLIED:
            problems.append(f"{MIG_CONFIG_STATE} is {seen.mig_state or 'unset'}, not {MIG_APPLIED}: mig-manager has "
                            "not applied the layout")
        if not seen.mig and not seen.gpus:
            problems.append(f"advertises no MIG device and no {labels.GPU_RESOURCE}")
        return problems
    if seen.mig_config not in (None, labels.MIG_CONFIG_DISABLED) or seen.mig:
        mig = ", ".join(f"{k}={v}" for k, v in seen.mig.items()) or f"{labels.MIG_CONFIG}={seen.mig_config}"
        problems.append(f"runs MIG ({mig}) where pool {pool.name} declares whole GPUs (migConfig "
                        f"{labels.MIG_CONFIG_DISABLED})")
        return problems
    if seen.mig_state == "failed":
        problems.append(f"{MIG_CONFIG_STATE} is failed")
    if seen.replicas != pool.gpuReplicas:
        problems.append(f"{labels.GPU_REPLICAS} is {seen.replicas}, pool {pool.name} declares gpuReplicas "
                        f"{pool.gpuReplicas}")
    resource, count = (SHARED_RESOURCE, seen.shared) if seen.shared is not None else (labels.GPU_RESOURCE, seen.gpus)
    expected = pool.gpusPerNode * pool.gpuReplicas
    if count is None:
        problems.append(f"advertises no allocatable {labels.GPU_RESOURCE} (pool {pool.name} declares "
                        f"{pool.gpusPerNode})")
    elif count != expected:
        sliced = f" x {pool.gpuReplicas} replicas (gpuReplicas) = {expected}" if pool.gpuReplicas > 1 else ""
        problems.append(f"allocatable {resource} is {count}, pool {pool.name} declares {pool.gpusPerNode}{sliced}")
    return problems


def settled_peers(peers: list[Obj]) -> list[Obj]:
    """The pool's nodes not yet upgraded that the upgrade is not working on (a node being drained or restarted
    advertises nothing for a while, which says nothing of the pool)."""
    return [p for p in peers if upgrade_state(p) in _SETTLED and not (p.get("spec") or {}).get("unschedulable")]


def against_peers(seen: Advertised, peers: list[Obj]) -> tuple[list[str], str | None]:
    """What changed from the pool's nodes not yet upgraded (their most common shape), and that shape's node count;
    ``(changes, None)`` where no settled node of the pool is left on the old driver to compare with."""
    shapes = Counter(tuple(sorted((k, str(v)) for k, v in advertised(p).facts().items())) for p in settled_peers(peers))
    if not shapes:
        return [], None
    mine = tuple(sorted((k, str(v)) for k, v in seen.facts().items()))
    if mine in shapes:
        return [], f"as the pool's {shapes[mine]} node(s) not yet upgraded"
    (before, nodes), = shapes.most_common(1)
    old, new = dict(before), dict(mine)
    changes = [f"{key} {old.get(key, 'None')} -> {new.get(key, 'None')}" for key in sorted(set(old) | set(new))
               if old.get(key, "None") != new.get(key, "None")]
    return changes, f"the pool's {nodes} node(s) not yet upgraded"
