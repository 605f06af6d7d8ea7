"""FleetSpec: the whole stack config as typed, validated pydantic models.

Keys are spelled as in ``Pulumi.<stack>.yaml`` (camelCase); ``upgradePolicy`` is spelled exactly as the
ClusterPolicy CRD spells it (``podDeletion``, not the Helm key ``gpuPodDeletion``). Every model forbids
unknown keys, so a typo fails the load instead of being ignored. The parts live in ``fleetspec.base``,
``fleetspec.operator`` and ``fleetspec.pools``; this module assembles them and checks what spans them.
"""

from __future__ import annotations

import re
from datetime import date
from enum import StrEnum
from typing import Annotated, Literal, Self, get_args

from pydantic import ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from gpu_knowledge import capacity, compat
from gpu_knowledge.capacity import percent_of
from fleetspec import stacks
from fleetspec.base import (
    AKS_POOL,
    DNS_LABEL,
    EKS_NODEGROUP,
    PROJECT,
    Cloud,
    ClusterPolicyMode,
    DriverOwner,
    LocatedError,
    NonNegativeInt,
    PositiveInt,
    PositiveIntOrPercent,
    Percent,
    SpecModel,
    Stage,
    at,
    check_label_map,
    check_pinned_image,
    int_or_percent,
    kubernetes_name,
)
from fleetspec.operator import Drain, GpuOperator, PodDeletion, UpgradePolicy, WaitForCompletion
from fleetspec.pools import AksPool, EksPool, ExistingPool, Generation, LaunchTemplate, NodePool, PoolRollout, PoolTarget
from gpu_knowledge.platform import EKS_AMI_OS, aks_os, eks_os
from fleetspec.observability import (DecimalPercent, Duration, PrometheusDeclared, PrometheusSettings, decimal_percent,
                                    duration_seconds, parse_prometheus)
from fleetspec.simulation import Simulation
from fleetspec.guard import Guard
from fleetspec.discipline import MaintenanceWindow, RolloutSettings, WeeklyWindow
from gpu_knowledge.node_images import is_nvidia_ami
from gpu_knowledge.versions import CudaVersion, DriverVersion, driver_given_for, is_branch_only, parse_driver

__all__ = [
    "PROJECT", "AksCluster", "AksPool", "Cloud", "Cluster", "ClusterPolicyMode", "Drain", "Driver", "DriverOwner",
    "EksCluster", "EksPool", "ExistingCluster", "ExistingPool", "FleetSpec", "Generation", "Guard", "GpuOperator", "LaunchTemplate", "LocatedError", "Model",
    "ModelQueries", "ModelServing", "ModelSlo", "ServingEngine",
    "MaintenanceWindow", "NodePool", "NonNegativeInt", "PodDeletion", "PoolRollout", "PoolTarget", "PositiveInt",
    "Promotion", "RolloutSettings", "Simulation", "Stage", "UpgradePolicy", "Validation", "WAIVABLE_DIFFERENCES",
    "Waiver", "ValidationBaseline", "ValidationCache", "ValidationTolerance", "WeeklyWindow",
    "WaitForCompletion", "int_or_percent", "kubernetes_name",
]


class AksCluster(SpecModel):
    resourceGroup: str = Field(min_length=1, description="Resource group of the existing managed cluster.",
                               examples=["rg-inference-weu-1"])
    clusterName: str = Field(min_length=1, description="Name of the existing AKS managed cluster.",
                             examples=["aks-inference-weu-1"])
    kubernetesVersion: str | None = Field(
        None, description="`orchestratorVersion` of the GPU pools; none: AKS's default, the control plane's.",
        examples=["1.33.5"])


class EksCluster(SpecModel):
    clusterName: str = Field(min_length=1, description="Name of the existing EKS cluster the node groups join.",
                             examples=["eks-inference-use1-1"])
    region: str = Field(
        min_length=1, description="Region of the cluster; the node groups and the cluster lookup go to it (per-resource "
        "`region`), whatever `aws:region` says.", examples=["us-east-1"])
    nodeRoleArn: str = Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$", description="IAM role of the GPU nodes.",
                             examples=["arn:aws:iam::123456789012:role/eks-gpu-node-role"])
    subnetIds: list[str] = Field(min_length=1, description="Subnets of the GPU node groups (private ones).",
                                 examples=[["subnet-0a1b2c3d4e5f60718"]])
    kubernetesVersion: str | None = Field(
        None, description="`version` of the node groups on EKS-optimized AMIs (those with an `amiType`); never sent for "
        "a custom AMI, whose kubelet is its own (EKS refuses a version beside it).", examples=["1.33"])


class ExistingCluster(SpecModel):
    """A cluster this stack does not create: reached through an explicit kubeconfig context, never the current one."""

    context: str = Field(
        min_length=1, description="kubeconfig context of the cluster: the Kubernetes provider and the live verbs use "
        "exactly this context, never the current one.", examples=["lab-gpu-1"])
    kubeconfig: str | None = Field(
        None, min_length=1, description="kubeconfig file holding that context; none: `$KUBECONFIG`, else "
        "`~/.kube/config`. The live verbs take `--kubeconfig` first, then this, then `$KUBECONFIG`.",
        examples=["~/.kube/lab-gpu-1.yaml"])


class Cluster(SpecModel):
    """The cluster the stack works on: exactly the block of its ``cloud`` (the block of another cloud is an error,
    ``cluster.eks is set but cloud is 'aks'``).

    **Where Kubernetes objects go.** Never to the shell's current kubeconfig context: the program builds its
    Kubernetes provider from the stack's own cluster. AKS: the cluster's user credentials
    (``listClusterUserCredential`` of ``aks.resourceGroup``/``aks.clusterName``; Entra ID clusters hand back a
    kubelogin exec config). EKS: the endpoint and CA of ``eks.clusterName`` in ``eks.region``, authenticating with
    ``aws eks get-token`` (no token is stored). Existing: ``existing.kubeconfig`` and ``existing.context``.
    ``cluster.kubeContext`` of earlier releases is gone (an unknown key now)."""

    cloud: Cloud = Field(
        description="`aks` or `eks`: a managed cluster whose GPU pools this stack creates. `existing`: a cluster this "
        "project does not create (kubeadm, on-prem, another team's); its pools' cloud resources are not managed "
        "here, only Kubernetes objects.", examples=["aks"])
    name: str = Field(
        min_length=1,
        description="Name of the cluster: written into the cluster-identity ConfigMap (in `kube-system`) and compared "
        "by the live verbs, which refuse (exit 2) a cluster whose identity names another.",
        examples=["inference-weu-1"],
    )
    aks: AksCluster | None = Field(None, description="The existing AKS cluster; required with `cloud: aks`.")
    eks: EksCluster | None = Field(None, description="The existing EKS cluster; required with `cloud: eks`.")
    existing: ExistingCluster | None = Field(
        None, description="How to reach a cluster this project does not create; required with `cloud: existing`.")

    @model_validator(mode="after")
    def _cloud_fields(self) -> Self:
        for cloud, block in ((Cloud.AKS, self.aks), (Cloud.EKS, self.eks), (Cloud.EXISTING, self.existing)):
            if self.cloud == cloud and block is None:
                raise at((cloud.value,), f"cloud is '{cloud}', so cluster.{cloud} must be set")
            if self.cloud != cloud and block is not None:
                raise at((cloud.value,), f"cluster.{cloud} is set but cloud is '{self.cloud}'")
        return self


