"""SIGTERM stops a broker cleanly whatever the quorum does: the last broker standing, and
all three at once, many times. A clean stop exits 0 before the supervisor's SIGKILL, and a
broker on its way out never stands for election (it would keep itself, or the quorum,
waiting)."""

from __future__ import annotations

from pathlib import Path

from tests.brokerproc import ClusterProcess

NODES = (1, 2, 3)
ROUNDS = 3


def shutdown_log(cluster: ClusterProcess, node: int) -> str:
    """What broker `node` logged since its last SIGTERM."""
    text = cluster.broker_log(node)
    marker = f"node {node}: shutting down"
    assert marker in text, text[-3000:]
    return text[text.rindex(marker):]


def assert_stopped_cleanly(cluster: ClusterProcess, node: int) -> None:
    tail = shutdown_log(cluster, node)
    assert f"node {node}: stopped" in tail, tail
    assert "standing for election" not in tail, tail
    assert "did not stop" not in cluster.log(), cluster.log()


def test_the_last_broker_standing_and_all_three_at_once_stop_cleanly(tmp_path: Path) -> None:
    cluster = ClusterProcess(tmp_path, brokers=3)
    for round_ in range(ROUNDS):
        cluster.open()
        last = cluster.status()["active_controller"] if round_ % 2 == 0 else None
        last = last or next(n for n in NODES if n != cluster.status()["active_controller"])
        for node in (n for n in NODES if n != last):
            # Even rounds: the others crash and the controller is left; odd: they stop.
            if round_ % 2 == 0:
                cluster.kill(node)
            else:
                assert cluster.stop(node)["exit_code"] == 0
        stopped = cluster.stop(last)
        assert (stopped["state"], stopped["exit_code"]) == ("stopped", 0), cluster.log()
        assert_stopped_cleanly(cluster, last)
        assert cluster.close() == 0

        cluster.open()
        assert cluster.close() == 0  # SIGTERM to the supervisor: all three at once
        for node in NODES:
            assert_stopped_cleanly(cluster, node)
