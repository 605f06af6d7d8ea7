"""A discrete-event simulation of the GPU Operator's upgrade controller rolling a fleet (reference gpu-operator.md §3):
a virtual clock and a queue of events, no sleeping. Randomness (each duration's spread, which driver pods
crash-loop) comes only from the seed.

What one node goes through, in the controller's order:

- ``upgrade-required`` until its wave is released and an upgrade slot is free: slots as ``GetUpgradesAvailable``
  computes them (:func:`gpu_knowledge.capacity.upgrade_slots`: maxParallelUpgrades minus the nodes in progress, capped by
  maxUnavailable less the nodes cordoned or NotReady for any reason); a node cordoned before the rollout goes on
  without a slot, one with a skip label never leaves;
- ``cordon-required``: cordoned at once;
- ``wait-for-jobs-required``: with ``waitForCompletion.podSelector``, until its matching pods finish or the timeout
  (0: forever);
- ``pod-deletion-required``: every GPU pod evicted through the Eviction API, which refuses what a PDB does not
  allow (:func:`gpu_knowledge.capacity.pdb_disruptions_allowed` over the model's Ready replicas); a refused eviction is
  retried when the model gains a Ready replica. A pod no controller owns fails the step unless ``force``; the
  step fails at ``timeoutSeconds`` (0: never), then ``drain-required`` when drain is enabled, else
  ``upgrade-failed``;
- ``pod-restart-required``: the new driver pod installs (a share of nodes, from the seed, crash-loops into
  ``upgrade-failed``);
- ``validation-required``: the operator validator, failed past its 600 s;
- ``uncordon-required`` then ``upgrade-done`` (a node cordoned before stays cordoned).

An evicted replica's controller creates a new one at once; the scheduler puts it on the schedulable node of the
model's pools with the most free GPUs that fit (cordoned, NotReady and validation-held nodes take none), and it is
Ready after the model's load time. After a node's upgrade this project's validation job (when the stack has one)
takes the node's GPUs (:func:`gpu_knowledge.capacity.validation_gpus`) if no pending replica took them first.
``upgrade-failed`` is final here: the controller only leaves it once the driver pod is Ready, which no simulated
failure allows.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass

from simulate import outcome as why
from simulate.fleet import Fleet, Node
from simulate.outcome import ModelOutcome, Outcome, Span, Stall
from gpu_knowledge import capacity, labels
from fleetspec.simulation import CRASH_LOOP_SECONDS, DRIVER_RESTART_LIMIT, VALIDATION_TIMEOUT_SECONDS

# Node states, in the controller's order; the names are the state label's values.
REQUIRED, CORDON, WAIT_JOBS, POD_DELETION, DRAIN, POD_RESTART, VALIDATION, UNCORDON, DONE, FAILED = range(10)
UPGRADE_REQUIRED = labels.UPGRADE_REQUIRED
STATE_NAMES = (UPGRADE_REQUIRED, *labels.UPGRADE_IN_PROGRESS, labels.UPGRADE_DONE, labels.UPGRADE_FAILED)
STATE_OF = {name: code for code, name in enumerate(STATE_NAMES)}
IN_PROGRESS = frozenset(range(CORDON, UNCORDON + 1)) | {FAILED}

# Events.
_RELEASE, _STEP, _TIMEOUT, _POD_GONE, _POD_READY, _JOB_DONE, _HOLD_DONE = range(7)
# Pod states.
_PENDING, _RUNNING, _TERMINATING, _GONE = range(4)


class _Run:
    """One simulated rollout. Arrays indexed by node, pod and model ids, for the sake of large fleets."""

    def __init__(self, fleet: Fleet, seed: int, stop_when_unsafe: bool, stop_after: int | None) -> None:
        self.fleet = fleet
        self.durations = fleet.durations
        self.rng = random.Random(seed)
        self.stop_when_unsafe = stop_when_unsafe
        self.stop_after = stop_after
        self.done_count = 0
        self.aborted = False
        self.now = 0.0
        self.queue: list[tuple[float, int, int, int, int]] = []
        self.seq = 0

        pools = fleet.pools
        self.pool_index = {p.name: i for i, p in enumerate(pools)}
        group_of_pool = fleet.group_of_pool()
        missing = [p.name for p in pools if p.name not in group_of_pool]
        if missing:
            raise ValueError(f"pools {', '.join(missing)} belong to no upgrade policy")
        waves = sorted({p.wave for p in pools})
        self.waves = waves
        wave_index = {w: i for i, w in enumerate(waves)}

        nodes = sorted(fleet.nodes, key=lambda n: n.name)  # the controller walks nodes in the API's (name) order
        n = len(nodes)
        self.names = [node.name for node in nodes]
        self.node_pool = [self.pool_index[node.pool] for node in nodes]
        self.node_group = [group_of_pool[node.pool] for node in nodes]
        self.node_wave = [wave_index[pools[self.node_pool[i]].wave] for i in range(n)]
        self.gpus = [node.gpus for node in nodes]
        self.free = list(self.gpus)
        self.cordoned = [node.cordoned for node in nodes]
        self.initially_cordoned = list(self.cordoned)
        self.ready = [node.ready for node in nodes]
        self.held = [False] * n  # the validation job holds its GPUs
        self.state = [DONE] * n
        self.token = [0] * n  # bumps on every state change: events of an older state are stale
        self.jobs = [node.jobs for node in nodes]
        self.skip = [node.skip for node in nodes]
        self.terminating = [0] * n
        self.blocked: dict[int, tuple[str, str, str | None, float]] = {}  # node -> open stall
        self.stalls: list[Stall] = []
        self.failed: list[int] = []
        self.validation_waits = 0
        self.deletion_since = [0.0] * n  # when each node entered pod-deletion-required
        self.longest_deletion = 0.0  # the longest pod deletion that finished (its pods gone)

        # Groups: the upgrade controller's counts, per policy.
        groups = fleet.groups
        self.policies = [g.policy for g in groups]
        self.total = [0] * len(groups)
        self.required = [0] * len(groups)
        self.in_progress = [0] * len(groups)
        self.unavailable = [0] * len(groups)
        self.admit_queue: list[deque[int]] = [deque() for _ in groups]
        self.unavailable_nodes = 0
        self.unavailable_gpus = 0
        self.peak_nodes = 0
        self.peak_gpus = 0

        # Waves and pools: what remains to be done, and when each started and finished.
        self.wave_nodes: list[list[int]] = [[] for _ in waves]
        self.wave_left = [0] * len(waves)
        self.wave_start: list[float | None] = [None] * len(waves)
        self.wave_end: list[float | None] = [None] * len(waves)
        self.pool_count = [0] * len(pools)
        self.pool_left = [0] * len(pools)
        self.pool_start: list[float | None] = [None] * len(pools)
        self.pool_end: list[float | None] = [None] * len(pools)

        # Models and pods.
        models = fleet.models
        self.models = models
        self.model_pools = [[self.pool_index[p] for p in m.pools if p in self.pool_index] for m in models]
        self.lowest = [m.replicas for m in models]
        self.below_since: list[float | None] = [None] * len(models)
        self.below_total = [0.0] * len(models)
        # Per model, the nodes whose evictions its PDB refused (a heap, lowest node first, and its members).
        self.waiters: list[list[int]] = [[] for _ in models]
        self.waiting: list[set[int]] = [set() for _ in models]

        for i in range(n):
            g = self.node_group[i]
            self.total[g] += 1
            if self.cordoned[i] or not self.ready[i]:
                self._set_unavailable(i, +1)
        placed = _placements.get(fleet, seed)
        if placed is None:
            self._place(seed)
            _placements.put(fleet, seed, _Placement.of(self))
        else:
            placed.restore(self)
        self.ready_at_start = list(self.ready_count)
        for m in range(len(models)):
            if self.ready_count[m] < models[m].minimum:
                self.below_since[m] = 0.0
            self.lowest[m] = min(self.lowest[m], self.ready_count[m])
        self._initial_states(nodes)

    # ------------------------------------------------------------ the clock

    def _at(self, delay: float, kind: int, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (self.now + delay, self.seq, kind, a, b))

    def _spread(self, seconds: float) -> float:
        jitter = self.durations.jitter
        if not jitter or not seconds:
            return float(seconds)
        return seconds * (1 + jitter * (2 * self.rng.random() - 1))

    def run(self) -> Outcome:
        if self.waves:
            self._release(0)
        queue = self.queue
        while queue and not self.aborted:
            time, _, kind, a, b = heapq.heappop(queue)
            self.now = time
            if kind == _POD_READY:
                self._pod_ready(a)
            elif kind == _POD_GONE:
                self._pod_gone(a)
            elif kind == _STEP:
                if self.token[a] == b:
                    self._step_done(a)
            elif kind == _TIMEOUT:
                if self.token[a] == b:
                    self._timeout(a)
            elif kind == _JOB_DONE:
                if self.token[a] == b:
                    self.jobs[a] = 0
                    self._enter(a, POD_DELETION)
            elif kind == _HOLD_DONE:
                self._validation_job_done(a, b)
            elif kind == _RELEASE:
                self._release(a)
        return self._outcome()

    # ------------------------------------------------------------ start

    def _place(self, seed: int) -> None:
        """The scheduler's state and the pods before the rollout: per pool, per free-GPU count, a heap of node ranks
        (stale entries skipped when popped). Among equally empty nodes kube-scheduler picks one at random
        (selectHost's reservoir sampling), so where the simulator places the replicas itself, ties go by a
        permutation drawn from the seed; in name order a model's replicas would sit on consecutive nodes, which the
        controller (also in name order) takes together. Pods found on a cluster keep their nodes, and ties there go
        by name."""
        n, pools = len(self.names), self.fleet.pools
        self.buckets: list[list[list[int]]] = [[[] for _ in range(p.gpus_per_node + 1)] for p in pools]
        self.node_at_rank: list[int] = list(range(n))
        if self.fleet.place_replicas:
            random.Random(f"placement-{seed}").shuffle(self.node_at_rank)
        self.rank: list[int] = [0] * n
        for r, i in enumerate(self.node_at_rank):
            self.rank[i] = r
        self.pending: list[dict[int, deque[int]]] = [{} for _ in pools]
        self.pods_on: list[set[int]] = [set() for _ in range(n)]
        self.ready_count: list[int] = [0] * len(self.models)
        self.pod_model: list[int] = []
        self.pod_node: list[int] = []
        self.pod_gpus: list[int] = []
        self.pod_state: list[int] = []
        self.pod_ready: list[bool] = []
        self.pod_managed: list[bool] = []
        self.unplaced_at_start = 0
        for i in range(n):
            if not self.cordoned[i] and self.ready[i]:
                self._push_free(i)
        self._place_initial_pods()

    def _place_initial_pods(self) -> None:
        fleet = self.fleet
        index = {name: i for i, name in enumerate(self.names)}
        for pod in fleet.pods:
            p = self._new_pod(-1 if pod.model is None else pod.model, pod.gpus, pod.managed)
            i = index.get(pod.node)
            if i is None:
                self.pod_state[p] = _GONE
                continue
            self._bind(p, i)
            if pod.ready:
                self.pod_ready[p] = True
                if pod.model is not None:
                    self.ready_count[pod.model] += 1
        if fleet.place_replicas:
            # Largest replicas first, as a packed cluster ends up; each on the emptiest node that fits.
            order = sorted(range(len(self.models)), key=lambda m: -self.models[m].gpus_per_replica)
            for m in order:
                model = self.models[m]
                for _ in range(model.replicas):
                    p = self._new_pod(m, model.gpus_per_replica, True)
                    i = self._best_node(m)
                    if i < 0:
                        self.unplaced_at_start += 1
                        self._enqueue_pending(p)
                        continue
                    self._bind(p, i)
                    self.pod_ready[p] = True
                    self.ready_count[m] += 1

    def _initial_states(self, nodes: list[Node]) -> None:
        for i, node in enumerate(nodes):
            w = self.node_wave[i]
            pool = self.node_pool[i]
            g = self.node_group[i]
            if not node.needs_upgrade:
                continue
            state = STATE_OF.get(node.state, REQUIRED)
            if state == DONE:
                state = REQUIRED
            self.pool_count[pool] += 1
            if state == FAILED:
                self.state[i] = FAILED
                self.in_progress[g] += 1
                self.failed.append(i)
                self.stalls.append(Stall(self.names[i], self._pool_name(i), labels.UPGRADE_FAILED, why.FAILED_BEFORE,
                                         "upgrade-failed before the rollout; the controller leaves it only once its "
                                         "driver pod is Ready", 0.0, None))
                self.wave_nodes[w].append(i)
                self.wave_left[w] += 1
                self.pool_left[pool] += 1
                continue
            self.state[i] = REQUIRED
            self.required[g] += 1
            self.wave_nodes[w].append(i)
            if state != REQUIRED:
                # Seen mid-upgrade: it goes on from the start of that step, slot or no slot.
                self.wave_left[w] += 1
                self.pool_left[pool] += 1
                self._start(i, state)

    # ------------------------------------------------------------ waves and slots

    def _release(self, w: int) -> None:
        self.wave_start[w] = self.now
        touched = set()
        for i in self.wave_nodes[w]:
            if self.state[i] != REQUIRED:
                continue
            node_stall = self._never_starts(i)
            if node_stall is not None:
                self.stalls.append(node_stall)
                continue
            self.wave_left[w] += 1
            self.pool_left[self.node_pool[i]] += 1
            g = self.node_group[i]
            if self.initially_cordoned[i]:
                self._start(i, CORDON)  # "progress with manually cordoned nodes": no slot needed
            else:
                self.admit_queue[g].append(i)
            touched.add(g)
        for g in sorted(touched):
            self._admit(g)
        self._wave_maybe_done(w)

    def _never_starts(self, i: int) -> Stall | None:
        """A skip label keeps a node in upgrade-required without taking a slot; so do autoUpgrade off and NotReady."""
        g = self.node_group[i]
        if self.skip[i]:
            return Stall(self.names[i], self._pool_name(i), UPGRADE_REQUIRED, why.SKIP,
                         f"{labels.SKIP_UPGRADE}=true stays on the node (paused, or held by hand)", self.now, None)
        if not self.policies[g].auto_upgrade:
            return Stall(self.names[i], self._pool_name(i), UPGRADE_REQUIRED, why.AUTO_UPGRADE_OFF,
                         f"{self.fleet.groups[g].title} has autoUpgrade: false: the controller rolls nothing",
                         self.now, None)
        if not self.ready[i]:
            return Stall(self.names[i], self._pool_name(i), UPGRADE_REQUIRED, why.NOT_READY,
                         "the node is NotReady: its driver pod cannot be replaced", self.now, None)
        return None

    def _admit(self, g: int) -> None:
        waiting = self.admit_queue[g]
        if not waiting:
            return
        policy = self.policies[g]
        slots = capacity.upgrade_slots(policy.max_parallel, policy.max_unavailable, self.total[g],
                                       upgrade_required=self.required[g], in_progress=self.in_progress[g],
                                       unavailable=self.unavailable[g])
        started = []
        while waiting and slots > 0:
            started.append(waiting.popleft())
            slots -= 1
        # One reconcile cordons every node it admits before any of them gets to pod deletion.
        for i in started:
            self._cordon(i)
        for i in started:
            self._enter(i, WAIT_JOBS)

    def _wave_maybe_done(self, w: int) -> None:
        if self.wave_left[w] == 0 and self.wave_end[w] is None and self.wave_start[w] is not None:
            self.wave_end[w] = self.now
            if w + 1 < len(self.waves):
                self._at(self.durations.waveGapSeconds, _RELEASE, w + 1)

    # ------------------------------------------------------------ one node's states

    def _start(self, i: int, state: int) -> None:
        self._cordon(i)
        self._enter(i, WAIT_JOBS if state == CORDON else state)

    def _cordon(self, i: int) -> None:
        """cordon-required: the node leaves upgrade-required and is cordoned at once."""
        g = self.node_group[i]
        self.required[g] -= 1
        self.in_progress[g] += 1
        self.state[i] = CORDON
        pool = self.node_pool[i]
        if self.pool_start[pool] is None:
            self.pool_start[pool] = self.now
        if not self.cordoned[i]:
            self._set_unavailable(i, +1)
            self.cordoned[i] = True

    def _enter(self, i: int, state: int) -> None:
        self.state[i] = state
        self.token[i] += 1
        token = self.token[i]
        policy = self.policies[self.node_group[i]]
        durations = self.durations
        if state == WAIT_JOBS:
            if not policy.wait_selector or not self.jobs[i]:
                self._enter(i, POD_DELETION)
                return
            self._open_stall(i, why.JOBS, f"{self.jobs[i]} pod(s) matching {policy.wait_selector!r} still run", None)
            self._at(self._spread(durations.jobRemainingSeconds), _JOB_DONE, i, token)
            if policy.wait_timeout:
                self._at(policy.wait_timeout, _TIMEOUT, i, token)
        elif state in (POD_DELETION, DRAIN):
            if state == POD_DELETION:
                self.deletion_since[i] = self.now
            force = policy.deletion_force if state == POD_DELETION else policy.drain_force
            timeout = policy.deletion_timeout if state == POD_DELETION else policy.drain_timeout
            if not force and any(not self.pod_managed[p] for p in self.pods_on[i]):
                self._deletion_failed(i, why.UNMANAGED, "a GPU pod no controller owns: the drain helper deletes it "
                                      f"only with {'podDeletion' if state == POD_DELETION else 'drain'}.force", None)
                return
            if timeout:
                self._at(timeout, _TIMEOUT, i, token)
            self._evict(i)
        elif state == POD_RESTART:
            if durations.driverFailureRate and self.rng.random() < durations.driverFailureRate:
                self._at(CRASH_LOOP_SECONDS, _TIMEOUT, i, token)
            else:
                self._at(self._spread(durations.driverInstallSeconds), _STEP, i, token)
        elif state == VALIDATION:
            seconds = self._spread(durations.validatorSeconds)
            if seconds > VALIDATION_TIMEOUT_SECONDS:
                self._at(VALIDATION_TIMEOUT_SECONDS, _TIMEOUT, i, token)
            else:
                self._at(seconds, _STEP, i, token)
        elif state == UNCORDON:
            self._done(i)

    def _step_done(self, i: int) -> None:
        state = self.state[i]
        if state == POD_RESTART:
            self._enter(i, VALIDATION)
        elif state == VALIDATION:
            self._enter(i, UNCORDON)

    def _timeout(self, i: int) -> None:
        state = self.state[i]
        policy = self.policies[self.node_group[i]]
        if state == WAIT_JOBS:
            self._close_stall(i)
            self._enter(i, POD_DELETION)
        elif state in (POD_DELETION, DRAIN):
            open_stall = self.blocked.get(i)
            cause, pdb = (open_stall[0], open_stall[2]) if open_stall else (why.TERMINATING, None)
            seconds = policy.deletion_timeout if state == POD_DELETION else policy.drain_timeout
            self._deletion_failed(i, cause, f"evictions not done within timeoutSeconds {seconds}", pdb)
        elif state == POD_RESTART:
            self._fail(i, why.DRIVER, f"the new driver pod restarted more than {DRIVER_RESTART_LIMIT} times", None)
        elif state == VALIDATION:
            self._fail(i, why.VALIDATION, f"the operator validator was not Ready within "
                       f"{VALIDATION_TIMEOUT_SECONDS} s", None)

    def _deletion_failed(self, i: int, cause: str, detail: str, pdb: str | None) -> None:
        policy = self.policies[self.node_group[i]]
        if self.state[i] == POD_DELETION and policy.drain_enable:
            self._close_stall(i)
            self._enter(i, DRAIN)
            return
        self._fail(i, cause, detail, pdb)

    def _fail(self, i: int, cause: str, detail: str, pdb: str | None) -> None:
        state = STATE_NAMES[self.state[i]]
        self._close_stall(i)
        self.state[i] = FAILED
        self.token[i] += 1
        self.failed.append(i)
        self.stalls.append(Stall(self.names[i], self._pool_name(i), state, cause,
                                 f"upgrade-failed: {detail}", self.now, None, pdb))
        if self.stop_when_unsafe and cause in why.PARALLELISM_CAUSES:
            self.aborted = True

    def _done(self, i: int) -> None:
        g = self.node_group[i]
        self.state[i] = DONE
        self.token[i] += 1
        self.in_progress[g] -= 1
        if not self.initially_cordoned[i]:
            self.cordoned[i] = False
            self._set_unavailable(i, -1)
        pool = self.node_pool[i]
        self.pool_left[pool] -= 1
        if self.pool_left[pool] == 0:
            self.pool_end[pool] = self.now
        w = self.node_wave[i]
        self.wave_left[w] -= 1
        self.done_count += 1
        if self.stop_after is not None and self.done_count >= self.stop_after:
            self.aborted = True
        if self._schedulable(i):
            self._push_free(i)
            self._place_pending(pool)
            if self.fleet.pools[pool].validation_job:
                self._validation_job(i)
        self._wave_maybe_done(w)
        self._admit(g)

    def _validation_job(self, i: int) -> None:
        """This project's validation job asks for every GPU of the node: it runs only if none is taken yet."""
        wanted = capacity.validation_gpus(self.gpus[i])
        if self.free[i] < wanted:
            self.validation_waits += 1
            return
        self.held[i] = True
        self.free[i] -= wanted
        self._at(self._spread(self.durations.validationJobSeconds), _HOLD_DONE, i, wanted)

    def _validation_job_done(self, i: int, gpus: int) -> None:
        """The job recorded its result and labelled the node: its pod goes, and so does its hold on the GPUs."""
        self.held[i] = False
        self.free[i] += gpus
        if self._schedulable(i):
            self._push_free(i)
            self._place_pending(self.node_pool[i])

    # ------------------------------------------------------------ evictions

    def _evict(self, i: int) -> None:
        blocking: int | None = None
        for p in sorted(self.pods_on[i]):
            m = self.pod_model[p]
            if m >= 0 and not self._may_evict(p, m):
                blocking = m
                if i not in self.waiting[m]:
                    self.waiting[m].add(i)
                    heapq.heappush(self.waiters[m], i)
                continue
            self._evicted(p, i)
        if blocking is not None:
            model = self.models[blocking]
            pdb = model.pdb_name or f"{model.name} (PDB)"
            self._open_stall(i, why.PDB, f"PDB {pdb} allows 0 disruptions ({self.ready_count[blocking]} of "
                             f"{model.replicas} replicas Ready)", pdb)
        else:
            self._close_stall(i)  # the last refused eviction went through
            if not self.pods_on[i] and not self.terminating[i]:
                self._pods_gone(i)

    def _may_evict(self, p: int, m: int) -> bool:
        """The Eviction API's answer: a PDB's allowance; an unready pod may also go while the budget is healthy."""
        model = self.models[m]
        if model.pdb is None:
            return True
        ready = self.ready_count[m]
        if model.disruptions_allowed(ready) > 0:
            return True
        kept = model.kept
        return not self.pod_ready[p] and kept > 0 and ready >= kept

    def _evicted(self, p: int, i: int) -> None:
        self.pods_on[i].discard(p)
        self.pod_state[p] = _TERMINATING
        self.terminating[i] += 1
        m = self.pod_model[p]
        if self.pod_ready[p]:
            self.pod_ready[p] = False
            if m >= 0:
                self._ready_changed(m, -1)
        self._at(self._spread(self.durations.podTerminationSeconds), _POD_GONE, p)
        if m >= 0:
            # The model's controller replaces it at once; it waits for GPUs where none are free.
            replacement = self._new_pod(m, self.pod_gpus[p], True)
            i_new = self._best_node(m)
            if i_new < 0:
                self._enqueue_pending(replacement)
            else:
                self._bind(replacement, i_new)
                self._at(self._spread(self.models[m].load_seconds), _POD_READY, replacement)

    def _pod_gone(self, p: int) -> None:
        self.pod_state[p] = _GONE
        i = self.pod_node[p]
        self.terminating[i] -= 1
        self.free[i] += self.pod_gpus[p]
        if self.state[i] in (POD_DELETION, DRAIN) and not self.pods_on[i] and not self.terminating[i]:
            self._pods_gone(i)

    def _pods_gone(self, i: int) -> None:
        self._close_stall(i)
        if self.state[i] == POD_DELETION:
            self.longest_deletion = max(self.longest_deletion, self.now - self.deletion_since[i])
            self.state[i] = DRAIN  # drain-required: no other pods are modelled, so it passes at once
        self._enter(i, POD_RESTART)

    def _pod_ready(self, p: int) -> None:
        if self.pod_state[p] != _RUNNING:
            return
        self.pod_ready[p] = True
        m = self.pod_model[p]
        self._ready_changed(m, +1)
        # The drain helpers retry refused evictions; the allowance the new replica brings goes to the first that
        # asks (here: the lowest node), and so on while the PDB allows more.
        heap, members, model = self.waiters[m], self.waiting[m], self.models[m]
        turns = len(heap)  # a node refused again goes back on the heap: each gets one turn
        while heap and turns and (model.disruptions_allowed(self.ready_count[m]) > 0
                                  or 0 < model.kept <= self.ready_count[m]):
            turns -= 1
            i = heapq.heappop(heap)
            members.discard(i)
            if self.state[i] in (POD_DELETION, DRAIN):
                self._evict(i)

    def _ready_changed(self, m: int, delta: int) -> None:
        before = self.ready_count[m]
        after = before + delta
        self.ready_count[m] = after
        minimum = self.models[m].minimum
        if after < self.lowest[m]:
            self.lowest[m] = after
        if after < minimum <= before:
            self.below_since[m] = self.now
            if self.stop_when_unsafe:
                self.aborted = True
        elif before < minimum <= after:
            since = self.below_since[m]
            if since is not None:
                self.below_total[m] += self.now - since
            self.below_since[m] = None

    # ------------------------------------------------------------ the scheduler

    def _new_pod(self, model: int, gpus: int, managed: bool) -> int:
        self.pod_model.append(model)
        self.pod_node.append(-1)
        self.pod_gpus.append(gpus)
        self.pod_ready.append(False)
        self.pod_managed.append(managed)
        self.pod_state.append(_PENDING)
        return len(self.pod_model) - 1

    def _bind(self, p: int, i: int) -> None:
        self.pod_node[p] = i
        self.pod_state[p] = _RUNNING
        self.pods_on[i].add(p)
        self.free[i] -= self.pod_gpus[p]
        if self._schedulable(i) and self.free[i] > 0:
            self._push_free(i)

    def _schedulable(self, i: int) -> bool:
        return not self.cordoned[i] and self.ready[i] and not self.held[i]

    def _push_free(self, i: int) -> None:
        free = self.free[i]
        if free > 0:
            heapq.heappush(self.buckets[self.node_pool[i]][free], self.rank[i])

    def _best_in_pool(self, pool: int, need: int) -> int:
        buckets = self.buckets[pool]
        for free in range(len(buckets) - 1, need - 1, -1):
            heap = buckets[free]
            while heap:
                i = self.node_at_rank[heap[0]]
                if self.free[i] == free and self._schedulable(i):
                    return i
                heapq.heappop(heap)
        return -1

    def _best_node(self, m: int) -> int:
        need = self.models[m].gpus_per_replica
        best, best_free = -1, -1
        for pool in self.model_pools[m]:
            i = self._best_in_pool(pool, need)
            if i >= 0 and self.free[i] > best_free:
                best, best_free = i, self.free[i]
        return best

    def _enqueue_pending(self, p: int) -> None:
        need = self.pod_gpus[p]
        for pool in self.model_pools[self.pod_model[p]]:
            self.pending[pool].setdefault(need, deque()).append(p)

    def _place_pending(self, pool: int) -> None:
        for need in sorted(self.pending[pool], reverse=True):
            waiting = self.pending[pool][need]
            while waiting:
                p = waiting[0]
                if self.pod_state[p] != _PENDING:
                    waiting.popleft()
                    continue
                i = self._best_in_pool(pool, need)
                if i < 0:
                    break
                waiting.popleft()
                self._bind(p, i)
                self._at(self._spread(self.models[self.pod_model[p]].load_seconds), _POD_READY, p)

    # ------------------------------------------------------------ bookkeeping

    def _set_unavailable(self, i: int, delta: int) -> None:
        self.unavailable[self.node_group[i]] += delta
        self.unavailable_nodes += delta
        self.unavailable_gpus += delta * self.gpus[i]
        if self.unavailable_nodes > self.peak_nodes:
            self.peak_nodes = self.unavailable_nodes
        if self.unavailable_gpus > self.peak_gpus:
            self.peak_gpus = self.unavailable_gpus

    def _pool_name(self, i: int) -> str:
        return self.fleet.pools[self.node_pool[i]].name

    def _open_stall(self, i: int, cause: str, detail: str, pdb: str | None) -> None:
        if i not in self.blocked:
            self.blocked[i] = (cause, detail, pdb, self.now)

    def _close_stall(self, i: int) -> None:
        found = self.blocked.pop(i, None)
        if found is not None:
            cause, detail, pdb, since = found
            self.stalls.append(Stall(self.names[i], self._pool_name(i), STATE_NAMES[self.state[i]], cause, detail,
                                     since, self.now, pdb))

    def _outcome(self) -> Outcome:
        end = self.now
        # A run stopped early says nothing of what came after: its open stalls end where it stopped.
        until: float | None = end if self.aborted else None
        rest = "" if self.aborted else " for the rest of the run"
        for i, (cause, detail, pdb, since) in sorted(self.blocked.items()):
            self.stalls.append(Stall(self.names[i], self._pool_name(i), STATE_NAMES[self.state[i]], cause,
                                     detail + rest, since, until, pdb))
        self.blocked.clear()
        self._never_done_stalls()
        for m, below in enumerate(self.below_since):
            if below is not None:
                self.below_total[m] += end - below
        finished = all(e is not None for e in self.wave_end) and not self.failed and not any(
            s.permanent for s in self.stalls)
        last_done = max((e for e in self.pool_end if e is not None), default=0.0)
        pools = self.fleet.pools
        # A pool or wave with a node stopped for good did not finish, whatever came after it.
        stopped = {s.pool for s in self.stalls if s.permanent}
        pool_spans = tuple(Span(p.name, self.pool_count[k], self.pool_start[k],
                                self.pool_end[k] if self.pool_left[k] == 0 and p.name not in stopped else None)
                           for k, p in enumerate(pools))
        waves = tuple(Span(f"wave {w}", len(self.wave_nodes[k]), self.wave_start[k],
                           None if any(p.wave == w and p.name in stopped for p in pools) else self.wave_end[k])
                      for k, w in enumerate(self.waves))
        models = tuple(ModelOutcome(m.name, m.replicas, m.minimum, self.lowest[k], self.below_total[k],
                                    self.ready_at_start[k])
                       for k, m in enumerate(self.models))
        stalls = tuple(sorted(self.stalls, key=lambda s: (s.since, s.node)))
        return Outcome(
            seconds=last_done if finished and not self.aborted else None,
            last_event=end, waves=waves, pools=pool_spans, models=models, stalls=stalls,
            failed=tuple(sorted(self.names[i] for i in self.failed)),
            peak_unavailable_nodes=self.peak_nodes, peak_unavailable_gpus=self.peak_gpus,
            unplaced_at_start=self.unplaced_at_start, validation_job_waits=self.validation_waits,
            aborted=self.aborted, longest_pod_deletion=self.longest_deletion,
        )

    def _never_done_stalls(self) -> None:
        """Nodes still in upgrade-required at the end: why no slot or no release came."""
        if self.aborted:
            return
        recorded = {s.node for s in self.stalls if s.permanent}
        for w, members in enumerate(self.wave_nodes):
            for i in members:
                if self.state[i] != REQUIRED or self.names[i] in recorded:
                    continue
                if self.wave_start[w] is None:
                    earlier = next(k for k in range(w) if self.wave_end[k] is None)
                    cause, detail = why.WAVE, f"wave {self.waves[earlier]} never finished, so wave {self.waves[w]} " \
                                              "was not released"
                else:
                    g = self.node_group[i]
                    policy, title = self.policies[g], self.fleet.groups[g].title
                    if policy.max_parallel and self.in_progress[g] >= policy.max_parallel:
                        detail = (f"no upgrade slot: {self.in_progress[g]} node(s) of {title} in progress or "
                                  f"upgrade-failed take maxParallelUpgrades {policy.max_parallel}")
                    else:
                        detail = (f"no upgrade slot: {self.unavailable[g]} node(s) of {title} cordoned or NotReady "
                                  f"reach maxUnavailable {policy.max_unavailable}")
                    cause = why.NO_SLOT
                self.stalls.append(Stall(self.names[i], self._pool_name(i), UPGRADE_REQUIRED, cause, detail,
                                         self.now, None))


@dataclass(frozen=True)
class _Placement:
    """Where the pods stand before the rollout: what the scheduler's placement leaves in a run's arrays. It depends
    on the nodes, pools, models, pods and seed only, not on the policies, so a search's runs of one fleet (each
    with other policies) place once and start from a copy."""

    free: list[int]
    buckets: list[list[list[int]]]
    pods_on: list[set[int]]
    pod_model: list[int]
    pod_node: list[int]
    pod_gpus: list[int]
    pod_ready: list[bool]
    pod_managed: list[bool]
    pod_state: list[int]
    ready_count: list[int]
    pending: list[dict[int, deque[int]]]
    unplaced_at_start: int
    node_at_rank: list[int]  # read only in a run: shared, not copied
    rank: list[int]

    @classmethod
    def of(cls, run: _Run) -> _Placement:
        return cls(run.free, run.buckets, run.pods_on, run.pod_model, run.pod_node, run.pod_gpus, run.pod_ready,
                   run.pod_managed, run.pod_state, run.ready_count, run.pending, run.unplaced_at_start,
                   run.node_at_rank, run.rank).copy()

    def copy(self) -> _Placement:
        return _Placement(list(self.free), [[list(heap) for heap in pool] for pool in self.buckets],
                          [set(pods) for pods in self.pods_on], list(self.pod_model), list(self.pod_node),
                          list(self.pod_gpus), list(self.pod_ready), list(self.pod_managed), list(self.pod_state),
                          list(self.ready_count),
                          [{need: deque(waiting) for need, waiting in pool.items()} for pool in self.pending],
                          self.unplaced_at_start, self.node_at_rank, self.rank)

    def restore(self, run: _Run) -> None:
        mine = self.copy()
        run.free, run.buckets, run.pods_on = mine.free, mine.buckets, mine.pods_on
        run.pod_model, run.pod_node, run.pod_gpus = mine.pod_model, mine.pod_node, mine.pod_gpus
        run.pod_ready, run.pod_managed, run.pod_state = mine.pod_ready, mine.pod_managed, mine.pod_state
        run.ready_count, run.pending, run.unplaced_at_start = mine.ready_count, mine.pending, mine.unplaced_at_start
        run.node_at_rank, run.rank = mine.node_at_rank, mine.rank


class _PlacementCache:
    """The last fleet's placement, by the identity of what it depends on (a fleet with other policies shares
    these tuples: ``Fleet.with_policies``)."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] = ()
        self._placement: _Placement | None = None

    @staticmethod
    def _of(fleet: Fleet, seed: int) -> tuple[object, ...]:
        return (fleet.nodes, fleet.pools, fleet.models, fleet.pods, fleet.place_replicas, seed)

    def get(self, fleet: Fleet, seed: int) -> _Placement | None:
        key = self._of(fleet, seed)
        same = len(key) == len(self._key) and all(a is b for a, b in zip(key[:4], self._key[:4], strict=True)) \
            and key[4:] == self._key[4:]
        return self._placement if same else None

    def put(self, fleet: Fleet, seed: int, placement: _Placement) -> None:
        self._key, self._placement = self._of(fleet, seed), placement


_placements = _PlacementCache()


def simulate(fleet: Fleet, seed: int = 0, *, stop_when_unsafe: bool = False, stop_after: int | None = None) -> Outcome:
    """Roll ``fleet`` once. A search for a safe parallelism needs to know no more than "unsafe", or "safe so far":
    ``stop_when_unsafe`` ends the run at the first model below its minimum or node failed for its parallelism's
    sake (:data:`simulate.outcome.PARALLELISM_CAUSES`), ``stop_after`` once that many nodes are done. A run that
    stopped early says so (``Outcome.aborted``) and predicts no duration."""
    run = _Run(fleet, seed, stop_when_unsafe, stop_after)
    return run.run()


__all__ = ["STATE_NAMES", "UPGRADE_REQUIRED", "simulate"]
