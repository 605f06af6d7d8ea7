"""Small fleets written out by hand for the simulator's tests, and a hypothesis strategy for random ones."""

from __future__ import annotations

from hypothesis import strategies as st

from simulate.fleet import CLUSTER_POLICY, NVIDIA_DRIVER, Fleet, Group, Model, Node, Pod, Policy, Pool
from fleetspec.simulation import Simulation

EXACT = Simulation(driverInstallSeconds=300, validatorSeconds=100, podTerminationSeconds=10, cachedLoadSeconds=100,
                   jitter=0.0)


def one_pool(nodes: int, gpus: int, models: list[Model], policy: Policy, durations: Simulation = EXACT,
             validation_job: bool = False, placed_on: tuple[str, ...] = ()) -> Fleet:
    """One pool of ``nodes`` nodes ``a-0``, ``a-1``, ...: the simulator's scheduler places the models' replicas,
    or, with ``placed_on``, the single model's replicas are already Ready on those nodes (a test that reasons
    about which node a replica starts on says so; the scheduler breaks ties by the seed)."""
    pool = Pool("a", 0, gpus, validation_job)
    pods = tuple(Pod(node, models[0].gpus_per_replica, 0) for node in placed_on)
    return Fleet((pool,), tuple(Node(f"a-{i}", "a", gpus) for i in range(nodes)), tuple(models),
                 (Group(CLUSTER_POLICY, "cluster-policy", ("a",), policy),), durations, pods=pods,
                 place_replicas=not placed_on)


def model(name: str, replicas: int, minimum: int, gpus: int = 1, pools: tuple[str, ...] = ("a",), load: int = 100,
          pdb: bool = True) -> Model:
    return Model(f"ns/{name}", replicas, gpus, minimum, pools, load, (minimum, None) if pdb else None,
                 f"ns/{name}-pdb" if pdb else "")


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    """One to three pools of a few nodes, each in its wave with its own NVIDIADriver policy, and a few models on
    them (each fitting a node), with durations and timeouts drawn from plausible ranges."""
    pool_count = draw(st.integers(1, 3))
    pools, nodes, groups, models = [], [], [], []
    for k in range(pool_count):
        name = f"p{k}"
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        count = draw(st.integers(1, 6))
        pools.append(Pool(name, draw(st.integers(0, 2)), gpus, draw(st.booleans())))
        nodes += [Node(f"{name}-{i}", name, gpus) for i in range(count)]
        policy = Policy(max_parallel=draw(st.integers(0, count)), max_unavailable=draw(st.sampled_from(["25%", "100%", 1, 2])),
                        deletion_timeout=draw(st.sampled_from([0, 300, 900, 1800])))
        groups.append(Group(NVIDIA_DRIVER, f"gpu-{name}", (name,), policy))
        for j in range(draw(st.integers(0, 2))):
            replicas = draw(st.integers(1, 4))
            minimum = draw(st.integers(1, replicas))
            gpr = draw(st.sampled_from([g for g in (1, 2, 4, 8) if g <= gpus]))
            models.append(model(f"{name}-m{j}", replicas, minimum, gpr, (name,), draw(st.sampled_from([60, 300, 1500])),
                                pdb=draw(st.booleans())))
    durations = Simulation(driverInstallSeconds=draw(st.integers(60, 600)), validatorSeconds=draw(st.integers(30, 300)),
                           podTerminationSeconds=draw(st.integers(0, 60)), jitter=draw(st.sampled_from([0.0, 0.1, 0.3])),
                           waveGapSeconds=draw(st.sampled_from([0, 600])))
    return Fleet(tuple(pools), tuple(nodes), tuple(models), tuple(groups), durations, place_replicas=True)
