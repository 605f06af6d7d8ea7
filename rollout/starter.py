"""`gpu-rollout init`: a team's first canary and prod stack files, made from the example of their cloud.

The examples (``Pulumi.canary.yaml``/``Pulumi.prod.yaml`` for AKS, ``Pulumi.eks-*.yaml``,
``Pulumi.existing-*.yaml``) are working fleets of someone else's. What of them must not carry over is replaced
or removed, never silently kept:

- the cluster: ``cluster.name`` and the cloud's names (AKS resource group, cluster and location; EKS cluster,
  region, node role and subnets; an existing cluster's context and kubeconfig) come from the flags;
- the promotion: the prod stack is promoted from the new canary stack, so the gate reads
  ``attestations/<canary>/``, which holds no example attestation (a canary name whose folder already holds
  attestations, or a stack file that exists, is refused); the example's ``promotion.waivers`` are the example
  team's judgement and are dropped;
- the change tickets are the example's: replaced by ``--change-ticket``, else removed (policy asks every
  stack for one, so their plans say so);
- trust: ``policy/prod.json`` trusts no key as shipped (only the examples' own config trusts the example key,
  whose private half is in the tests). With ``--trust-key`` (the ``*.pub.json`` `gpu-rollout keygen` writes) init lists
  that key in ``canary-attested.trustedKeys`` scoped to the new prod stack (``org/project/<prod>``; a key already
  listed keeps its entry and gains the stack), so one team's key never admits a driver into another team's prod,
  and removes the example key; without it, it changes no policy and prints the steps;
- the fleet: the deploy workflow moves stacks only through the train (``Fleet.yaml``, docs/fleet.md), and a stack
  in no wave breaks ``fleet plan``. init appends the canary to the canary wave and gives the prod stack a wave of
  its own after the last; a fleet file whose waves it cannot edit safely is left as it is, and the next steps
  show the lines to add.

Pools and models stay the example's: the next steps say to edit them. Files are written only when every
check passed; exit 2 (nothing written) for a name, file or flag that cannot be used.
"""

from __future__ import annotations

from collections.abc import Callable

import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from refusals.errors import InvalidInput
from refusals.exits import Exit
from rollout.project import SOURCE_DIR
from engine_contracts import attestation
from fleetspec import stacks, yaml_files
from fleetspec.fleet_file import FLEET_FILE, fleet_from_document
from fleetspec.load import MAX_STACK_FILE_BYTES, SpecError, SpecProblem, spec_from_config, config_strings
from fleetspec.model import PROJECT
from renderers.manifests import qualified_stack
from vocabulary.policy_ids import PolicyId

EXAMPLES = {"aks": ("canary", "prod"), "eks": ("eks-canary", "eks-prod"), "existing": ("existing-canary", "existing-prod")}
PACK_CONFIG = Path("policy") / "prod.json"
GATE = PolicyId.CANARY_ATTESTED
TRUSTED_KEYS = "trustedKeys"
_VERSION_LIKE = re.compile(r"^v?\d[\w.+-]*$")  # 580.173.02, 1.33.5, 12.6, v26.7.0