# ---------------------------------------------------------------- driver


class Driver(SpecModel):
    """Who owns the driver and which version."""

    owner: DriverOwner = Field(
        description="Who installs the driver, never both on one node. `operator`: the GPU Operator's containerized "
        "driver (AKS pools get `gpuProfile.driver: None`; EKS node groups run a custom Ubuntu AMI from their launch "
        "template). `image`: the node image carries the driver and the operator's driver is disabled. "
        "Operator-owned pools must run an OS the operator release ships a driver image for (Ubuntu 22.04/24.04, "
        "26.04 from v26.7; RHEL/Rocky): Azure Linux, Amazon Linux and Bottlerocket are refused at the key that sets "
        "them (`aks.osSku`, `eks.amiType`, `eks.launchTemplate.os`, `existing.os`), and by policy "
        "`operator-supports-os`.", examples=["operator"])
    version: DriverVersion = Field(
        description="The target. An exact release (`580.173.02`, `570.26`); with `gpuOperator.usePrecompiled: true` a "
        "bare branch (`\"580\"`) and nothing else, since precompiled images are tagged `<branch>-<kernel>-<os>`.",
        examples=["580.173.02"])
    previousVersion: DriverVersion | None = Field(
        None, description="What the fleet runs now: held prod pools stay pinned to it, and rollback restores it. "
        "Required while an operator-owned pool is held. A branch only with `gpuOperator.usePrecompiled`.",
        examples=["570.195.03"])




PositiveNumber = Annotated[float, Field(gt=0)]


class ServingEngine(StrEnum):
    VLLM = "vllm"
    TGI = "tgi"
    TRITON = "triton"


class ModelQueries(SpecModel):
    """PromQL for `gpu-rollout verify`'s latency-throughput check, replacing the engine's default. Each is a
    query giving one number over a window; ``{namespace}``, ``{pods}`` (a regex of pod names: the model's pods
    on new-driver nodes, then those it is compared with) and ``{window}`` (a bucket, e.g. ``3600s``) are filled
    in, and it is evaluated once per bucket of the soak."""

    p95LatencySeconds: str | None = Field(None, min_length=1, description="PromQL of the p95 request latency, "
                                          "seconds; none: the engine's. Must use `{pods}`.")
    tokensPerSecond: str | None = Field(None, min_length=1, description="PromQL of the tokens per second of one "
                                        "request; none: the engine's. Must use `{pods}`.")
    errorRate: str | None = Field(None, min_length=1, description="PromQL of failed requests as a fraction of all "
                                  "(0 to 1); none: the engine's. Must use `{pods}`.")

    @field_validator("p95LatencySeconds", "tokensPerSecond", "errorRate")
    @classmethod
    def _placeholders(cls, value: str | None) -> str | None:
        if value is not None and "{pods}" not in value:
            raise ValueError("must use {pods} (the pods compared), or it would compare the same series twice")
        return value


class ModelServing(SpecModel):
    """How `gpu-rollout verify` talks to a model's pods and reads its metrics (docs/validation.md)."""

    engine: ServingEngine | None = Field(
        None, description="How `gpu-rollout verify` asks the model's pods and which default queries it uses; none: "
        "read from the image name.", examples=["tgi"])
    port: Annotated[StrictInt, Field(gt=0, lt=65536)] | None = Field(
        None, description="Container port of the HTTP API, reached through the API server's pod proxy; none: 8000 "
        "(vLLM, Triton), 80 (TGI).", examples=[8080])
    servedModel: str | None = Field(
        None, min_length=1, description="Model name in verify's test request; none: vLLM's first of `/v1/models`; "
        "Triton without it is only asked for readiness.", examples=["llm-chat"])
    baselineMatchLabels: dict[str, str] | None = Field(
        None, description="Pods of the same model on old-driver nodes, which `latency-throughput` compares against "
        "(none: `matchLabels`); only those on nodes of the same GPU product with as many GPUs per pod count (else the "
        "model's own pods before the upgrade; never across products). An empty map is refused.",
        examples=[{"app": "llm-chat"}])
    queries: ModelQueries = Field(
        ModelQueries(), description="PromQL replacing the engine's default figures of verify's latency-throughput "
        "check (docs/validation.md).")

    @field_validator("baselineMatchLabels")
    @classmethod
    def _labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and not value:
            raise ValueError("an empty map would select every pod of the namespace; name the model's labels")
        return None if value is None else check_label_map(value)


