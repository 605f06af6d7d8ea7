"""The stack's own cluster: the Kubernetes provider that reaches it, and the record that says which one it is.

Every Kubernetes object goes through an explicit provider built from the stack's cluster (AKS user
credentials, the EKS endpoint with `aws eks get-token`, or the declared kubeconfig context of an
existing cluster), never through whatever context the shell's kubeconfig points at.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options
from renderers import kubelogin, manifests
from fleetspec.model import AksCluster, Cloud, Cluster, EksCluster


def _aks_kubeconfig(cluster: AksCluster, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    credentials = azure_native.containerservice.list_managed_cluster_user_credentials_output(
        resource_group_name=cluster.resourceGroup, resource_name=cluster.clusterName, opts=opts
    )
    # Entra ID clusters return an exec (kubelogin) kubeconfig here, so no long-lived token lands in state; its
    # default device-code login would wait for a person, so it is converted to a login from the environment
    # (renderers/kubelogin.py), or refused with the reason. Result types are dicts, read by key (nested results
    # arrive as typed objects or as plain dicts).
    return credentials.kubeconfigs.apply(
        lambda kubeconfigs: kubelogin.non_interactive(base64.b64decode(kubeconfigs[0]["value"]).decode(), os.environ))


def _eks_kubeconfig(cluster: EksCluster, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    found = aws.eks.get_cluster_output(name=cluster.clusterName, region=cluster.region, opts=opts)
    return pulumi.Output.all(found.endpoint, found.certificate_authorities).apply(
        lambda args: json.dumps(
            manifests.eks_kubeconfig(cluster.clusterName, cluster.region, args[0], args[1][0]["data"])
        )
    )


def kubernetes_provider(cluster: Cluster, parent: pulumi.Resource) -> k8s.Provider:
    """The explicit Kubernetes provider for the stack's cluster, a child of ``parent``."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    if cluster.cloud == Cloud.AKS:
        assert cluster.aks is not None  # Cluster requires the block of its cloud
        kubeconfig: pulumi.Output[str] = pulumi.Output.secret(_aks_kubeconfig(cluster.aks, invoke))
        return k8s.Provider("cluster", kubeconfig=kubeconfig, opts=child_options(parent))
    if cluster.cloud == Cloud.EKS:
        assert cluster.eks is not None
        return k8s.Provider("cluster", kubeconfig=_eks_kubeconfig(cluster.eks, invoke), opts=child_options(parent))
    existing = cluster.existing
    assert existing is not None
    # Without a kubeconfig path the provider reads $KUBECONFIG or ~/.kube/config, but always this context.
    return k8s.Provider("cluster", kubeconfig=existing.kubeconfig, context=existing.context,
                        opts=child_options(parent))


class ClusterIdentityArgs(ComponentArgs):
    cluster: str = Field(description="The cluster's name (cluster.name): the component's output.")
    record_name: str = Field(description="The identity ConfigMap's name, one per stage (manifests.identity_name).")
    metadata: dict[str, Any] = Field(description="The ConfigMap's metadata (manifests.identity_metadata).")
    data: dict[str, str] = Field(description="Which cluster this is, as the stack knows it (manifests.identity_data).")


class ClusterIdentity(pulumi.ComponentResource):
    """A ConfigMap in kube-system naming the cluster this stack manages (live verbs refuse another cluster), and
    the cluster's own identity as the engine reads it: the kube-system Namespace's UID, which the API server
    assigned and no stack file states (a canary exports it; the prod gate compares it with the attestation's)."""

    kube_system_uid: pulumi.Output[str | None]

    def __init__(self, name: str, args: ClusterIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:cluster:ClusterIdentity", name, None, opts)
        self.record = k8s.core.v1.ConfigMap(
            args.record_name,
            metadata=args.metadata,
            data=args.data,
            opts=child_options(self, opts),
        )
        # A read, not a resource the stack manages: the engine asks the cluster during preview and update alike.
        kube_system = k8s.core.v1.Namespace.get(f"{name}-kube-system", KUBE_SYSTEM, opts=child_options(self, opts))
        self.kube_system_uid = kube_system.metadata.apply(_uid)
        self.register_outputs({"cluster": args.cluster, "kubeSystemUid": self.kube_system_uid})


KUBE_SYSTEM = "kube-system"


def _uid(metadata: Any) -> str | None:
    """``metadata.uid`` of a read object: a typed ObjectMeta from the engine, a plain dict under some mocks."""
    uid = metadata.get("uid") if isinstance(metadata, dict) else getattr(metadata, "uid", None)
    return uid if isinstance(uid, str) and uid else None
