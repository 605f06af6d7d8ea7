"""The registry as CrossGuard policies. Builds ``pulumi_policy`` objects; never constructs the pack
(``PolicyPack(...)`` starts a server and blocks, so only ``policy/__main__.py`` calls it)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.facts import Resource
from policy.findings import Finding
from policy.registry import REGISTRY, PolicyDef

PACK_NAME = "gpu-driver-upgrade"

# CrossGuard has one enforcement level per policy. Findings the rules grade as advice (an operator
# release listing only the branch, a timeout of 0, a fact not visible) would otherwise take the
# policy's mandatory level, so the pack reports them only when this setting asks for them;
# `gpu-rollout plan` always shows them, as advisory.
ADVICE_SETTING = "reportAdvice"
CONFIG_SCHEMA = PolicyConfigSchema(
    properties={ADVICE_SETTING: {"type": "boolean", "default": False}},
)


def _report(findings: list[Finding], args_config: Any, report: ReportViolation) -> None:
    show_advice = bool((args_config or {}).get(ADVICE_SETTING, False))
    for finding in findings:
        if finding.advisory and not show_advice:
            continue
        urn = finding.resource.urn if finding.resource is not None and finding.resource.urn else None
        report(finding.message, urn)


def _resource_validator(policy: PolicyDef):
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in policy.resource_types:
            return
        resource = Resource(args.resource_type, args.name, args.props, args.urn)
        _report(policy.findings([resource]), args.get_config(), report)

    return validate


def _stack_validator(policy: PolicyDef):
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [Resource(r.resource_type, r.name, r.props, r.urn) for r in args.resources]
        _report(policy.findings(resources), args.get_config(), report)

    return validate


def _common(policy: PolicyDef) -> dict[str, Any]:
    return {
        "name": policy.id,
        "description": policy.description,
        "enforcement_level": EnforcementLevel(policy.level.value),
        "config_schema": CONFIG_SCHEMA,
        "severity": Severity[policy.severity.name],
        "tags": list(policy.topics),
        "remediation_steps": policy.remediation,
    }


def build_policy(policy: PolicyDef) -> Policy:
    if policy.stack_rule is not None:
        return StackValidationPolicy(validate=_stack_validator(policy), **_common(policy))
    return ResourceValidationPolicy(validate=_resource_validator(policy), **_common(policy))


def build_policies() -> list[Policy]:
    return [build_policy(policy) for policy in REGISTRY.values()]
