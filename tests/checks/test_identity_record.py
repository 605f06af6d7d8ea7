"""The verdict names the identity record the stack's `pulumi up` writes, whatever records the cluster holds.

(The judge once let its loop over the cluster's records overwrite that name with the last record read:
mypy caught it when the type gates came in.)"""

from __future__ import annotations

from checks.identity import Verdict, identify_cluster
from preview.run import SOURCE_DIR
from renderers import manifests
from fleetspec.load import load_stack_file
from tests.fakekube.real_cluster import identity_configmap


def test_the_verdict_names_the_stacks_own_record_not_the_last_one_read() -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.existing-prod.yaml")
    ours = identity_configmap("canary", {"cluster": "lab-gpu-1", "cloud": "existing", "stage": "canary"})
    theirs = identity_configmap("prod", {"cluster": "lab-gpu-2", "cloud": "existing", "stage": "prod"})
    expected = f"{manifests.RECORD_NAMESPACE}/{manifests.identity_name(spec)}"
    for records in ([], [ours], [ours, theirs]):
        identity = identify_cluster(spec, records, [])
        assert identity.record == expected, (records, identity.verdict)
    assert identify_cluster(spec, [ours, theirs], []).verdict == Verdict.REFUTED