class _Dumper(yaml.SafeDumper):
    """Writes a version-like string quoted, as the examples do: edited to 595.91 unquoted, YAML would read a
    number, which the loader refuses (docs/config.md, versions are strings)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _VERSION_LIKE.match(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


@dataclass(frozen=True)
class Cluster:
    """The team's cluster, as the flags give it (the cloud's own fields only where they apply)."""

    cloud: str
    name: str
    resource_group: str | None = None
    aks_cluster: str | None = None
    location: str | None = None
    region: str | None = None
    eks_cluster: str | None = None
    node_role_arn: str | None = None
    subnets: tuple[str, ...] = ()
    context: str | None = None
    kubeconfig: str | None = None

    def missing(self) -> list[str]:
        """The flags this cloud needs that were not given."""
        needed = {"aks": (("--resource-group", self.resource_group), ("--location", self.location)),
                  "eks": (("--region", self.region), ("--node-role-arn", self.node_role_arn),
                          ("--subnet", self.subnets or None)),
                  "existing": (("--context", self.context),)}[self.cloud]
        return [flag for flag, value in needed if not value]

    def apply(self, config: dict[str, Any]) -> None:
        """Put the team's cluster into a stack file's config block."""
        cluster = config[f"{PROJECT}:cluster"]
        cluster["name"] = self.name
        if self.cloud == "aks":
            cluster["aks"].update(resourceGroup=self.resource_group, clusterName=self.aks_cluster or self.name)
            config["azure-native:location"] = self.location
        elif self.cloud == "eks":
            cluster["eks"].update(clusterName=self.eks_cluster or self.name, region=self.region,
                                  nodeRoleArn=self.node_role_arn, subnetIds=list(self.subnets))
            config["aws:region"] = self.region
        else:
            cluster["existing"] = {"context": self.context, **({"kubeconfig": self.kubeconfig} if self.kubeconfig else {})}


def example_file(project_dir: Path, stack: str) -> Path:
    """The example stack file: the project's, else the checkout gpu-rollout runs from (a project whose examples
    were removed)."""
    for folder in (project_dir, SOURCE_DIR):
        if (folder / f"Pulumi.{stack}.yaml").is_file():
            return folder / f"Pulumi.{stack}.yaml"
    raise SpecError([SpecProblem("--cloud", f"no example Pulumi.{stack}.yaml in {project_dir} or {SOURCE_DIR}")])


def made_from(example: Path, canary: str, prod: str, cluster: Cluster, change_ticket: str | None,
              is_prod: bool) -> dict[str, Any]:
    """A stack file's document from an example's, with the team's cluster and stacks (see the module)."""
    document = yaml_files.read(example, MAX_STACK_FILE_BYTES, yaml_files.StrictLoader)
    config = document["config"]
    cluster.apply(config)
    ticket = f"{PROJECT}:changeTicket"
    if change_ticket:
        config[ticket] = change_ticket
    else:
        config.pop(ticket, None)
    promotion = config.get(f"{PROJECT}:promotion")
    if is_prod and isinstance(promotion, dict):
        promotion["canaryStack"] = canary
        promotion.pop("waivers", None)
    return {"config": config}


def adopt_pools(config: dict[str, Any], pools: list[dict[str, Any]], found: Any, cloud: str) -> None:
    """``init --from-cluster``: the stack's pools are the cluster's (each adopted), its Kubernetes version the
    cluster's; the example's models, which run on the example's pools, go (the team declares its own)."""
    config[f"{PROJECT}:nodePools"] = pools
    config[f"{PROJECT}:models"] = []
    block = config[f"{PROJECT}:cluster"].get(cloud)
    if isinstance(block, dict) and found.kubernetes_version:
        block["kubernetesVersion"] = found.kubernetes_version


def header(example: Path, is_prod: bool, canary: str) -> str:
    lines = [f"Made by `gpu-rollout init` from the example {example.name}: the cluster is yours, the pools and "
             "models are still the example's; edit them (docs/config.md) and check with `gpu-rollout plan`."]
    if is_prod:
        lines.append(f"Promoted from stack {canary}: its drivers need attestations/{canary}/<driver>.json "
                     "from `gpu-rollout verify`, signed by a key policy/prod.json trusts.")
    return "".join(f"# {part}\n" for line in lines for part in textwrap.wrap(line, 108))


