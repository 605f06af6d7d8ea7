"""The stack's own cluster: the Kubernetes provider that reaches it, and the record that says which one it is.

Every Kubernetes object goes through an explicit provider built from the stack's cluster (AKS user
credentials, the EKS endpoint with `aws eks get-token`, or the declared kubeconfig context of an
existing cluster), never through whatever context the shell's kubeconfig points at.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from renderers import kubelogin, manifests
from fleetspec.model import Cloud, FleetSpec


def _aks_kubeconfig(spec: FleetSpec, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    cluster = spec.cluster.aks
    assert cluster is not None
    credentials = azure_native.containerservice.list_managed_cluster_user_credentials_output(
        resource_group_name=cluster.resourceGroup, resource_name=cluster.clusterName, opts=opts
    )
    # Entra ID clusters return an exec (kubelogin) kubeconfig here, so no long-lived token lands in state; its
    # default device-code login would wait for a person, so it is converted to a login from the environment
    # (renderers/kubelogin.py), or refused with the reason. Result types are dicts, read by key (nested results
    # arrive as typed objects or as plain dicts).
    return credentials.kubeconfigs.apply(
        lambda kubeconfigs: kubelogin.non_interactive(base64.b64decode(kubeconfigs[0]["value"]).decode(), os.environ))


def _eks_kubeconfig(spec: FleetSpec, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    cluster = spec.cluster.eks
    assert cluster is not None
    found = aws.eks.get_cluster_output(name=cluster.clusterName, region=cluster.region, opts=opts)
    return pulumi.Output.all(found.endpoint, found.certificate_authorities).apply(
        lambda args: json.dumps(
            manifests.eks_kubeconfig(cluster.clusterName, cluster.region, args[0], args[1][0]["data"])
        )
    )


def kubernetes_provider(spec: FleetSpec, parent: pulumi.Resource) -> k8s.Provider:
    """The explicit Kubernetes provider for the stack's cluster."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    if spec.cluster.cloud == Cloud.AKS:
        kubeconfig: pulumi.Output[str] = pulumi.Output.secret(_aks_kubeconfig(spec, invoke))
        return k8s.Provider("cluster", kubeconfig=kubeconfig,
                            opts=pulumi.ResourceOptions(parent=parent))
    if spec.cluster.cloud == Cloud.EKS:
        return k8s.Provider("cluster", kubeconfig=_eks_kubeconfig(spec, invoke),
                            opts=pulumi.ResourceOptions(parent=parent))
    existing = spec.cluster.existing
    assert existing is not None  # FleetSpec requires it for cloud: existing
    # Without a kubeconfig path the provider reads $KUBECONFIG or ~/.kube/config, but always this context.
    return k8s.Provider("cluster", kubeconfig=existing.kubeconfig, context=existing.context,
                        opts=pulumi.ResourceOptions(parent=parent))


@dataclass(frozen=True)
class ClusterIdentityArgs:
    spec: FleetSpec


class ClusterIdentity(pulumi.ComponentResource):
    """A ConfigMap in kube-system naming the cluster this stack manages; live verbs refuse another cluster."""

    def __init__(self, name: str, args: ClusterIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:cluster:ClusterIdentity", name, None, opts)
        spec = args.spec
        metadata: dict[str, Any] = manifests.identity_metadata(spec)
        data = manifests.identity_data(spec)
        self.record = k8s.core.v1.ConfigMap(
            manifests.identity_name(spec),
            metadata=metadata,
            data=data,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"cluster": spec.cluster.name})
