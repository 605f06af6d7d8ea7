"""Precompiled driver images: which ones a change needs, and whether the registry has them.

With precompiled kernel modules the operator runs, for each kernel and OS of a pool's nodes, the image
``<driverRepository>/driver:<branch>-<kernel>-<os>`` (shared/reference/gpu-operator.md 1.1); NVIDIA publishes one
for some kernels only. :func:`needed` names, per pool, the kernels and the images the target branch needs;
:func:`look_up` asks the registry for those the operator does not run already (with the operator's pull secrets),
before the checks run, so ``kernel-precompiled`` judges what was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from checks import kube as k
from checks.inventory import Inventory
from checks.objects import Obj, labels_of, node_selector_matches, spec_of, status_of
from checks.registry import (ImageRef, Registry, RegistryAnswers, driver_image, operator_pull_secrets,
                             read_pull_secrets)
from fleetspec.model import DriverOwner
from gpu_knowledge import labels

_UBUNTU = re.compile(r"^Ubuntu (\d{2}\.\d{2})")
_RHEL = re.compile(r"^Red Hat Enterprise Linux(?: CoreOS)? (\d+)")


def os_tag(os_image: str) -> str | None:
    """The OS part of a driver image tag from a node's ``status.nodeInfo.osImage``: "Ubuntu 22.04.5 LTS" is
    ``ubuntu22.04``, "Red Hat Enterprise Linux 9.4 (Plow)" ``rhel9``; None for anything else."""
    if match := _UBUNTU.match(os_image):
        return f"ubuntu{match.group(1)}"
    if match := _RHEL.match(os_image):
        return f"rhel{match.group(1)}"
    return None


def by_kernel(nodes: list[Obj]) -> dict[tuple[str, str | None], list[Obj]]:
    """The nodes by the kernel and OS tag they report (``status.nodeInfo``)."""
    found: dict[tuple[str, str | None], list[Obj]] = {}
    for node in nodes:
        info = status_of(node).get("nodeInfo") or {}
        found.setdefault((info.get("kernelVersion", "?"), os_tag(info.get("osImage", ""))), []).append(node)
    return found


def precompiled_daemonsets(inv: Inventory) -> list[Obj]:
    return [ds for ds in inv.operator_daemonsets if labels_of(ds).get(labels.PRECOMPILED) == "true"]


def running(inv: Inventory) -> dict[str, set[str]]:
    """Kernel -> tags of the precompiled driver images the operator runs for it now (one DaemonSet per kernel)."""
    found: dict[str, set[str]] = {}
    for ds in precompiled_daemonsets(inv):
        template = spec_of(spec_of(ds).get("template") or {})
        kernel = (template.get("nodeSelector") or {}).get(labels.KERNEL_VERSION)
        if kernel is None:
            continue
        tags = {c.get("image", "").rpartition(":")[2] for c in template.get("containers") or []}
        found.setdefault(kernel, set()).update(t for t in tags if t)
    return found


def _live_precompiled(inv: Inventory, nodes: list[Obj]) -> bool:
    """Whether the live objects build the driver for ``nodes`` from precompiled packages: with
    ``useNvidiaDriverCRD`` every NVIDIADriver carries its own ``spec.usePrecompiled`` (the ClusterPolicy's driver
    section is not rendered then); otherwise the ClusterPolicy's applies."""
    driver = spec_of(inv.cluster_policy or {}).get("driver") or {}
    if not driver.get("useNvidiaDriverCRD"):
        return bool(driver.get("usePrecompiled"))
    for nvd in inv.nvidia_drivers or []:
        nvd_spec = spec_of(nvd)
        selector = nvd_spec.get("nodeSelector") or {labels.GPU_PRESENT: "true"}
        if nvd_spec.get("usePrecompiled") and any(node_selector_matches(selector, labels_of(n)) for n in nodes):
            return True
    return False


@dataclass(frozen=True)
class KernelImage:
    kernel: str
    os_id: str | None  # None: no Ubuntu or RHEL release, for which no precompiled image is named
    nodes: int
    image: ImageRef | None
    running: bool  # the operator runs exactly this image for the kernel now


@dataclass(frozen=True)
class PoolImages:
    pool: str
    branch: str
    kernels: list[KernelImage]


def needed(inv: Inventory) -> dict[str, PoolImages]:
    """Pool -> the precompiled images its target branch needs, for every operator-owned pool the operator builds
    from precompiled packages (by the stack, or by what the cluster runs)."""
    spec = inv.spec
    if spec.driver.owner != DriverOwner.OPERATOR:
        return {}
    any_running = bool(precompiled_daemonsets(inv))
    now = running(inv)
    out = {}
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not (spec.gpuOperator.usePrecompiled or any_running or _live_precompiled(inv, nodes)):
            continue
        target = spec.pool_target(pool).driver or spec.driver.version
        branch = target.split(".")[0]
        kernels = []
        for (kernel, os_id), of_kernel in sorted(by_kernel(nodes).items(), key=lambda item: (item[0][0],
                                                                                             item[0][1] or "")):
            image = driver_image(spec.gpuOperator.driverRepository, branch, kernel, os_id) if os_id else None
            kernels.append(KernelImage(kernel, os_id, len(of_kernel), image,
                                       image is not None and image.tag in now.get(kernel, set())))
        out[pool.name] = PoolImages(pool.name, branch, kernels)
    return out


def look_up(inv: Inventory, kube: k.Kube, registry: Registry) -> RegistryAnswers:
    """Ask ``registry`` for every needed image the operator does not run already, with the operator's pull
    secrets' logins (read from its namespace; one that cannot be read is a note, and the image is asked for
    anonymously)."""
    wanted = sorted({str(item.image): item.image for images in needed(inv).values() for item in images.kernels
                     if item.image is not None and not item.running}.items())
    out = RegistryAnswers()
    if not wanted:
        return out
    secrets = read_pull_secrets(kube, inv.spec.gpuOperator.namespace,
                                operator_pull_secrets(inv.cluster_policy, inv.nvidia_drivers))
    registry.use_logins(secrets.logins)
    out.notes = secrets.notes
    out.answers = {name: registry.look_up(image) for name, image in wanted}
    return out