def trust(pack_config: Path, entry_file: Path, prod: str) -> str:
    """List the key of ``entry_file`` (keygen's ``*.pub.json``) in the gate's trustedKeys, scoped to the prod stack
    ``prod`` (qualified as the backend names it), and remove the example key; the new text of the pack config. A
    key listed already keeps its entry (window, comment) and gains the stack; an unscoped one stays unscoped (it
    takes every stack already). ValueError names what is wrong."""
    try:
        entry = json.loads(entry_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--trust-key {entry_file}: not a readable JSON entry ({exc})") from None
    (key,) = attestation.read_trusted_keys([entry], f"--trust-key {entry_file}")
    if key.id == attestation.EXAMPLE_KEY_ID:
        raise ValueError(f"--trust-key {entry_file} is the example key: make your own with `gpu-rollout keygen`")
    document = json.loads(pack_config.read_text(encoding="utf-8"))
    gate = document.get(GATE)
    if not isinstance(gate, dict):
        gate = {"enforcementLevel": gate} if isinstance(gate, str) else {}
        document[GATE] = gate
    listed = gate.get(TRUSTED_KEYS, [])
    stack = qualified_stack(prod)
    same = next((k for k in listed if isinstance(k, dict) and k.get("id") == key.id), None)
    if same is None:
        entry = {**key.entry(), "scope": [stack]}
    else:
        entry = dict(same)
        if entry.get("scope"):
            entry["scope"] = [*entry["scope"], stack] if stack not in entry["scope"] else entry["scope"]
    kept = [k for k in listed if not isinstance(k, dict) or k.get("id") not in (attestation.EXAMPLE_KEY_ID, key.id)]
    gate[TRUSTED_KEYS] = [*kept, entry]
    attestation.read_trusted_keys(gate[TRUSTED_KEYS], f"{pack_config}: {GATE}.{TRUSTED_KEYS}")
    return json.dumps(document, indent=2) + "\n"


def execute(project_dir: Path, cluster: Cluster, canary: str, prod: str, change_ticket: str | None,
            trust_key: Path | None, from_cluster: Callable[[str], Any] | None = None) -> Exit:
    """Check everything, then write both stack files (and the pack config with ``trust_key``); print the next
    steps. Exit 2, nothing written, when a flag, name or file cannot be used. ``from_cluster`` (``--from-cluster``):
    the cluster's pools, read from its cloud, given the example's driver version (:mod:`rollout.adopted_pools`)."""
    problems = _problems(project_dir, cluster, canary, prod)
    if problems:
        raise InvalidInput("\n".join(f"init: {problem}" for problem in problems))
    canary_example, prod_example = (example_file(project_dir, s) for s in EXAMPLES[cluster.cloud])
    return _write(project_dir, cluster, canary, prod, change_ticket, trust_key, from_cluster, canary_example,
                  prod_example)


def _problems(project_dir: Path, cluster: Cluster, canary: str, prod: str) -> list[str]:
    """What stops init before it writes anything: a flag the cloud needs, a bad or taken stack name."""
    problems = [f"{flag}: needed for --cloud {cluster.cloud}" for flag in cluster.missing()]
    for flag, name in (("--canary", canary), ("--prod", prod)):
        if not stacks.is_stack_name(name):
            problems.append(f"{flag}: {name!r} is not a stack name (letters, digits, '-', '_', '.')")
        elif (project_dir / f"Pulumi.{name}.yaml").exists():
            problems.append(f"{flag}: {project_dir / f'Pulumi.{name}.yaml'} exists; init never replaces a stack file")
    if canary == prod:
        problems.append("--canary/--prod: the two stacks need two names")
    folder = attestation.folder_for(project_dir / attestation.ATTESTATION_DIR, canary) \
        if stacks.is_stack_name(canary) else None
    if folder is not None and folder.is_dir() and any(folder.iterdir()):
        problems.append(f"--canary: {folder.relative_to(project_dir)} already holds attestations (another canary's, "
                        "such as the example's): choose another name, so the gate reads only your canary's")
    return problems


def _write(project_dir: Path, cluster: Cluster, canary: str, prod: str, change_ticket: str | None,
           trust_key: Path | None, from_cluster: Callable[[str], Any] | None, canary_example: Path,
           prod_example: Path) -> Exit:
    adopted = None
    if from_cluster is not None:  # the cluster's own pools, read through its cloud's API (rollout.adopted_pools)
        # What the pools run now, as far as the example says (driver.previousVersion): the generation an image-owned
        # pool is adopted as runs it; the team corrects it (init's note).
        driver = made_from(canary_example, canary, prod, cluster, change_ticket, False)["config"][f"{PROJECT}:driver"]
        adopted = from_cluster(driver.get("previousVersion") or driver["version"])
    texts = {}
    for name, example, is_prod in ((canary, canary_example, False), (prod, prod_example, True)):
        document = made_from(example, canary, prod, cluster, change_ticket, is_prod)
        if adopted is not None:
            adopt_pools(document["config"], adopted.prod if is_prod else adopted.canary, adopted.cluster,
                        cluster.cloud)
        spec_from_config(config_strings(document), source=f"Pulumi.{name}.yaml")  # refuse what plan would refuse
        texts[name] = header(example, is_prod, canary) + yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=110)
    pack_text = None
    if trust_key is not None:
        try:
            pack_text = trust(project_dir / PACK_CONFIG, trust_key, prod)
        except (ValueError, OSError) as exc:
            raise InvalidInput(f"init: {exc}") from None
    fleet_file = project_dir / FLEET_FILE
    fleet_text = joined_fleet(fleet_file.read_text(encoding="utf-8"), canary, prod) if fleet_file.is_file() else None
    for name, text in texts.items():
        (project_dir / f"Pulumi.{name}.yaml").write_text(text, encoding="utf-8")
    if pack_text is not None:
        (project_dir / PACK_CONFIG).write_text(pack_text, encoding="utf-8")
    if fleet_text is not None:
        fleet_file.write_text(fleet_text, encoding="utf-8")
    sys.stdout.write(next_steps(canary, prod, canary_example, prod_example, change_ticket, trust_key,
                                trusts_example_key(project_dir / PACK_CONFIG), fleet_text is not None))
    if adopted is not None:
        sys.stdout.write(adopted.summary())
    return Exit.OK


