"""Compatibility against the live cluster (runbook section 1), answered by ``spec.compat``:
serving-images-cuda, operator-supports-driver, gpu-supported-by-driver."""

from __future__ import annotations

import re

from checks.inventory import Inventory, Obj, labels_of, name_of, pod_containers, template_containers
from checks.results import CheckResult, failed, passed, warned
from spec import compat, labels

# A model server's image: one path segment of the repository names the server, alone or with a
# suffix/prefix split by '-', '_' or '.' (vllm/vllm-openai, nvcr.io/nvidia/tritonserver,
# ghcr.io/huggingface/text-generation-inference, tgi-gaudi, lmsysorg/sglang); never a substring of
# another word ("contiguous" is not TGI).
_SERVER_SEGMENT = re.compile(r"^(?:.*[-_.])?(?:vllm|triton|tritonserver|tgi|text-generation-inference|sglang)"
                             r"(?:[-_.].*)?$", re.IGNORECASE)


def is_model_server(image: str) -> bool:
    repository = image.split("@", 1)[0]
    last = repository.rsplit("/", 1)
    if ":" in last[-1]:
        repository = repository.rsplit(":", 1)[0]
    segments = repository.split("/")
    if len(segments) > 1 and ("." in segments[0] or ":" in segments[0] or segments[0] == "localhost"):
        segments = segments[1:]  # the registry host names no server
    return any(_SERVER_SEGMENT.match(segment) for segment in segments)


# CUDA in common image tags: "cu126" (12.6), "cuda12.8", "cuda-12.4.1".
_CU_TAG = re.compile(r"(?:^|[^a-z])cu(\d{2})(\d)(?:[^0-9]|$)")
_CUDA_TAG = re.compile(r"cuda-?(\d{1,2}\.\d{1,2}(?:\.\d{1,3})?)")


def image_cuda(image: str, declared: dict[str, str]) -> str | None:
    """CUDA of an image: as the stack declares it, else read from the tag; None when unknown."""
    if image in declared:
        return declared[image]
    tag = image.rsplit("/", 1)[-1].partition(":")[2].lower()
    match = _CUDA_TAG.search(tag)
    if match:
        return match.group(1)
    match = _CU_TAG.search(tag)
    if match:
        return f"{match.group(1)}.{match.group(2)}"
    return None


def _images(inv: Inventory) -> set[str]:
    declared = {m.image for m in inv.spec.models}
    found = set()
    for obj, containers in [(p, pod_containers(p)) for p in inv.pods] + [
        (d, template_containers(d)) for d in inv.deployments
    ]:
        for container in containers:
            image = container.get("image", "")
            if image in declared or is_model_server(image):
                found.add(image)
    return found | declared


def check_serving_images_cuda(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    target = spec.driver.version
    declared = {m.image: m.cudaVersion for m in spec.models}
    forward = {m.image for m in spec.models if m.cudaForwardCompat}
    results = []
    for image in sorted(_images(inv)):
        cuda = image_cuda(image, declared)
        if cuda is None:
            results.append(warned("serving-images-cuda", image, "CUDA version unknown (not declared in the stack, "
                                  "not in the tag): check it before the upgrade"))
            continue
        answer = compat.cuda_runs_on(cuda, target)
        if answer.yes:
            results.append(passed("serving-images-cuda", image, f"CUDA {cuda}: {answer.reason}"))
        elif answer.no and image in forward:
            bridge = compat.forward_compat_supported(cuda, target)
            status = passed if bridge.yes else failed
            results.append(status("serving-images-cuda", image, f"CUDA {cuda} through cuda-compat: {bridge.reason}"))
        elif answer.no:
            results.append(failed("serving-images-cuda", image, f"CUDA {cuda}: {answer.reason}"))
        else:
            results.append(warned("serving-images-cuda", image, f"CUDA {cuda}: {answer.reason}"))
    return results


def live_operator_version(inv: Inventory) -> str | None:
    """The GPU Operator release running now: the tag of the gpu-operator Deployment's image."""
    for deployment in inv.deployments:
        for container in template_containers(deployment):
            repo, _, tag = container.get("image", "").rpartition(":")
            if repo.endswith("/gpu-operator") and tag:
                return tag
    return None


def check_operator_supports_driver(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    live = live_operator_version(inv)
    version = live or spec.gpuOperator.chartVersion
    where = f"running {live}" if live else f"operator Deployment not found; using the stack's {version}"
    if live and live.lstrip("v") != spec.gpuOperator.chartVersion.lstrip("v"):
        where += f" (the stack declares {spec.gpuOperator.chartVersion})"
    answer = compat.operator_lists(version, spec.driver.version)
    status = {
        compat.OperatorSupport.LISTED: passed,
        compat.OperatorSupport.BRANCH_ONLY: warned,
        compat.OperatorSupport.UNSUPPORTED: failed,
        compat.OperatorSupport.UNKNOWN: warned,
    }[answer.support]
    return [status("operator-supports-driver", f"gpu-operator {version}", f"{answer.reason}; {where}")]


def check_gpu_supported_by_driver(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    by_product: dict[tuple[str, str], list[Obj]] = {}
    unlabelled = []
    for node in inv.pool_nodes:
        product = labels_of(node).get(labels.GPU_PRODUCT)
        if not product:
            unlabelled.append(name_of(node))
            continue
        # Every pool ends on the stack's target driver (held pools in a later wave), so check that one.
        by_product.setdefault((product, spec.driver.version), []).append(node)
    results = []
    for (product, driver), nodes in sorted(by_product.items()):
        answer = compat.supports(driver, product)
        status = passed if answer.yes else failed if answer.no else warned
        results.append(status("gpu-supported-by-driver", product, f"{answer.reason} ({len(nodes)} node(s))"))
    if unlabelled:
        results.append(warned("gpu-supported-by-driver", "unlabelled nodes", f"{len(unlabelled)} node(s) without "
                              f"{labels.GPU_PRODUCT}: {', '.join(sorted(unlabelled)[:5])}"))
    return results
