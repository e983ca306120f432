"""The control center at scale, side by side with a small cluster in the same run.

    python bench/controlcenter_bench.py [--topics 1000 --partitions 10 --groups 1000]

On one built-in broker it creates a small cluster (10 topics, 10 groups) and a large one
(1,000 topics x 10 partitions, 1,000 groups each with commits on one topic's partitions),
then measures:
- the collector's cycle time (first cycle, which writes every row, and steady cycles, which
  write what changed), against the 5 s interval;
- websocket fan-out: one update published by another process to 50 connected sockets, with
  the embedded hub layer and with channels-redis (when Redis answers at REDIS_URL);
- page render times through `PAGES` (the pages engineers add their URLs: the hook below).
It prints ratios large/small, so the figures are comparable on any machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MILLRACE_DATA_DIR", tempfile.mkdtemp(prefix="ccbench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlcenter.settings")

import django  # noqa: E402

django.setup()

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

# The hook for page render times: (name, URL path) rendered through Django's test client,
# against the read model the collector just wrote. The pages engineers add theirs here.
# "{topic}" stands for one topic of the run (its partitions: --partitions), "{group}" for the
# group with the most partitions in the read model.
PAGES: list[tuple[str, str]] = [
    ("overview", "/"),
    ("topic list", "/topics/"),
    ("topic list, search", "/topics/?q=t09&sort=-partitions"),
    ("one topic", "/topics/{topic}/"),
    ("brokers", "/brokers/"),
    ("group list", "/groups/"),
    ("group list, by lag", "/groups/?sort=-lag&page=3"),
    ("one group", "/groups/{group}/"),
]


def create_topics(admin: AdminClient, names: list[str], partitions: int) -> None:
    """Create `names`, retrying those the broker refused for want of a registered broker:
    its port opens before it registers, and on a loaded machine a burst of creations can
    delay its heartbeats past the session timeout, so it is briefly fenced."""
    pending, deadline = list(names), time.monotonic() + 300
    while pending:
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in pending],
                                      operation_timeout=60)
        refused = []
        for name, future in futures.items():
            try:
                future.result(120)
            except confluent_kafka.KafkaException as exc:
                code = exc.args[0].code()
                if code == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code != confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR:
                    raise
                refused.append(name)
        assert time.monotonic() < deadline or not refused, f"{len(refused)} never created"
        if refused:
            time.sleep(1.0)
        pending = refused


def create_scale(bootstrap: str, prefix: str, topics: int, partitions: int, groups: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{prefix}-t{i:04d}" for i in range(topics)]
    for i in range(0, len(names), 50):
        create_topics(admin, names[i:i + 50], partitions)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for name in names:
        for p in range(partitions):
            producer.produce(name, b"x" * 100, partition=p)
    producer.flush(120)
    for g in range(groups):  # commits without consumers: Empty groups with lag
        topic = names[g % len(names)]
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            f"{prefix}-g{g:04d}",
            [confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        admin.alter_consumer_group_offsets([request])[f"{prefix}-g{g:04d}"].result(60)


def cycle_times(bootstrap: str, cycles: int) -> tuple[float, list[float]]:
    from controlcenter.management.collector.loop import Collector, CollectorConfig

    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=5.0,
                                              history_topics=True))
        try:
            first = collector.cycle()
            steady = [collector.cycle() for _ in range(cycles)]
        finally:
            collector.close()
    return first, steady


PAGE_RUNS = 7  # one request is noisy on a shared machine; the median of seven is not


def biggest_group() -> str:
    from controlcenter.models import GroupState

    found = GroupState.objects.order_by("-partitions", "group_id").values_list(
        "group_id", flat=True).first()
    return found or ""


def page_times(bootstrap: str, topic: str) -> dict[str, float]:
    client = Client()
    found = {}
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        group = quote(biggest_group(), safe="")
        for name, path in PAGES:
            url = path.format(topic=topic, group=group)
            client.get(url)  # warm: templates compiled, connections open
            times = []
            for _ in range(PAGE_RUNS):
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, (name, response.status_code)
            found[name] = statistics.median(times)
    return found


async def fan_out(layers: dict[str, object], sockets: int, rounds: int) -> list[float]:
    """Seconds from one publish (in another process) until every socket has the message."""
    from channels.testing import WebsocketCommunicator

    from controlcenter.asgi import application

    with override_settings(CHANNEL_LAYERS=layers):
        pages = []
        for _ in range(sockets):
            page = WebsocketCommunicator(application, "/ws/live/?topics=overview",
                                         headers=[(b"origin", b"http://127.0.0.1"),
                                                  (b"host", b"127.0.0.1")])
            assert (await page.connect(timeout=30))[0]
            pages.append(page)
        publisher = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PUBLISHER, repr(layers), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, cwd=str(REPO))
        assert publisher.stdin is not None and publisher.stdout is not None
        await publisher.stdout.readline()  # connected
        times = []
        for i in range(rounds):
            started = time.perf_counter()
            publisher.stdin.write(f"{i}\n".encode())
            await publisher.stdin.drain()
            await asyncio.gather(*(p.receive_from(timeout=30) for p in pages))
            times.append(time.perf_counter() - started)
        publisher.stdin.close()
        await publisher.wait()
        for page in pages:
            await page.disconnect()
    return times


PUBLISHER = """
import ast, sys, django
django.setup()
from django.conf import settings
settings.CHANNEL_LAYERS = ast.literal_eval(sys.argv[1])
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from controlcenter import events
layer = get_channel_layer()
async_to_sync(layer.group_send)("nobody", {"type": "x"})
print("ready", flush=True)
html = "<table>" + "<tr><td>broker</td><td>up</td></tr>" * 50 + "</table>"
for line in sys.stdin:
    events.publish("overview", events.fragment_message("brokers", html))
