"""Which stacks a deploy brings up, in which order, and with whose policy pack: what differs from what is
deployed, never "what this commit changed". Pure: the backend's records and git are handed in.

A push can carry several commits, and GitHub cancels a pending run of a concurrency group when a newer
one queues; a deploy that looks at the last commit alone loses changes. So each stack on main is compared
with its own last update in the backend (`pulumi stack history`): the config that update ran against the
stack file's, its result, and the commit it ran from (``git.head``) against main's first-parent history
since then, for changes to the program, the pack and, for a prod stack, its canary's attestations. A stack
that differs is deployed; whatever a cancelled or skipped run left undone, the next one finds. Canary stages
come before prod stages. A stack whose last update was a `gpu-rollout rollback` is left alone until its stack
file on main holds what it runs in the keys the rollback restored (its GPU runtime keys; the rollback's pull request
merged, or those keys reverted by hand), so a deploy never undoes a rollback; a difference in any other key is
deployed as usual.

The pack an ``up`` enforces is not the change's own (:func:`pack_base`): it is main as it was before the
earliest change the pack judges that is not deployed yet, so a pull request cannot weaken the gate its own
change passes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from git_revisions.repository import Commit
from pulumi_backend.history import rolled_back_to
from pulumi_backend.pulumi_config import Config, Update, config_changes, split_path
from promotion_train.stacks import StackFile, stage_order
from engine_contracts.attestation import ATTESTATION_DIR
from fleetspec.discipline import utc_now
from vocabulary.triggers import TriggerKind

# What the program that runs in `up` is made of (its dependencies' pins included), and the pack.
PROGRAM_PATHS = ("Pulumi.yaml", "__main__.py", "components/", "fleetspec/", "gpu_knowledge/", "engine_contracts/",
                 "renderers/", "workload/", "requirements.txt", "pyproject.toml", "constraints.txt")
PACK_PATHS = ("policy/",)


class Git(Protocol):
    """The repository as the plan reads it (``git_revisions.repository.Repository``)."""

    def is_ancestor(self, ancestor: str, commit: str) -> bool: ...

    def first_parent(self, commit: str) -> str | None: ...

    def first_parent_history(self, since: str | None, until: str) -> list[Commit]: ...

    def added_on_first_parent_line(self, name: str, until: str) -> Commit | None: ...


@dataclass(frozen=True)
class Deployed:
    """What the backend holds of a stack: its updates, newest first (None: the backend has no such stack),
    and the config its stack file holds, secrets decrypted (None: it could not be read)."""

    history: Sequence[Update] | None
    file_config: Config | None = None


# What a decision says of the stack, for the fleet's train (promotion_train/train.py), which must tell a stack in step with
# main from one left alone: the reason is for people.
DIFFERS = "differs"  # deploy it: it does not run what main says (or never ran)
IN_STEP = "in-step"  # its last update ran main's config, program and pack
RUNNING = "running"  # an update of it is still running in the backend
ROLLED_BACK = "rolled-back"  # left alone: a rollback whose pull request has not merged
DESTROYED = "destroyed"  # left alone: never brought back
OUTSIDE_WINDOW = TriggerKind.OUTSIDE_WINDOW.value  # it differs, but its maintenance window is closed


@dataclass(frozen=True)
class Decision:
    stack: StackFile
    deploy: bool
    reason: str
    pack_ref: str | None = None  # the commit whose policy/ the `up` enforces
    deployed_commit: str | None = None  # what the stack's last update ran from
    state: str = DIFFERS


@dataclass(frozen=True)
class DeployPlan:
    head: str
    decisions: tuple[Decision, ...]  # canary stages first, then prod, by name

    @property
    def to_deploy(self) -> list[Decision]:
        return [d for d in self.decisions if d.deploy]


def _touches(path: str, watched: Sequence[str]) -> bool:
    return any(path == w or (w.endswith("/") and path.startswith(w)) for w in watched)


def watched_paths(stack: StackFile) -> tuple[str, ...]:
    """What a stack's deployment is made of besides its config: the program, and for a prod stack its
    canary's attestations (the gate reads them in the program)."""
    attestations = (f"{ATTESTATION_DIR}/{stack.canary}/",) if stack.canary else ()
    return PROGRAM_PATHS + attestations