_TOP_LEVEL_KEY = re.compile(r"^[A-Za-z_][\w-]*:")
_FLOW_STACKS = re.compile(r"^(?P<head>\s+stacks:\s*\[)(?P<items>[^\]]*)(?P<tail>\]\s*(?:#.*)?)$")


def prod_wave(prod: str) -> list[str]:
    """The wave init gives a new prod stack: its own, after every other, one cluster at a time."""
    return [f"  # {prod}: added by gpu-rollout init, in a wave of its own after the others (docs/fleet.md).",
            f"  - name: {prod}", f"    stacks: [{prod}]", "    maxConcurrent: 1", "    waitFor:", "      verify: smoke"]


def joined_fleet(text: str, canary: str, prod: str) -> str | None:
    """The fleet file's text with ``canary`` appended to the first wave's stacks and ``prod`` in a wave of its own
    after the last, its comments and layout kept; None where its shape is not one this edit is sure of (the first
    wave's stacks not one flow list ``stacks: [a, b]``), or where the result does not read back as exactly that
    change: then the next steps show the lines to add."""
    lines = text.splitlines()
    try:
        start = lines.index("waves:")
    except ValueError:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _TOP_LEVEL_KEY.match(lines[i])), len(lines))
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # the comments above the next key are that key's
    first = next((i for i in range(start + 1, end) if lines[i].startswith("  - ")), None)
    second = next((i for i in range(first + 1, end) if lines[i].startswith("  - ")), end) if first is not None else end
    flow = next((i for i in range(first, second) if _FLOW_STACKS.match(lines[i])), None) \
        if first is not None else None
    if flow is None:
        return None
    match = _FLOW_STACKS.match(lines[flow])
    assert match is not None
    items = match["items"].strip()
    lines[flow] = f"{match['head']}{items + ', ' if items else ''}{canary}{match['tail']}"
    joined = "\n".join([*lines[:end], *prod_wave(prod), *lines[end:]]) + "\n"
    try:
        before, after = (fleet_from_document(yaml.safe_load(t)) for t in (text, joined))
    except (SpecError, yaml.YAMLError):
        return None
    expected = [[*before.waves[0].stacks, canary], *[w.stacks for w in before.waves[1:]], [prod]]
    if [w.stacks for w in after.waves] != expected or after.model_dump(exclude={"waves"}) != \
            before.model_dump(exclude={"waves"}):
        return None
    return joined


