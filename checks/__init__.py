"""Live-cluster checks: preflight, verify, watch, pause and resume.

The Kubernetes API is reached through one adapter, :mod:`checks.kube`, built on the official
``kubernetes`` client. We chose it over ``lightkube`` because it is already a pinned dependency of the
project (one client, one kubeconfig loader for every tool here), it is maintained by the Kubernetes
project itself, and its kubeconfig handling (exec plugins for ``az``/``aws`` logins, contexts,
in-cluster service accounts) is the reference implementation that AKS and EKS document.

Modules: ``errors`` (our error hierarchy, retryable vs permanent), ``kube`` (the adapter: bounded,
retried, paginated calls), ``objects`` (reading Kubernetes objects: metadata, labels, selectors,
containers), ``identity`` (is the cluster reached the stack's? every live verb asks it first),
``inventory`` (one read of everything preflight needs; a pool's nodes by ``fleetspec.membership``),
``metadata`` (a check's id and runbook section, declared on its function), one module per runbook section
(``cluster``, ``owner``, ``compatibility``, ``disruption`` for preflight, ``validation`` for verify),
``catalogue`` (imports those modules and gathers their checks in output order), ``results`` (what a check
returns), ``preflight`` (runs the catalogue), ``nodestate`` (per-node facts shared by watch and pause:
driver version, done), ``progress`` (what both watches share, models counted from their pods),
``pause``, ``watch`` and ``generations`` (the image-owned watch). Every label and annotation key they
read or write is in :mod:`gpu_knowledge.labels`.
"""