class ModelSlo(SpecModel):
    """The model's service-level objectives, which `gpu-rollout watch` reads from Prometheus for each pool being
    upgraded: a breach of one, sustained for ``for``, pauses the rollout (docs/runbook.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    errorRate: DecimalPercent | None = Field(
        None, description="Highest share of failed requests (the engine's errors over its requests) `gpu-rollout "
        "watch` accepts on a pool being upgraded.", examples=["1%", "0.5%"])
    p95LatencySeconds: PositiveNumber | None = Field(
        None, description="Highest p95 request latency there, seconds. At least one of `errorRate` and "
        "`p95LatencySeconds` is required.", examples=[2.5])
    sustained: Duration = Field(
        "10m", alias="for", description="How long a breach lasts before watch pauses the rollout, 1m to 24h; read "
        "from Prometheus through `validation.prometheus` or `--prometheus`.", examples=["15m"])

    @field_validator("errorRate")
    @classmethod
    def _error_rate(cls, value: str | None) -> str | None:
        if value is not None:
            decimal_percent(value)
        return value

    @field_validator("sustained")
    @classmethod
    def _sustained(cls, value: str) -> str:
        seconds = duration_seconds(value)
        if not 60 <= seconds <= 86400:
            raise ValueError(f"'{value}' must be from 1m to 24h: shorter than a scrape or two is noise")
        return value

    @model_validator(mode="after")
    def _one_objective(self) -> Self:
        if self.errorRate is None and self.p95LatencySeconds is None:
            raise at(("errorRate",), "declare errorRate, p95LatencySeconds or both: an SLO without an objective "
                     "watches nothing")
        return self

    @property
    def error_rate(self) -> float | None:
        return None if self.errorRate is None else decimal_percent(self.errorRate)

    @property
    def sustained_seconds(self) -> int:
        return duration_seconds(self.sustained)


class Model(SpecModel):
    """The model servers on the stack's pools: each gets a PodDisruptionBudget, and `gpu-rollout` checks the
    driver against its CUDA runtime, counts its Ready pods and watches its SLOs."""

    name: str = Field(description="The model server, a Kubernetes name; its PDB is `<name>-pdb`.",
                      examples=["llm-chat"])
    namespace: str = Field(description="Namespace of the model server and its PDB.", examples=["inference"])
    matchLabels: dict[str, str] = Field(
        min_length=1, description="Pod labels; the PDB selects them, and `watch` counts the model's Ready pods by "
        "them, whatever owns the pods. An empty map is refused (it would select every pod of the namespace).",
        examples=[{"app": "llm-chat"}])
    replicas: PositiveInt = Field(
        description="Declared replicas (rides on the PDB as an annotation for the policy pack).", examples=[3])
    minAvailable: PositiveIntOrPercent = Field(
        description="PDB `minAvailable`. 0 is refused: it protects nothing. Equal to `replicas` it blocks every "
        "drain, and policy `pdb-allows-drain` refuses it.", examples=[2, "50%"])
    gpusPerReplica: PositiveInt = Field(description="GPUs one replica requests.", examples=[8])
    cudaVersion: CudaVersion = Field(description="CUDA runtime inside the serving image.", examples=["12.8"])
    image: str = Field(min_length=1, description="Serving image; must carry a tag (not `latest`) or a digest.",
                       examples=["vllm/vllm-openai:v0.10.2"])
    nodePools: list[str] = Field(min_length=1, description="Pools the model's pods run on; must name pools of this "
                                 "stack.", examples=[["gpuh100"]])
    cudaForwardCompat: StrictBool = Field(
        False, description="The image ships the `cuda-compat` package for a newer CUDA than the driver supports.")
    serving: ModelServing = Field(
        ModelServing(), description="How `gpu-rollout verify` talks to the model's pods and reads its metrics "
        "(docs/validation.md).")
    slo: ModelSlo | None = Field(
        None, description="The model's objectives, which `gpu-rollout watch` reads from Prometheus for each pool "
        "being upgraded: a breach sustained for `for` pauses the rollout (docs/runbook.md).")
    weightsCached: StrictBool = Field(
        False, description="A rescheduled replica loads its weights from a cache (PVC, host path, weights in the "
        "image), not from a download: `gpu-rollout simulate` takes `simulation.cachedLoadSeconds` instead of "
        "`uncachedLoadSeconds`.")
    loadSeconds: PositiveInt | None = Field(
        None, description="Seconds a rescheduled replica takes until Ready, as measured; beats `weightsCached`.",
        examples=[240])

    @field_validator("minAvailable", mode="before")
    @classmethod
    def _min_available(cls, value: object) -> int | str:
        result = int_or_percent(value, "minAvailable")
        if result in (0, "0%"):
            raise ValueError("minAvailable of 0 protects nothing; set at least 1 (or drop the model)")
        return result

    @field_validator("name", "namespace")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not DNS_LABEL.fullmatch(value):
            raise ValueError(f"'{value}' is not a valid Kubernetes name (lowercase letters, digits, '-')")
        return value

    @field_validator("matchLabels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_label_map(value)

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        return check_pinned_image(value)


# ---------------------------------------------------------------- validation (issue 10; docs/validation.md)

SHA256_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _absolute_path(value: str, what: str) -> str:
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts or "" in parts[1:]:
        raise ValueError(f"{what} '{value}' must be an absolute path without '..' or empty parts, e.g. /models/qwen")
    return value


class ValidationCache(SpecModel):
    """A volume that already holds the validation model's weights: nothing is downloaded at validation time."""

    claimName: str | None = Field(
        None,
        description="PersistentVolumeClaim in the validation namespace (`gpu-validation-<stage>`), mounted read-only; "
        "ReadOnlyMany or ReadWriteMany, since every node of the pool mounts it.",
    )
    hostPath: str | None = Field(None, description="Node-local cache directory, mounted read-only. Exactly one of "
                                 "`claimName` and `hostPath` is given.", examples=["/var/lib/models"])
    mountPath: str = Field("/models", description="Where the volume appears in the validation pod.")

    @field_validator("claimName")
    @classmethod
    def _claim(cls, value: str | None) -> str | None:
        if value is not None and not DNS_LABEL.fullmatch(value):
            raise ValueError(f"'{value}' is not a valid PersistentVolumeClaim name (lowercase letters, digits, '-')")
        return value

    @field_validator("hostPath", "mountPath")
    @classmethod
    def _paths(cls, value: str | None) -> str | None:
        return None if value is None else _absolute_path(value, "path")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.claimName is None) == (self.hostPath is None):
            raise at(("claimName",), "give exactly one of claimName (a PersistentVolumeClaim) or hostPath")
        return self


class ValidationBaseline(SpecModel):
    """What a pool measured on a driver it ran clean on: the job's own result, copied from a passing run."""

    timeToFirstTokenSeconds: PositiveNumber = Field(description="Median time to first token, seconds.",
                                                    examples=[0.05])
    tokensPerSecond: PositiveNumber = Field(description="Median decode tokens per second of one request.",
                                            examples=[180.0])
    tokenDigest: str | None = Field(
        None, description="`sha256:<hex>` of the greedy completion of the fixed prompt; checked when set."
    )
    recordedOn: DriverVersion | None = Field(None, description="Driver the baseline was measured on (a record).")

    @field_validator("tokenDigest")
    @classmethod
    def _digest(cls, value: str | None) -> str | None:
        if value is not None and not SHA256_DIGEST.fullmatch(value):
            raise ValueError(f"'{value}' is not a digest: write sha256: and 64 lowercase hex digits, as a result shows it")
        return value


class ValidationTolerance(SpecModel):
    timeToFirstToken: Percent = Field(
        "50%", description="How much slower than the pool's baseline the job's first token may be.")
    tokensPerSecond: Percent = Field(
        "10%", description="How far tokens per second may fall below the baseline: the job's against its pool's "
        "baseline, and verify's on new-driver pods against the baseline's.", examples=["15%"])
    p95Latency: Percent = Field(
        "20%", description="How much higher p95 latency on new-driver pods may be than on the baseline's (`gpu-rollout "
        "verify`, per bucket, from Prometheus).", examples=["15%"])
    errorRate: DecimalPercent = Field(
        "1%", description="How many percentage points the error rate on new-driver pods may be above the baseline's "
        "(verify, per bucket, from Prometheus).", examples=["0.5%"])

    @field_validator("timeToFirstToken", "tokensPerSecond", "p95Latency", mode="before")
    @classmethod
    def _percent(cls, value: object) -> str:
        if not isinstance(value, str) or percent_of(value) is None:
            raise ValueError(f"must be a percentage from 0% to 100%, such as '10%', got {value!r}")
        return value

    @field_validator("errorRate", mode="before")
    @classmethod
    def _points(cls, value: object) -> str:
        decimal_percent(value)
        return str(value)