def trusts_example_key(pack_config: Path) -> bool:
    """Is the project's prod pack config still without a key of the team's own: it lists no key (as shipped:
    only the examples' own config, policy/examples/prod.json, trusts the example key) or the example key."""
    try:
        gate = json.loads(pack_config.read_text(encoding="utf-8")).get(GATE)
    except (OSError, ValueError, AttributeError):
        return False
    keys = gate.get(TRUSTED_KEYS, []) if isinstance(gate, dict) else []
    return not keys or any(isinstance(k, dict) and k.get("id") == attestation.EXAMPLE_KEY_ID for k in keys)


def next_steps(canary: str, prod: str, canary_example: Path, prod_example: Path, change_ticket: str | None,
               trust_key: Path | None, example_trusted: bool, fleet_joined: bool) -> str:
    steps = ["edit nodePools and models in both files: they are still the example's (docs/config.md)"]
    if fleet_joined:
        steps.append(f"{FLEET_FILE}: {canary} joined the canary wave and {prod} has a wave of its own after the "
                     "others; move it where your fleet wants it (docs/fleet.md), then gpu-rollout fleet plan")
    else:
        wave = "\n".join(f"       {line}" for line in prod_wave(prod)[1:])
        steps.append(f"add both stacks to {FLEET_FILE} (the deploy workflow moves stacks only through its waves): "
                     f"{canary} to the first wave's stacks, and {prod} in a later wave, e.g.\n{wave}")
    if not change_ticket:
        steps.append(f"set gpu-driver-upgrade:changeTicket in Pulumi.{canary}.yaml and Pulumi.{prod}.yaml (policy "
                     "asks every stack for one: the canary is a change to a production cluster too)")
    if trust_key is None and example_trusted:
        steps.append("make your signing key: gpu-rollout keygen --out <a folder outside the repository>; then list "
                     "the entry it prints in canary-attested.trustedKeys of policy/prod.json (and remove the example "
                     "key if it is there). Until then the gate refuses prod: it trusts no key of yours")
    elif trust_key is None:
        steps.append("policy/prod.json trusts your own key already (not the example's): sign the canary's "
                     "attestations with it (GPU_ROLLOUT_SIGNING_KEY)")
    else:
        steps.append(f"policy/prod.json trusts the key of {trust_key.name} for {qualified_stack(prod)} only (its "
                     "scope; on Pulumi Cloud set GPU_ROLLOUT_ORGANIZATION before init, or edit the scope to your "
                     "organization) and no longer the example key, so the example prod stacks' attestations no "
                     "longer pass: remove the example stack files and attestations/ folders you do not use")
    steps += [f"gpu-rollout plan --stack {canary}; gpu-rollout plan --stack {prod}",
              f"after the canary's rollout and soak: gpu-rollout verify --stack {canary}",
              f"the runbook with these stacks' names in its commands: gpu-rollout runbook --stack {prod}"]
    lines = [f"wrote Pulumi.{canary}.yaml (from {canary_example.name}) and Pulumi.{prod}.yaml (from "
             f"{prod_example.name})", "next:", *(f"  {n}. {step}" for n, step in enumerate(steps, 1))]
    return "\n".join(lines) + "\n"
