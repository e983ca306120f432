"""Random fault schedules: crashes, restarts, partitions, message loss and snapshots (which
drop log heads, so lagging voters must fetch them), many seeds.

Safety is checked after every event (see `harness.Cluster`); after the faults stop, the
quorum must elect a leader and commit again on every node.
"""

from __future__ import annotations

import random

import pytest

from .harness import Cluster


def _random_fault(cluster: Cluster, rng: random.Random) -> None:
    live = list(cluster.nodes)
    down = [i for i in cluster.ids if i not in cluster.nodes]
    roll = rng.random()
    if roll < 0.15 and live:
        cluster.crash(rng.choice(live))
    elif roll < 0.35 and down:
        cluster.start(rng.choice(down))
    elif roll < 0.5 and len(cluster.ids) > 1:
        shuffled = cluster.ids[:]
        rng.shuffle(shuffled)
        cut = rng.randint(1, len(shuffled) - 1)
        cluster.network.partition(set(shuffled[:cut]), set(shuffled[cut:]))
    elif roll < 0.65:
        cluster.network.heal()
    elif roll < 0.75 and live:
        cluster.snapshot(rng.choice(live))
    else:
        cluster.propose(rng.randint(1, 4))


@pytest.mark.parametrize("seed", range(40))
def test_random_faults_never_break_safety_and_the_quorum_recovers(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([1, 3, 3, 5])
    cluster = Cluster(size, seed=seed, loss=rng.choice([0.0, 0.05, 0.2]))
    for _ in range(60):
        _random_fault(cluster, rng)
        cluster.run(rng.uniform(0.05, 1.5))
    cluster.network.heal()
    cluster.network.loss = 0.0
    for i in cluster.ids:
        if i not in cluster.nodes:
            cluster.start(i)
    cluster.wait_for_leader()
    proposed: list[int] = []

    def propose() -> bool:
        first = cluster.propose(1)
        if first is not None:
            proposed.append(first)
        return bool(proposed)

    assert cluster.run_until(propose, 30.0)
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, proposed[0]), 30.0)
    cluster.run(1.0)
    cluster.check_all()
    assert cluster.committed, "nothing was ever committed"