def pack_base(stack: StackFile, commits: Sequence[Commit], head: str) -> str:
    """The commit whose pack judges the commits not deployed yet: the first parent of the earliest of them that
    changed what the pack judges (the stack file, the program, the canary's attestations), so no change is
    judged by a pack that came with it or after it; main's head when only the pack itself changed."""
    judged = (stack.file, *watched_paths(stack))
    for commit in commits:
        if any(_touches(path, judged) for path in commit.paths):
            return commit.parent or commit.sha
    return head


def first_pack(stack: StackFile, head: str, git: Git) -> tuple[str | None, str]:
    """The commit whose pack judges a stack never deployed: main at the first parent of the commit of main's
    first-parent line that added its stack file (the merge that brought it, whatever merged after it), never a
    commit of the branch that brought it nor main as the merge left it. None, with why, where main's line never
    added the file: no pack is chosen, so the `up` is refused rather than judged by some other pack."""
    added = git.added_on_first_parent_line(stack.file, head)
    if added is None:
        return None, (f"; no commit of main's history added {stack.file}, so the pack that judges its first `up` "
                      "cannot be chosen (a shallow checkout? fetch main's whole history)")
    return added.parent or added.sha, ""


def _differing_keys(ran: Config, file_config: Config) -> list[str]:
    return sorted({split_path(c.path)[0] for c in config_changes(ran, file_config)})


def _few(items: Sequence[str], limit: int = 4) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _first_up(stack: StackFile, reason: str, head: str, git: Git) -> Decision:
    """Deploy a stack that never ran, judged by the pack before its stack file came to main."""
    ref, why = first_pack(stack, head, git)
    return Decision(stack, True, reason + why, ref)


def _overlaps(path: str, paths: set[str]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "[")) or p.startswith((path + ".", path + "["))
               for p in paths)


def restored_paths(updates: Sequence[Update]) -> set[str] | None:
    """The config paths the newest rollbacks restored (what each changed from the update before it, over the run of
    rollbacks at the head of the history); None: every key (a rollback with no update before it to compare)."""
    restored: set[str] = set()
    for index, update in enumerate(updates):
        if rolled_back_to(update) is None:
            break
        if index + 1 >= len(updates):
            return None
        restored |= {c.path for c in config_changes(updates[index + 1].config, update.config)}
    return restored


def _settled(stack: StackFile, deployed: Deployed, before_head: str, head: str, git: Git) -> Decision | None:
    """The decisions the backend's records alone settle: nothing to compare with, a destroyed stack, a
    rollback not merged yet."""
    if stack.problem is not None:
        return _first_up(stack, f"its stack file does not load ({stack.problem}): its `up` fails and says so", head,
                         git)
    if deployed.history is None:
        return _first_up(stack, "the backend has no such stack yet: the deploy creates it", head, git)
    updates = [u for u in deployed.history if u.kind in ("update", "destroy")]
    if not updates:
        return _first_up(stack, "never deployed", head, git)
    last = updates[0]
    if not last.ended:
        return Decision(stack, True, f"update {last.version} is still running: the deploy job waits for the stack's "
                        "concurrency group and plans again before its `up`", before_head, last.commit, RUNNING)
    if last.kind == "destroy":
        return Decision(stack, False, f"destroyed in update {last.version}: a deploy never brings it back; `pulumi up` "
                        "it by hand, or remove its stack file", deployed_commit=last.commit,
                        state=DESTROYED)
    rollback = rolled_back_to(last)
    if rollback is None:
        return None
    restored = restored_paths(updates)
    differing = sorted({c.path for c in config_changes(last.config, deployed.file_config)
                        if restored is None or _overlaps(c.path, restored)}) if deployed.file_config is not None else []
    if differing:
        return Decision(stack, False, f"update {last.version} rolled it back to update {rollback}; left alone until "
                        f"its stack file on main holds what it runs in the keys the rollback restored "
                        f"({_few(differing)} differ): merge the rollback's pull request, or set those keys as it "
                        "runs them", deployed_commit=last.commit, state=ROLLED_BACK)
    return None