class Validation(SpecModel):
    """The post-upgrade validation job (components/validation.py, workload/): it runs on every node of a pool that
    moves, once per driver version, right after the node's upgrade, serving a small model with vLLM and timing a
    fixed prompt; a failed run holds the node (docs/validation.md). Its results, and the Prometheus figures of the
    models, are judged by `gpu-rollout verify`. Required in prod where the operator owns the driver (policy
    `validation-job-required`)."""

    image: str = Field(min_length=1, description="Image of the validation job: a vLLM serving image with an explicit "
                       "tag or digest (not `latest`).", examples=["vllm/vllm-openai:v0.10.2"])
    model: str = Field(min_length=1, description="Name the job's server serves the weights under "
                       "(`--served-model-name`) and its requests ask for; the weights come from `modelPath`.",
                       examples=["Qwen/Qwen2.5-0.5B-Instruct"])
    modelPath: str = Field(description="Absolute path of the weights in the pod: in the image, or under "
                           "`cacheVolume.mountPath`.", examples=["/models/Qwen2.5-0.5B-Instruct"])
    cacheVolume: ValidationCache | None = Field(
        None, description="A volume that already holds the weights, so nothing is downloaded at validation time; "
        "none: the weights are in the image. `modelPath` must lie under its `mountPath`.",
        examples=[{"claimName": "validation-models"}])
    prompt: str = Field("Say hello.", min_length=1, description="Fixed prompt, decoded greedily.",
                        examples=["Count from one to ten."])
    maxTokens: Annotated[StrictInt, Field(gt=0, le=4096)] = Field(64, description="Tokens generated per request.")
    requests: Annotated[StrictInt, Field(gt=0, le=20)] = Field(3, description="Timed requests after one warm-up.")
    minTokensPerSecond: PositiveNumber = Field(
        20.0, description="Floor of tokens per second for the job to pass, with or without a baseline.", examples=[40])
    baselines: dict[str, ValidationBaseline] = Field(
        default_factory=dict, description="Per pool name: what the pool measured on a driver it ran clean on (copied "
        "from a passing run's result); the job compares its run with it within `tolerance`. A name that is no pool "
        "of the stack is refused.")
    tolerance: ValidationTolerance = Field(
        ValidationTolerance(), description="How far the job may fall behind its pool's baseline, and new-driver pods "
        "behind the baseline's in verify.")
    serverArgs: list[str] = Field(
        default_factory=list, description="Extra arguments to `vllm serve`; `--host`, `--port`, "
        "`--served-model-name` and `--model` are the job's own and refused.", examples=[["--max-model-len=4096"]])
    startupTimeoutSeconds: Annotated[StrictInt, Field(gt=0, le=3600)] = Field(
        900, description="How long the server may take to load the model."
    )
    textfileDirectory: str | None = Field(
        None, description="Absolute host directory of node-exporter's textfile collector; the job writes its metrics "
        "there; none: no metrics file.", examples=["/var/lib/node-exporter/textfile"]
    )
    prometheus: PrometheusDeclared | None = Field(
        None, description="Where `verify` (and `watch`, for `models[].slo`) read Prometheus: an http(s) URL reached "
        "directly, or an in-cluster Service `namespace/name:port` reached through the API server's service proxy with "
        "the stack's own cluster credentials (RBAC `create` on `services/proxy`), as CI reaches the cluster; or an "
        "object with `url` or `service` and what it needs: `auth` (bearer token, kubeconfig identity, Azure, AWS "
        "SigV4), `tenant`, `caFile`, `scheme` (docs/validation.md, one recipe per kind). `--prometheus URL` "
        "overrides it. Without either, verify's Prometheus checks are inconclusive.",
        examples=["monitoring/prometheus-k8s:9090", "http://prometheus.monitoring:9090"])
    bucketMinutes: Annotated[StrictInt, Field(ge=5, le=1440)] = Field(
        60, description="verify compares latency, tokens/s and error rate across the soak in buckets this long, "
        "anchored at the soak's start.", examples=[30])
    minBucketRequests: Annotated[StrictInt, Field(ge=1)] = Field(
        100, description="Requests a bucket needs on each side before verify judges it; one with fewer is reported "
        "as such, never judged.", examples=[500])
    minJudgedFraction: Annotated[float, Field(gt=0, le=1)] = Field(
        0.95, description="Share of the soak's buckets, per GPU of every upgraded node, that verify must be able to "
        "judge: DCGM samples arrived in the bucket (`count_over_time`), and no Xid 43/45 outside the node's own "
        "upgrade window could hide another in the gauge. Below it `dcgm-metrics` and `no-new-xid` fail, naming the "
        "buckets; missing telemetry is never a pass.", examples=[0.99])
    minServingJudgedFraction: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9, description="Share of the soak's buckets verify must judge for a model's latency, tokens/s and error "
        "rate (`minBucketRequests` on each side) and its restarts (kube-state-metrics in the bucket); below it "
        "`latency-throughput` and `model-restarts` fail, naming the buckets not judged.", examples=[0.95])
    minRequests: Annotated[StrictInt, Field(ge=1)] = Field(
        1000, description="Requests a model's new-driver pods must serve over the soak; fewer fails "
        "`latency-throughput`. The attestation records per pool the requests served and the share judged, which "
        "the prod gate compares with `promotion.minRequests` and `promotion.minJudgedFraction`.", examples=[100000])
    maxModelRestarts: NonNegativeInt = Field(
        0, description="Container restarts of the model pods on upgraded nodes verify accepts over the soak; an OOM "
        "kill always fails.", examples=[2])
    evictOnFailure: dict[str, StrictBool] = Field(
        default_factory=dict,
        description="Per pool name: whether `gpu-rollout watch` moves the model pods off a node of the pool that a "
        "failed validation holds (cordoned by the job), through the Eviction API so PDBs decide; never with a "
        "`NoExecute` taint. Unset: yes on canary and serving pools, no on batch pools. A name that is no pool of "
        "the stack is refused (docs/validation.md#a-failed-validation-holds-the-node).",
        examples=[{"gpu-a100-batch": True}],
    )

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        return check_pinned_image(value)

    @field_validator("modelPath")
    @classmethod
    def _model_path(cls, value: str) -> str:
        return _absolute_path(value, "modelPath")

    @field_validator("prometheus")
    @classmethod
    def _prometheus(cls, value: str | PrometheusSettings | None) -> str | PrometheusSettings | None:
        if isinstance(value, str):
            parse_prometheus(value)
        return value

    @field_validator("textfileDirectory")
    @classmethod
    def _textfile(cls, value: str | None) -> str | None:
        return None if value is None else _absolute_path(value, "textfileDirectory")

    @field_validator("serverArgs")
    @classmethod
    def _server_args(cls, value: list[str]) -> list[str]:
        owned = {"--host", "--port", "--served-model-name", "--model"}
        for arg in value:
            if arg.split("=", 1)[0] in owned:
                raise ValueError(f"'{arg}' is set by the job itself (it serves modelPath as model on loopback)")
        return value

    @model_validator(mode="after")
    def _weights_in_the_cache(self) -> Self:
        cache = self.cacheVolume
        if cache is not None and not self.modelPath.startswith(cache.mountPath.rstrip("/") + "/"):
            raise at(
                ("modelPath",),
                f"'{self.modelPath}' is not under cacheVolume.mountPath '{cache.mountPath}': the weights would not "
                "come from the cache volume",
            )
        return self


# What the prod gate compares between a prod pool and the canary pool that attested its driver; each is a
# difference a waiver may accept (policy canary-attested, docs/policies.md).
WaivableDifference = Literal["gpu-product", "gpus-per-node", "nvswitch", "mig-config", "served-traffic",
                             "operator-release", "driver-mode", "kernel-module-type", "os-image", "node-image-version",
                             "kernel"]
WAIVABLE_DIFFERENCES: tuple[str, ...] = get_args(WaivableDifference)


