"""policy.process_rules called directly: every stage names its change ticket, the canary's included."""

from __future__ import annotations

import copy

from policy import process_rules
from policy.facts import Resource
from gpu_knowledge import labels
from tests.policy.rules import resources, stack


def _without(items: list[Resource], annotation: str, tag: str) -> list[Resource]:
    out = []
    for res in items:
        props = copy.deepcopy(dict(res.props))
        (props.get("metadata") or {}).get("annotations", {}).pop(annotation, None)
        (props.get("tags") or {}).pop(tag, None)
        out.append(Resource(res.type, res.name, props, res.urn))
    return out


def test_prod_with_its_ticket_passes_and_without_it_fails(rendered):
    assert list(process_rules.change_ticket(stack(resources(rendered["prod"])))) == []
    no_ticket = _without(resources(rendered["prod"]), labels.ANNOTATION_CHANGE_TICKET, labels.TAG_CHANGE_TICKET)
    (finding,) = process_rules.change_ticket(stack(no_ticket))
    assert not finding.advisory and finding.resource is None
    assert finding.message == ("the prod stage must name a change ticket (changeTicket): the approved change this "
                               "deployment is")


def test_a_canary_needs_its_ticket_too(rendered):
    """The runbook's change ticket: the canary is a change to a production cluster (issue 36)."""
    no_ticket = _without(resources(rendered["canary"]), labels.ANNOTATION_CHANGE_TICKET, labels.TAG_CHANGE_TICKET)
    (finding,) = process_rules.change_ticket(stack(no_ticket))
    assert not finding.advisory
    assert finding.message == ("the canary stage must name a change ticket (changeTicket): the canary is a change to "
                               "a production cluster too")
    assert list(process_rules.change_ticket(stack(resources(rendered["canary"])))) == []


def test_a_stage_not_visible_or_not_one_of_the_stages_is_advice_or_nothing(rendered):
    hidden = _without(resources(rendered["prod"]), labels.ANNOTATION_STAGE, labels.TAG_STAGE)
    (finding,) = process_rules.change_ticket(stack(hidden))
    assert finding.advisory and "stage is not visible" in finding.message
    # Two stages stated at once are as good as none.
    (pdb, *_) = [r for r in resources(rendered["canary"]) if r.type.endswith("PodDisruptionBudget")]
    (finding,) = process_rules.change_ticket(stack([*resources(rendered["prod"]), pdb]))
    assert finding.advisory
    # A stage the resources state but that is neither canary nor prod asks for its ticket too: every change does.
    odd = []
    for res in _without(resources(rendered["prod"]), labels.ANNOTATION_CHANGE_TICKET, labels.TAG_CHANGE_TICKET):
        props = copy.deepcopy(dict(res.props))
        if labels.ANNOTATION_STAGE in ((props.get("metadata") or {}).get("annotations") or {}):
            props["metadata"]["annotations"][labels.ANNOTATION_STAGE] = "staging"
        if labels.TAG_STAGE in (props.get("tags") or {}):
            props["tags"][labels.TAG_STAGE] = "staging"
        odd.append(Resource(res.type, res.name, props, res.urn))
    assert stack(odd).stage_stated and stack(odd).stage is None
    (finding,) = process_rules.change_ticket(stack(odd))
    assert not finding.advisory and finding.message.startswith("this stack must name a change ticket (changeTicket)")


def _stated_version(items: list[Resource], version: str | None) -> list[Resource]:
    """The stack's resources with its cluster-identity record stating ``version`` (None: no stamp)."""
    out = []
    for res in items:
        props = copy.deepcopy(dict(res.props))
        if (props.get("metadata") or {}).get("labels", {}).get(labels.RECORD) == labels.RECORD_CLUSTER_IDENTITY:
            props["data"].pop("factsVersion")
            if version is not None:
                props["data"]["factsVersion"] = version
        out.append(Resource(res.type, res.name, props, res.urn))
    return out


def test_the_program_stamps_the_facts_version_the_pack_reads(rendered):
    from engine_contracts import resource_facts as rf

    assert rf.READABLE_FACTS_VERSION >= rf.FACTS_VERSION  # a pack always reads what its own program writes
    (record,) = [r for r in resources(rendered["prod"]) if r.props.get("data", {}).get("cluster")]
    assert record.props["data"]["factsVersion"] == str(rf.FACTS_VERSION)
    assert list(process_rules.facts_readable(stack(resources(rendered["prod"])))) == []
    assert list(process_rules.facts_readable(stack(_stated_version(resources(rendered["prod"]), None)))) == []


def test_facts_newer_than_the_pack_reads_are_refused_naming_both_versions(rendered):
    from engine_contracts import resource_facts as rf

    newer = str(rf.READABLE_FACTS_VERSION + 1)
    (finding,) = process_rules.facts_readable(stack(_stated_version(resources(rendered["canary"]), newer)))
    assert not finding.advisory and finding.resource is not None
    assert f"the program wrote resource facts version {newer}" in finding.message
    assert f"this pack reads facts up to version {rf.READABLE_FACTS_VERSION}" in finding.message
    (odd,) = process_rules.facts_readable(stack(_stated_version(resources(rendered["canary"]), "two")))
    assert "states facts version 'two', not a version this pack reads" in odd.message