def _changed(stack: StackFile, deployed: Deployed, commits: Sequence[Commit]) -> dict[str, str]:
    """What the stack runs that changed in ``commits``, each with the first commit that changed it. The stack
    file counts only where its config could not be read: otherwise the config itself is compared."""
    watched = (*watched_paths(stack), *PACK_PATHS) + ((stack.file,) if deployed.file_config is None else ())
    changed: dict[str, str] = {}
    for item in commits:
        for path in item.paths:
            if _touches(path, watched):
                top = next(w for w in watched if _touches(path, (w,)))
                changed.setdefault(top, item.sha[:12])
    return changed


def decide(stack: StackFile, deployed: Deployed, head: str, git: Git) -> Decision:
    """Deploy the stack or leave it alone, and why; for a deploy, the commit whose pack the `up` enforces."""
    before_head = git.first_parent(head) or head  # main before its last merge: "the commit before the merge"
    settled = _settled(stack, deployed, before_head, head, git)
    if settled is not None:
        return settled
    assert deployed.history is not None  # _settled decides every stack without one
    updates = [u for u in deployed.history if u.kind in ("update", "destroy")]
    last = updates[0]
    why = []
    if deployed.file_config is not None and (differing := _differing_keys(last.config, deployed.file_config)):
        why.append(f"its config differs from what update {last.version} ran ({_few(differing)})")
    if not last.good:
        why.append(f"update {last.version} {last.result}")
    commit = last.commit
    if commit is None:
        why.append(f"update {last.version} records no commit, so which program and pack it ran cannot be told")
        return Decision(stack, True, "; ".join(why), before_head)
    if last.dirty and rolled_back_to(last) is None:
        why.append(f"update {last.version} ran from a checkout of {commit[:12]} with uncommitted changes")
    if not git.is_ancestor(commit, head):
        why.append(f"update {last.version} ran commit {commit[:12]}, which is not on main's history")
        return Decision(stack, True, "; ".join(why), before_head, commit)
    commits = git.first_parent_history(commit, head)
    changed = _changed(stack, deployed, commits)
    if changed:
        why.append(f"changed since update {last.version} ran {commit[:12]}: "
                   + _few([f"{path} (in {sha})" for path, sha in changed.items()]))
    if not why:
        return Decision(stack, False, f"in step with main: update {last.version} ran {commit[:12]} and nothing it "
                        "runs has changed since", deployed_commit=commit, state=IN_STEP)
    # The pack judges everything since what the stack really runs: its last succeeded update (a failed one,
    # refused by the gate perhaps, deployed nothing the pack may now let through with a newer pack).
    good = next((u for u in updates if u.good), None)
    if good is None:  # no update ever succeeded: it runs nothing yet, like a stack never deployed
        return _first_up(stack, "; ".join(why), head, git)
    if good.commit is None or not git.is_ancestor(good.commit, head):
        return Decision(stack, True, "; ".join(why), before_head, commit)
    since_good = commits if good.commit == commit else git.first_parent_history(good.commit, head)
    return Decision(stack, True, "; ".join(why), pack_base(stack, since_good, head), commit)


def within_window(decision: Decision, now: datetime) -> Decision:
    """A stack to deploy outside its maintenance window (``rollout.maintenanceWindow``) is left alone, with when the
    window opens: the scheduled run of the deploy workflow then deploys it (nothing is lost, it still differs)."""
    window = decision.stack.window
    if not decision.deploy or window is None or window.is_open(now):
        return decision
    return replace(decision, deploy=False, pack_ref=None, state=OUTSIDE_WINDOW,
                   reason=f"{decision.reason}; but it is {window.verdict(now)}: deployed by the first run inside it")


def plan(stacks: Sequence[StackFile], deployed: Mapping[str, Deployed], head: str, git: Git,
         now: datetime | None = None) -> DeployPlan:
    """Every stack's decision, canary stages first; ``now`` (default: the clock) is judged against each stack's
    maintenance window."""
    moment = now if now is not None else utc_now()
    ordered = sorted(stacks, key=stage_order)
    return DeployPlan(head, tuple(within_window(decide(s, deployed.get(s.name, Deployed(None)), head, git), moment)
                                  for s in ordered))
