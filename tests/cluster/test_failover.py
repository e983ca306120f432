"""The cluster under faults, with real clients: RF=3, min.insync.replicas=2, acks=all.

Each test records a full history (three idempotent producers and a consumer group) and
hands it to the checker. Sessions and lag limits are short (`FAST_FAILOVER`) so each fault
is noticed in seconds; nothing here asserts a timing, the waits only bound a hang.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest

from brokercluster.control import ALIVE, BrokerState
from tests.brokerproc import ClusterProcess
from tests.cluster.checker import check
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.workload import Workload, create_topic
from tests.compat.clients import new_topic

PARTITIONS = 3


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path_factory.mktemp("cluster"), brokers=3,
                        overrides=FAST_FAILOVER) as c:
        yield c


@pytest.fixture
def cluster(module_cluster: ClusterProcess) -> ClusterProcess:
    """The module's cluster with its three brokers running and in the cluster's view.

    One cluster for the module, not one per test: each test works on topics of its own and
    leaves every broker it killed or paused running again, and a start was 2-4 s of each
    test's setup (more under load). A test that failed half-way may have left a broker down
    or paused: it is brought back here first, so the next test starts from three."""
    for broker in module_cluster.status()["brokers"]:
        if broker["state"] == BrokerState.PAUSED:
            module_cluster.resume(broker["id"])
        elif broker["state"] not in ALIVE:
            module_cluster.start(broker["id"])
    view = ClusterView(module_cluster.bootstrap)
    wait_until("all three brokers in the cluster's view",
               lambda: view.live_brokers() == {1, 2, 3})
    return module_cluster


def replicated_topic(cluster: ClusterProcess, partitions: int = PARTITIONS) -> str:
    topic = new_topic("faults")
    create_topic(cluster.bootstrap, topic, partitions, 3, TOPIC_CONFIGS)
    ClusterView(cluster.bootstrap).fully_replicated(topic)
    return topic


def finish_clean(workload: Workload) -> None:
    """Finish the workload: no client crashed or hung, and the checker finds nothing."""
    history = workload.finish()
    assert not workload.errors, workload.errors
    report = check(history)
    assert report.valid, f"{history.summary()}\n{report}"


def active_controller(cluster: ClusterProcess) -> int | None:
    found: int | None = cluster.status()["active_controller"]
    return found


def report_figure(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n    {line}")


def test_a_healthy_cluster_leaves_a_clean_history(cluster: ClusterProcess) -> None:
    topic = replicated_topic(cluster)
    workload = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    workload.wait_for_acks(300)
    finish_clean(workload)


@pytest.mark.slow
def test_killing_a_leader_loses_nothing_and_the_restarted_broker_takes_it_back(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    topic = replicated_topic(cluster)
    view = ClusterView(cluster.bootstrap)
    workload = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    workload.wait_for_acks(200)

    victim = view.partition(topic, 0).leader
    led = {p for p, v in view.partitions(topic).items() if v.leader == victim}
    killed_at = time.monotonic()
    cluster.kill(victim)
    new_leader = view.new_leader(topic, 0, victim)
    # Acks on the other partitions (and a backlog released at once) can outrun the first
    # ack on the victim's partitions, so wait for that one itself.
    failover = wait_until("a write sent after the kill is acked on a partition it led",
                          lambda: workload.history.first_ack_after(killed_at, led))
    workload.wait_for_acks(300)  # producers and the group carry on
    report_figure(capsys, f"kill -9 of broker {victim} -> first acked produce on the new "
                          f"leader {new_leader}: {failover * 1000:.0f} ms")

    cluster.start(victim)
    view.fully_replicated(topic)  # it truncated if it had to, caught up and rejoined
    view.preferred_leaders(topic)  # and leadership came back
    workload.wait_for_acks(200)
    finish_clean(workload)


@pytest.mark.slow
def test_a_paused_broker_is_fenced_rejoins_and_losing_the_controller_is_survived(
    cluster: ClusterProcess,
) -> None:
    topic = replicated_topic(cluster)
    view = ClusterView(cluster.bootstrap)
    workload = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    workload.wait_for_acks(200)

    paused = view.partition(topic, 1).leader
    cluster.pause(paused)
    view.new_leader(topic, 1, paused)  # its session lapsed: fenced, leadership moved
    wait_until(f"broker {paused} left every ISR",
               lambda: all(paused not in v.isr for v in view.partitions(topic).values()))
    workload.wait_for_acks(200)
    cluster.resume(paused)
    view.fully_replicated(topic)
    workload.wait_for_acks(100)

    # The supervisor's status names the active controller (from each broker's metrics).
    controller = wait_until("a controller is active", lambda: active_controller(cluster))
    cluster.kill(controller)
    wait_until("another broker is the active controller",
               lambda: active_controller(cluster) not in (controller, None))
    workload.wait_for_acks(200)
    cluster.start(controller)
    view.fully_replicated(topic)
    finish_clean(workload)


@pytest.mark.slow
def test_with_two_of_three_down_acks_all_writes_are_refused_not_lost(
    cluster: ClusterProcess,
) -> None:
    """Every broker is also a controller voter, so killing two loses the quorum as well: the
    ISR cannot shrink and the leader cannot commit. Once the leader's own lag check finds
    both followers out of sync, acks=all writes are refused with NOT_ENOUGH_REPLICAS (not
    left to time out); writes in flight until then may end with REQUEST_TIMED_OUT or
    NOT_ENOUGH_REPLICAS_AFTER_APPEND. No write is acknowledged until a second broker is
    back, and none is lost."""
    topic = replicated_topic(cluster, partitions=1)
    view = ClusterView(cluster.bootstrap)
    workload = Workload(cluster.bootstrap, topic, 1, producers=("confluent",),
                        consumers=()).start()
    workload.wait_for_acks(50)
    leader = view.partition(topic, 0).leader
    followers = [b for b in (1, 2, 3) if b != leader]
    for broker in followers:
        cluster.kill(broker)

    probe = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_of(leader), acks="all",
                                retries=0, enable_idempotence=False, max_block_ms=10_000,
                                request_timeout_ms=3_000)
    history = workload.history
    attempts = iter(range(1_000_000))
    refusals: list[str] = []

    def refused() -> bool:
        value = f"probe-{next(attempts)}"
        history.invoke("probe", value)
        try:
            meta = probe.send(topic, value=value.encode(), partition=0).get(15)
        except kafka.errors.NotEnoughReplicasError as exc:
            history.fail(value, repr(exc))  # checked before appending: never written
            refusals.append(type(exc).__name__)
            return True
        except (kafka.errors.RequestTimedOutError,
                kafka.errors.NotEnoughReplicasAfterAppendError) as exc:
            history.info(value, repr(exc))  # appended, maybe: it may surface later
            refusals.append(type(exc).__name__)
            return False  # before the lag check noticed; the refusal is still to come
        except kafka.errors.KafkaError as exc:
            history.info(value, repr(exc))
            return False
        history.ok(value, meta.partition, meta.offset)
        return False

    wait_until("an acks=all write to the last broker is refused", refused, 60, 0.5)
    assert refused(), "a write after the first NOT_ENOUGH_REPLICAS is refused the same way"
    stalled = len(history.acked())
    time.sleep(1)  # a window for a wrongly accepted write to show up, not a timing
    assert len(history.acked()) == stalled, "acks=all writes succeeded with one replica"
    assert not any(w.process == "probe" for w in history.acked()), refusals

    cluster.start(followers[0])
    workload.wait_for_acks(50)  # the idempotent producer's retries went through
    value = "probe-after"
    history.invoke("probe", value)
    meta = probe.send(topic, value=value.encode(), partition=0).get(60)
    history.ok(value, meta.partition, meta.offset)
    probe.close(5)
    cluster.start(followers[1])
    finish_clean(workload)


@pytest.mark.slow
def test_a_group_keeps_its_committed_offsets_when_its_coordinator_dies(
    cluster: ClusterProcess,
) -> None:
    topic = replicated_topic(cluster)
    view = ClusterView(cluster.bootstrap)
    workload = Workload(cluster.bootstrap, topic, PARTITIONS).start()
    workload.wait_for_acks(200)
    wait_until("the group has read something", lambda: workload.history.reads)

    # A second group commits known offsets and then its coordinator is killed at once:
    # an acknowledged commit must already be on the other in-sync replicas.
    group = f"keeper-{topic}"
    committer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap,
                                          "group.id": group, "enable.auto.commit": False})
    wanted = [confluent_kafka.TopicPartition(topic, p, 10 + p) for p in range(PARTITIONS)]
    committer.commit(offsets=wanted, asynchronous=False)
    coordinator = view.group_coordinator(group)
    cluster.kill(coordinator)
    committed = wait_until(
        "the committed offsets are readable from the new coordinator",
        lambda: [tp.offset for tp in committer.committed(wanted, timeout=10)])
    committer.close()
    assert committed == [10 + p for p in range(PARTITIONS)]

    workload_coordinator = view.group_coordinator(workload.group)
    if workload_coordinator != coordinator:
        cluster.start(coordinator)
        cluster.kill(workload_coordinator)
        coordinator = workload_coordinator
    workload.wait_for_acks(300)  # the workload's group carries on under a new coordinator
    cluster.start(coordinator)
    # The drained group read every acked write: it carried on under its new coordinator.
    finish_clean(workload)