"""


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.exceptions.RedisError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--sockets", type=int, default=50)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    data = Path(tempfile.mkdtemp(prefix="ccbench-broker-"))
    results: dict[str, dict[str, float]] = {}
    for label, topics, partitions, groups in (
            ("small", 10, args.partitions, 10),
            ("large", args.topics, args.partitions, args.groups)):
        # A long broker session: on a loaded 2-core machine, creating thousands of partitions
        # can delay the broker's own heartbeats past Kafka's 9 s default; each fencing moves
        # every leader, which delays the next heartbeat, and creation never ends.
        broker = BrokerProcess(data / label, {"num.partitions": str(partitions),
                                              "broker.session.timeout.ms": "60000"}).start()
        try:
            started = time.perf_counter()
            prefix = f"b{uuid.uuid4().hex[:4]}"
            create_scale(broker.bootstrap, prefix, topics, partitions, groups)
            print(f"{label}: {topics} topics x {partitions} partitions, {groups} groups "
                  f"created in {time.perf_counter() - started:.1f}s", flush=True)
            first, steady = cycle_times(broker.bootstrap, args.cycles)
            results[label] = {"first cycle": first, "steady cycle": statistics.median(steady)}
            for page, seconds in page_times(broker.bootstrap, f"{prefix}-t0000").items():
                results[label][f"page {page}"] = seconds
        finally:
            broker.stop()
    print(f"\n{'':24}{'small':>10}{'large':>10}{'ratio':>8}   (seconds; interval 5 s)")
    for key in results["small"]:
        small, large = results["small"][key], results["large"][key]
        print(f"{key:24}{small:10.3f}{large:10.3f}{large / small:8.1f}")
    layers: dict[str, dict[str, object]] = {
        "hub": {"default": {"BACKEND": "controlcenter.channelhub.HubChannelLayer",
                            "CONFIG": {"data_dir": os.environ["MILLRACE_DATA_DIR"],
                                       "name": "bench"}}}}
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_answers(redis_url):
        layers["redis"] = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                       "CONFIG": {"hosts": [redis_url],
                                                  "prefix": f"bench{uuid.uuid4().hex[:6]}"}}}
    print(f"\nfan-out of one update from another process to {args.sockets} sockets "
          "(ms: median, max of 20)")
    medians = {}
    for name, config in layers.items():
        times = asyncio.run(fan_out(config, args.sockets, 20))
        medians[name] = statistics.median(times)
        print(f"  {name:6} {medians[name] * 1000:8.2f} {max(times) * 1000:8.2f}")
    if "redis" in medians:
        print(f"  hub/redis median ratio: {medians['hub'] / medians['redis']:.2f}")


if __name__ == "__main__":
    main()