class Waiver(SpecModel):
    """A difference between a prod pool and its canary that the team accepts, and why."""

    accept: list[WaivableDifference] = Field(
        min_length=1, description="The differences accepted: " + ", ".join(WAIVABLE_DIFFERENCES) + ".")
    reason: str = Field(description="Why the difference is accepted (who decided, what covers the gap).")
    # Optional in the model only so that a stack file of an earlier release still renders (the committed base a
    # plan compares with); the gate (canary-attested) refuses a waiver without any of the three, naming it.
    driver: str | None = Field(
        None, description="The driver branch (`580`) or version (`580.173.02`) the waiver was given for: a waiver of "
        "another driver is refused (mandatory), so it never silently applies to the next one. Required by the gate.",
        examples=["580"])
    ticket: str | None = Field(None, min_length=1, description="The change ticket that accepted the difference. "
                               "Required by the gate.", examples=["CHG-20261209-0078"])
    expires: date | None = Field(None, description="The last day the waiver holds (UTC); from the day after, it is "
                                 "refused (mandatory), naming it. Required by the gate.", examples=["2027-03-31"])

    @field_validator("driver")
    @classmethod
    def _driver(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if parse_driver(value) is None or value != value.strip():
            raise ValueError(f"'{value}' is not a driver branch (580) or version (580.173.02)")
        return value

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a waiver needs its reason: say why the difference is accepted")
        return value

    def holds_for(self, driver: str, today: date) -> bool:
        """Whether the waiver accepts anything for ``driver`` on ``today`` (UTC): bound to it (its branch or
        version), with a ticket, not expired. The gate names each way one does not (policy canary-attested)."""
        return (self.driver is not None and self.ticket is not None and self.expires is not None
                and today <= self.expires and driver_given_for(self.driver, driver))

    @field_validator("accept")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        twice = sorted({v for v in value if value.count(v) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice")
        return value


class RunningToday(SpecModel):
    """A declaration that the fleet's pools run a driver today, before this stack ever deployed: what the prod gate
    cannot see on a first deployment (docs/validation.md, What "ran" means)."""

    driver: DriverVersion = Field(
        description="The driver the pools' nodes run today, as they report it (an exact release; with "
        "`gpuOperator.usePrecompiled` a branch too, matching pins of that branch), normally `driver.previousVersion`, "
        "what held pools stay pinned to. Only a prod stack takes it. The prod gate "
        "admits a held pool pinned to it without an attestation (advice naming this declaration), and a pool rolled "
        "back to it; it admits no pool released onto it, and it never counts as a driver a pool ran "
        "(`timeline.driversRun`). `gpu-rollout preflight` fails when a pool's nodes run another driver.",
        examples=["570.195.03"])
    reason: str = Field(
        description="How the team knows: who checked the nodes, when, and where it is recorded (a change ticket).",
        examples=["Every GPU node runs 570.195.03 (nvidia-smi and GFD labels, CHG-4700)."])

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a declaration needs its reason: say how the team knows the nodes run this driver")
        return value


class Promotion(SpecModel):
    """Which canary stack gates this one: the prod gate, policy ``canary-attested`` (docs/policies.md). A prod stack
    without it fails that policy."""

    canaryStack: str = Field(
        min_length=1,
        description="Stack whose attestation gates this one: `attestations/<canaryStack>/<driver>.json` must have been "
        "made on it, and the program reads its outputs through a StackReference (a bare name is this project's stack "
        "in this organization; `org/project/stack` names another) to check it still runs the driver. When "
        "`Pulumi.<canaryStack>.yaml` sits beside this stack and names the same cluster, `gpu-rollout plan` refuses "
        "(exit 2) if the two stacks would own a common object: a pool, an NVIDIADriver, the ClusterPolicy or a PDB; "
        "offline, plan renders that file to answer the StackReference (or reads `--canary-outputs`).",
        examples=["canary"])

    @field_validator("canaryStack")
    @classmethod
    def _a_stack(cls, value: str) -> str:
        # Its own name names files and folders (Pulumi.<name>.yaml, attestations/<name>/): Pulumi's spelling only.
        parts = value.split("/")
        if len(parts) > 3 or not all(parts) or not stacks.is_stack_name(parts[-1]):
            raise ValueError(f"'{value[:80]}' is not a stack: `name` or `org/project/name`, the name of letters, "
                             f"digits, '-', '_' and '.', at most {stacks.MAX_NAME_LENGTH} characters")
        return value

    minSoakHours: Annotated[float, Field(ge=0)] = Field(
        168, description="Hours the canary must have run clean: the attestation's soak, from `soakStart` to the passing "
        "`gpu-rollout verify` at `soakEnd`, must last at least this long. The runbook's week by default; in prod, "
        "policy `soak-floor` refuses less than 24, and less than 168 without `minSoakReason`.", examples=[168])
    minSoakReason: str | None = Field(
        None, min_length=1, description="Why this prod stack asks its canary for less than the runbook's week "
        "(`minSoakHours` under 168): `plan` and the PR diff show it; without it policy `soak-floor` refuses the "
        "shorter soak.", examples=["CVE-2026-1234: the fixed driver goes out within three days (CHG-20261215-0001)"])
    minJudgedFraction: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9, description="The least share of the soak's buckets the attestation must show judged for each attested "
        "canary pool's models (their latency, tokens/s and error rate with requests enough to judge); less is the "
        "`served-traffic` difference.", examples=[0.95])
    minRequests: Annotated[StrictInt, Field(ge=1)] = Field(
        1000, description="The least requests the attestation must show the canary pool's models served over the "
        "soak; fewer is the `served-traffic` difference (served traffic means this floor, not one request).",
        examples=[100000])
    maxAttestationAgeDays: Annotated[float, Field(gt=0)] = Field(
        90, description="The oldest attestation the gate admits, in days from the end of its soak (`soakEnd`): an "
        "older one is refused; re-attest after a fresh soak.", examples=[90])
    waivers: dict[str, Waiver] = Field(
        default_factory=dict,
        description="Per prod pool: the differences from the attested canary pool the gate accepts (advice instead "
        "of a refusal), and why. A pool the stack does not have is refused. Shown by `gpu-rollout plan` (advice "
        "naming the waiver and its reason, or saying it is unused) and by `gpu-rollout diff` (a `gate waiver` row "
        "of the pool).",
        examples=[{"l40s-serving": {"accept": ["gpus-per-node"], "reason": "No spare 4-GPU L40S node for the "
                                    "canary; l40s-serving is released alone in wave 1 (CHG-4711)."}}],
    )
    runningToday: RunningToday | None = Field(
        None,
        description="The driver the fleet runs today, declared with its reason. On a stack's first deployment nothing "
        "recorded says what a held pool runs, so its pin (`driver.previousVersion`) is judged as a promotion and needs "
        "the canary's attestation like any new driver, unless this declares it; `gpu-rollout preflight` then fails "
        "when a pool's nodes (their GFD driver labels) run another driver. A declaration is never a run: it admits a "
        "held pool's pin and a rollback to it, not a pool released onto it.",
    )


def foreign_pool_block(block: str, cloud: str) -> str:
    """Why a pool's ``block`` (aks, eks, existing) is refused on a ``cloud`` cluster: the model's check, and the
    loader's when the block's own keys fail first (fleetspec/load.py)."""
    return f"'{block}' block on a pool of a '{cloud}' cluster (cluster.cloud): this pool needs its '{cloud}' block instead"


class FleetSpec(SpecModel):
    """The whole stack config: which gate applies, the cluster, the driver and the GPU Operator, the pools this
    stack owns and the models on them, and the settings of validation, promotion, rollout and simulation. Each
    object key has a section of its own below."""

    stage: Stage = Field(
        description="Which gate applies. A canary stack needs a pool with `role: canary`.", examples=["canary"])
    changeTicket: str | None = Field(
        None, description="Change ticket; recorded as the tag `gpu-driver-upgrade:change-ticket` on every cloud pool "
        "and the annotation `gpu-driver-upgrade.io/change-ticket` on the PDBs; required by policy `change-ticket` "
        "in every stage (the canary is a change to a production cluster too).", examples=["CHG-20261209-0077"])
    cluster: Cluster = Field(description="The cluster the stack works on.")
    driver: Driver = Field(description="Who owns the driver and which version.")
    gpuOperator: GpuOperator = Field(description="GPU Operator release, ClusterPolicy ownership and upgrade policy.")
    nodePools: list[NodePool] = Field(min_length=1, description="The GPU pools this stack owns (at least one).")
    models: list[Model] = Field(
        default_factory=list, description="Model servers on those pools; each gets a PodDisruptionBudget.")
    validation: Validation | None = Field(
        None, description="Settings of the post-upgrade validation job, and the tolerances `gpu-rollout verify` "
        "applies (docs/validation.md). Required in prod where the operator owns the driver (policy "
        "`validation-job-required`; advice on image-owned pools); every example stack declares it.")
    promotion: Promotion | None = Field(
        None, description="Which canary stack gates this one: the prod gate, policy `canary-attested` "
        "(docs/policies.md). A prod stack without it fails that policy.")
    rollout: RolloutSettings = Field(
        RolloutSettings(), description="The rollout's discipline: the dwell between waves, how long an old "
        "generation is kept, the maintenance window (policies `waves-in-order`, `old-generation-kept`, "
        "`maintenance-window`).")
    simulation: Simulation = Field(
        Simulation(), description="How long the steps of a rollout take, for `gpu-rollout simulate` "
        "(docs/simulate.md).")
    guard: Guard = Field(
        Guard(), description="The in-cluster guard the program declares for this stack (gpu-rollout's guard verb), on by "
        "default in prod, with its RBAC and admission policy (components/guard.py).")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        self._check_driver_versions()
        self._check_pools()
        self._check_models()
        self._check_validation()
        self._check_promotion()
        self._check_guard()
        return self

    def _check_guard(self) -> None:
        # Asked for in words: the image is needed. Left on by prod's default, a missing image is policy
        # `guard-image-digest`'s to refuse, so a stack file written before the guard existed still renders.
        if self.guard.enabled is True and self.guard.image is None:
            raise at(("guard", "image"), "the guard is enabled (guard.enabled): give its image, pinned by digest "
                     "(registry/name@sha256:<64 hex>)")

    @property
    def guard_enabled(self) -> bool:
        """Whether the program declares the in-cluster guard (guard.enabled, else on in prod)."""
        return self.guard.enabled_in(self.stage)

    def _check_promotion(self) -> None:
        if self.promotion is None:
            return
        pools = {pool.name for pool in self.nodePools}
        for name in self.promotion.waivers:
            if name not in pools:
                raise at(("promotion", "waivers", name), f"names no pool of this stack ({', '.join(sorted(pools))})")
        declared = self.promotion.runningToday
        if declared is None:
            return
        key = ("promotion", "runningToday", "driver")
        precompiled = self.driver.owner == DriverOwner.OPERATOR and self.gpuOperator.usePrecompiled
        if self.stage != Stage.PROD:
            raise at(("promotion", "runningToday"), f"only a prod stack's gate reads it; this stack's stage is "
                     f"'{self.stage.value}' (a canary's driver is judged by the canary itself)")
        if is_branch_only(declared.driver) and not precompiled:
            raise at(key, f"'{declared.driver}' is a branch, not a release: declare the exact driver the nodes "
                     "report (their GFD driver labels, nvidia-smi), such as 570.195.03 (a branch only with "
                     "gpuOperator.usePrecompiled, whose pins are branches)")

    def _check_validation(self) -> None:
        if self.validation is None:
            return
        pools = {pool.name for pool in self.nodePools}
        for key in ("baselines", "evictOnFailure"):
            for name in getattr(self.validation, key):
                if name not in pools:
                    raise at(("validation", key, name), f"names no pool of this stack ({', '.join(sorted(pools))})")

    def _check_driver_versions(self) -> None:
        if is_branch_only(self.driver.version) and not (
            self.driver.owner == DriverOwner.OPERATOR and self.gpuOperator.usePrecompiled
        ):
            raise at(
                ("driver", "version"),
                f"'{self.driver.version}' is a branch, not a release; a branch alone is only valid with "
                "gpuOperator.usePrecompiled: true (precompiled images are tagged by branch). Pin an exact "
                "release such as 580.173.02",
            )
        prev = self.driver.previousVersion
        if prev is not None and is_branch_only(prev) and not self.gpuOperator.usePrecompiled:
            raise at(("driver", "previousVersion"), f"'{prev}' is a branch, not a release")
        if self.driver.owner == DriverOwner.OPERATOR and self.gpuOperator.usePrecompiled:
            # Precompiled images are tagged <branch>-<kernel>-<os>: an exact release names no image.
            for key, version in (("version", self.driver.version), ("previousVersion", prev)):
                if version is not None and not is_branch_only(version):
                    raise at(
                        ("driver", key),
                        f"'{version}' is an exact release, but precompiled driver images are tagged by "
                        f"branch: write the branch alone (\"{version.split('.')[0]}\")",
                    )
        held = [p.name for p in self.nodePools if self.pool_held(p)]
        if self.gpuOperator.unpinnedHoldReason is not None and (
            self.driver.owner != DriverOwner.OPERATOR or self.gpuOperator.useNvidiaDriverCrd
        ):
            raise at(
                ("gpuOperator", "unpinnedHoldReason"),
                "only means something with driver.owner: operator and useNvidiaDriverCrd: false (one "
                "cluster-wide driver); here held pools are pinned to previousVersion, so remove it",
            )
        if held and prev is None and self.driver.owner == DriverOwner.OPERATOR:
            raise at(
                ("driver", "previousVersion"),
                f"required while pools are held ({', '.join(held)}): a held pool stays pinned to the driver "
                "it runs now, so new nodes there do not get the new driver",
            )

    def _check_pools(self) -> None:
        seen: set[str] = set()
        cloud = self.cluster.cloud
        for index, pool in enumerate(self.nodePools):
            where = ("nodePools", index)
            if pool.name in seen:
                raise at((*where, "name"), f"duplicate pool name '{pool.name}'")
            seen.add(pool.name)
            for block in Cloud:
                present = getattr(pool, block) is not None
                if cloud == block and not present:
                    raise at((*where, block), f"cloud is '{cloud}', so every pool needs its '{block}' block")
                if cloud != block and present:
                    raise at((*where, block), foreign_pool_block(block, cloud))
            self._check_generations(pool, where)
            self._check_pool_upgrade_policy(pool, where)
            self._check_eks_pool(pool, where)
            self._check_operator_os(pool, where)
            if pool.fabricManagerVersion is not None and is_branch_only(pool.fabricManagerVersion):
                raise at((*where, "fabricManagerVersion"), "Fabric Manager must match the driver exactly: give a release")
            for gen in [None, *pool.live_generations]:
                name = pool.cloud_name(gen)
                if cloud == Cloud.AKS and not AKS_POOL.fullmatch(name):
                    raise at(
                        (*where, "name"),
                        f"AKS Linux pool name '{name}' is invalid: lowercase letters and digits only, "
                        "starting with a letter, at most 12 characters (generations add 'g<id>')",
                    )
                if cloud == Cloud.EKS and not EKS_NODEGROUP.fullmatch(name):
                    raise at((*where, "name"), f"EKS node group name '{name}' is invalid: letters, digits, '-', '_'")
                if cloud == Cloud.EXISTING and not DNS_LABEL.fullmatch(name):
                    raise at((*where, "name"), f"pool name '{name}' must be a valid label value")
        self._check_existing_selectors()
        if self.stage == Stage.CANARY and not any(p.role == "canary" for p in self.nodePools):
            raise at(("nodePools",), "the canary stage needs at least one pool with role: canary")
        driver_names: dict[str, str] = {}
        for index, pool in enumerate(self.nodePools):
            other = driver_names.setdefault(kubernetes_name(pool.name), pool.name)
            if other != pool.name:
                raise at(
                    ("nodePools", index, "name"),
                    f"pools '{other}' and '{pool.name}' map to the same Kubernetes name "
                    f"'{kubernetes_name(pool.name)}' (their NVIDIADrivers would collide); rename one",
                )

    def _check_pool_upgrade_policy(self, pool: NodePool, where: tuple[object, ...]) -> None:
        """A pool's own upgrade policy needs an object that carries it for that pool alone: its NVIDIADriver, with
        an upgradePolicy of its own (operator v26.7.0 on). Elsewhere one policy governs every node, and a pool key
        would be a setting nothing reads."""
        if pool.upgradePolicy is None:
            return
        key = (*where, "upgradePolicy")
        op = self.gpuOperator
        if self.driver.owner != DriverOwner.OPERATOR:
            raise at(key, "the node image owns the driver (driver.owner: image): no operator upgrade policy rolls "
                     "this pool's nodes (they move by generations); remove it")
        if not op.useNvidiaDriverCrd:
            raise at(key, "gpuOperator.useNvidiaDriverCrd is false (ClusterPolicy mode): one ClusterPolicy's "
                     "upgradePolicy governs every node, so a pool cannot have its own; set "
                     "gpuOperator.upgradePolicy, or move to per-pool NVIDIADrivers first")
        if not op.per_driver_upgrade_policy:
            raise at(key, f"gpuOperator.chartVersion {op.chartVersion} is before v26.7.0: an NVIDIADriver carries "
                     "no upgradePolicy of its own there, the ClusterPolicy's governs every node; set "
                     "gpuOperator.upgradePolicy, or upgrade the operator first")

    def _check_existing_selectors(self) -> None:
        """Two pools whose selectors nest would claim the same nodes (and their NVIDIADrivers would overlap)."""
        declared = [(i, p) for i, p in enumerate(self.nodePools) if p.existing is not None]
        for index, pool in declared:
            assert pool.existing is not None
            mine = set(pool.existing.nodeSelector.items())
            for other_index, other in declared:
                assert other.existing is not None
                theirs = set(other.existing.nodeSelector.items())
                if other_index < index and (mine <= theirs or theirs <= mine):
                    raise at(
                        ("nodePools", index, "existing", "nodeSelector"),
                        f"selects every node that pool '{other.name}' selects, or the other way round: "
                        "each pool's nodeSelector must single out its own nodes",
                    )

    def _check_eks_pool(self, pool: NodePool, where: tuple[object, ...]) -> None:
        if pool.eks is None:
            return
        if self.driver.owner == DriverOwner.OPERATOR:
            self._check_operator_eks_pool(pool.eks, (*where, "eks"))
        if self.driver.owner == DriverOwner.IMAGE and pool.eks.amiType and not is_nvidia_ami(pool.eks.amiType):
            raise at(
                (*where, "eks", "amiType"),
                f"driver.owner is image, but {pool.eks.amiType} carries no NVIDIA driver and the operator's "
                "driver is disabled: no driver would be installed. Use an _NVIDIA AMI",
            )

    def _check_operator_eks_pool(self, eks: EksPool, where: tuple[object, ...]) -> None:
        """The operator's driver has images for Ubuntu (and RHEL), not for any EKS-optimized AMI: an
        operator-owned node group runs a custom Ubuntu EKS AMI named by its launch template."""
        if eks.amiType is not None:
            why = (
                "carries its own NVIDIA driver, and the operator would install a second one"
                if is_nvidia_ami(eks.amiType)
                else compat.operator_supports_os(self.gpuOperator.chartVersion, EKS_AMI_OS[eks.amiType]).reason
            )
            raise at(
                (*where, "amiType"),
                f"{eks.amiType}: {why}. For an operator-owned driver, run a custom Ubuntu EKS AMI: name it in "
                "eks.launchTemplate (with its os) and leave amiType unset",
            )
        if eks.launchTemplate is None:
            raise at(
                (*where, "launchTemplate"),
                "an operator-owned driver on EKS needs a custom Ubuntu EKS AMI, which a managed node group takes "
                "only from a launch template (ImageId): set launchTemplate {id, version, os}",
            )
        if eks.launchTemplate.os is None:
            raise at((*where, "launchTemplate", "os"), "required: the operating system of the launch template's AMI")
        if eks.releaseVersion is not None:
            raise at(
                (*where, "releaseVersion"),
                "a node group on a custom AMI takes no releaseVersion (EKS refuses it): the pinned launch "
                "template version pins the AMI",
            )

    def _check_operator_os(self, pool: NodePool, where: tuple[object, ...]) -> None:
        """Operator-owned pools only on operating systems the operator release ships a driver image for."""
        if self.driver.owner != DriverOwner.OPERATOR:
            return
        key: tuple[str, ...]
        if pool.aks is not None:
            key, systems = ("aks", "osSku"), aks_os(pool.aks.osSku)
        elif pool.eks is not None and pool.eks.launchTemplate is not None:
            key, systems = ("eks", "launchTemplate", "os"), eks_os(None, pool.eks.launchTemplate.os)
        elif pool.existing is not None:
            key, systems = ("existing", "os"), eks_os(None, pool.existing.os)
        else:
            return
        for os_id in systems:
            answer = compat.operator_supports_os(self.gpuOperator.chartVersion, os_id)
            if answer.no:
                raise at((*where, *key), f"driver.owner is operator, but {answer.reason}")

    def _check_generations(self, pool: NodePool, where: tuple[object, ...]) -> None:
        if self.driver.owner == DriverOwner.OPERATOR:
            if pool.generations is not None:
                raise at((*where, "generations"), "generations are for image-owned pools (driver.owner: image)")
            return
        if self.cluster.cloud == Cloud.EXISTING:
            return
        if not pool.generations:
            raise at(
                (*where, "generations"),
                "image-owned pools move by generations: list at least one {id, driverVersion, releaseVersion}",
            )
        ids = [g.id for g in pool.generations]
        if len(set(ids)) != len(ids):
            raise at((*where, "generations"), f"duplicate generation ids {sorted(ids)}")
        if not pool.live_generations:
            raise at((*where, "generations"), "every generation is retired; keep at least one live")
        image_key = "releaseVersion" if self.cluster.cloud == Cloud.EKS else "nodeImageVersion"
        for g_index, gen in enumerate(pool.generations):
            if getattr(gen, image_key) is None:
                raise at((*where, "generations", g_index, image_key), f"required on {self.cluster.cloud} pools")
        for g_index, gen in enumerate(pool.generations):
            if is_branch_only(gen.driverVersion):
                raise at((*where, "generations", g_index, "driverVersion"), "a node image ships an exact release, not a branch")
        # The highest id of all, retired or not (newest_generation is the newest live one).
        last = max(pool.generations, key=lambda g: g.id)
        if last.retired:
            raise at((*where, "generations"), f"the newest generation g{last.id} cannot be retired")
        if self.pool_held(pool) and any(g.driverVersion == self.driver.version for g in pool.live_generations):
            raise at(
                (*where, "generations"),
                f"pool '{pool.name}' is held (rollout.released: false) but already has a live generation on "
                f"the target driver {self.driver.version}: release the pool or remove that generation",
            )
        if pool.eks is not None and pool.eks.capacityType == "CAPACITY_BLOCK":
            reserved = sum(pool.generation_nodes(g) for g in pool.live_generations)
            if reserved > pool.nodeCount:
                raise at(
                    (*where, "generations"),
                    f"a Capacity Block reserves nodeCount ({pool.nodeCount}) instances, but the live generations "
                    f"ask for {reserved}: give each its share (generations[].nodeCount) and move nodes from the "
                    "old generation to the new one a node at a time",
                )

    def _check_models(self) -> None:
        pools = {p.name for p in self.nodePools}
        budgets: dict[str, str] = {}
        for index, model in enumerate(self.models):
            # A model's PDB resource is named <namespace>-<name>; two models must not share it.
            qualified, budget = f"{model.namespace}/{model.name}", f"{model.namespace}-{model.name}"
            other = budgets.get(budget)
            if other is not None:
                what = "duplicate model" if other == qualified else f"models '{other}' and"
                raise at(("models", index, "name"), f"{what} '{qualified}' (their PDB resource names collide)")
            budgets[budget] = qualified
            for p_index, pool in enumerate(model.nodePools):
                if pool not in pools:
                    raise at(
                        ("models", index, "nodePools", p_index),
                        f"model '{model.name}' names pool '{pool}', which is not in nodePools "
                        f"(known: {', '.join(sorted(pools))})",
                    )

    # ------------------------------------------------------------ derived facts

    def pool(self, name: str) -> NodePool:
        for pool in self.nodePools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def _pinned_driver(self, pool: NodePool) -> str:
        """The driver a pool is pinned to by ``driver``: the target once released (or canary), else the previous
        one. Only :meth:`pool_target` reads it: an image-owned pool's nodes run its newest generation's driver."""
        if pool.role == "canary" or pool.rollout.released or self.driver.previousVersion is None:
            return self.driver.version
        return self.driver.previousVersion

    def pool_held(self, pool: NodePool) -> bool:
        """Held pools carry the skip label: the canary is never held, prod pools until released."""
        return pool.role != "canary" and not pool.rollout.released

    def pool_target(self, pool: NodePool) -> PoolTarget:
        """What ``pool`` moves to: an image-owned pool its newest live generation (that node image and the
        driver it ships), any other pool the driver it is pinned to (``driver.version``, or ``previousVersion``
        while held) on the node image it declares; held or released, and why. Everything that asks what a pool's nodes should run reads it
        from here: the pool summaries, the prod gate, the NVIDIADrivers, the validation job, `verify`, `watch` and
        preflight."""
        newest = pool.newest_generation
        held = self.pool_held(pool)
        if pool.role == "canary":
            why = "canary"
        elif held:
            why = "held: rollout.released is false"
        else:
            why = f"released in wave {pool.rollout.wave}"
        if self.driver.owner == DriverOwner.IMAGE and newest is not None:
            driver = newest.driverVersion
        else:
            driver = self._pinned_driver(pool)
        if newest is not None:
            image = newest.image
        else:
            image = pool.eks.releaseVersion if pool.eks is not None else None
        return PoolTarget(
            pool=pool.name, driver=driver, image=image, generation=newest.id if newest is not None else None,
            held=held, why=why,
        )

    @property
    def per_pool_upgrade_policies(self) -> bool:
        """Each pool is rolled by its own NVIDIADriver's upgradePolicy (operator-owned driver, per-pool mode,
        operator v26.7.0 on), so ``nodePools[].upgradePolicy`` can set it."""
        op = self.gpuOperator
        return self.driver.owner == DriverOwner.OPERATOR and op.useNvidiaDriverCrd and op.per_driver_upgrade_policy

    def upgrade_policy(self, pool: NodePool) -> UpgradePolicy:
        """The upgrade policy that rolls ``pool``'s nodes: ``gpuOperator.upgradePolicy`` with each key the pool's
        own ``upgradePolicy`` gives in its place (a block's keys one by one). The one answer the NVIDIADriver, the
        validation job, the simulator and the live checks read; the pack reads what the NVIDIADriver carries."""
        stack = self.gpuOperator.upgradePolicy
        if pool.upgradePolicy is None:
            return stack
        merged = _overlaid(stack.as_crd(), pool.upgradePolicy.model_dump(mode="json", exclude_unset=True))
        return UpgradePolicy.model_validate(merged)

    def validation_gpus(self, pool: NodePool) -> int:
        """GPUs the validation job's pod takes on one node of ``pool`` while it validates it: every GPU of the
        node, on a pool the job validates (one that moves, on a stack with a ``validation`` block); else 0.
        The job requests exactly this (components/validation.py); capacity counts the same number."""
        if self.validation is None or not self.pool_target(pool).moves:
            return 0
        return capacity.validation_gpus(pool.gpusPerNode)

    def evicts_on_failed_validation(self, pool: NodePool) -> bool:
        """Whether `gpu-rollout watch` evicts the model pods of a node of ``pool`` held by a failed validation:
        ``validation.evictOnFailure[pool]``, else yes on pools that serve (canary, serving), no on batch pools."""
        if self.validation is None:
            return False
        return self.validation.evictOnFailure.get(pool.name, pool.role != "batch")


def _overlaid(base: dict[str, object], keys: dict[str, object]) -> dict[str, object]:
    """``base`` with each key of ``keys`` in its place; a block (a mapping) key by key."""
    merged = dict(base)
    for key, value in keys.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = _overlaid(below, value)
        else:
            merged[key] = value
    return merged
