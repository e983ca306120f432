"""The control center at scale, side by side with a small cluster in the same run.

    python bench/controlcenter_bench.py [--topics 1000 --partitions 10 --groups 1000]

On a built-in broker of its own, each scale gets its topics (all with messages) and its
consumer groups (committed offsets on one topic each, without members, a quarter of them
at the log start: lagging), then the bench measures, printing each figure as it comes:
- the collector's cycle time: the first cycle (writes every row) and steady cycles, each
  after "traffic" (a tenth of the topics get a message per partition and the groups on them
  that keep up commit it), against the 5 s interval;
- page render times through `PAGES` (the hook: pages add their URL there), read from the
  tables the collector just wrote;
- websocket fan-out: one update published by another process to 50 connected sockets,
  through the embedded hub layer and through channels-redis (when Redis answers at
  REDIS_URL).
The read model goes to SQLite in a temporary directory, or to DATABASE_URL. Ratios
large/small make the figures comparable across machines.
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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MILLRACE_DATA_DIR", tempfile.mkdtemp(prefix="ccbench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")

import django  # noqa: E402

django.setup()

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

# The hook for page render times: (name, URL path) rendered through Django's test client,
# against the read model the collector just wrote. The pages engineers add theirs here.
# "{topic}" stands for the scale's first topic, "{group}" for the group with the most
# partitions in the read model.
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
PAGE_RUNS = 7  # one request is noisy on a shared machine; the median of seven is not
MESSAGES_PER_PARTITION = 5
LAGGING_EVERY = 4  # every 4th group stays at the log start


@dataclass
class Scale:
    label: str
    topics: int
    partitions: int
    groups: int
    prefix: str = ""

    def __post_init__(self) -> None:
        self.prefix = f"{self.label[0]}{uuid.uuid4().hex[:4]}"

    def topic(self, i: int) -> str:
        return f"{self.prefix}-t{i:04d}"

    def group(self, g: int) -> str:
        return f"{self.prefix}-g{g:04d}"


class Figures:
    """Results by name and scale, printed as they come, large next to small."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, float]] = {}

    def add(self, name: str, label: str, seconds: float) -> None:
        row = self.values.setdefault(name, {})
        row[label] = seconds
        line = f"  {label:6} {name:28} {seconds:9.3f} s"
        if label == "large" and "small" in row:
            line += f"   ({seconds / row['small']:.1f}x small)"
        print(line, flush=True)

    def table(self) -> None:
        print(f"\n{'':30}{'small':>10}{'large':>10}{'ratio':>8}   (seconds; interval 5 s)")
        for name, row in self.values.items():
            small, large = row.get("small"), row.get("large")
            if small is None or large is None:
                continue
            print(f"{name:30}{small:10.3f}{large:10.3f}{large / small:8.1f}")


def create_scale(bootstrap: str, scale: Scale) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [scale.topic(i) for i in range(scale.topics)]
    for i in range(0, len(names), 100):
        futures = admin.create_topics(
            [NewTopic(n, scale.partitions, 1) for n in names[i:i + 100]], operation_timeout=120)
        for future in futures.values():
            future.result(180)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "message.timeout.ms": 0})  # never give up on one
    for name in names:
        for p in range(scale.partitions):
            for _ in range(MESSAGES_PER_PARTITION):
                producer.produce(name, b"x" * 100, partition=p)
        producer.poll(0)
    drain(producer)
    commit(admin, scale, range(scale.groups), lambda g: 0 if g % LAGGING_EVERY == 0
           else MESSAGES_PER_PARTITION)


def drain(producer: confluent_kafka.Producer, within: float = 900.0) -> None:
    """Every message delivered: on two cores shared with other runs (load average 15 and
    more) 100,000 messages have taken longer than one flush's two minutes."""
    deadline = time.monotonic() + within
    while producer.flush(30) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(producer)} messages undelivered after {within:.0f} s")


def commit(admin: AdminClient, scale: Scale, groups: range | list[int],
           offset_of: object) -> None:
    """Commits for groups without members (kafka-consumer-groups --reset-offsets does the
    same), all requests in flight at once."""
    assert callable(offset_of)
    futures = []
    for g in groups:
        topic = scale.topic(g % scale.topics)
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            scale.group(g), [confluent_kafka.TopicPartition(topic, p, offset_of(g))
                             for p in range(scale.partitions)])
        futures += admin.alter_consumer_group_offsets([request]).values()
    for future in futures:
        future.result(120)


def traffic(bootstrap: str, scale: Scale, round_: int) -> None:
    """A tenth of the topics get one message per partition; the groups on them that keep
    up commit it, the lagging ones do not."""
    busy = max(1, scale.topics // 10)
    first = (round_ * busy) % scale.topics
    topics = {(first + i) % scale.topics for i in range(busy)}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "message.timeout.ms": 0})
    for t in topics:
        for p in range(scale.partitions):
            producer.produce(scale.topic(t), b"y" * 100, partition=p)
    drain(producer)
    keeping_up = [g for g in range(scale.groups)
                  if g % scale.topics in topics and g % LAGGING_EVERY != 0]
    commit(AdminClient({"bootstrap.servers": bootstrap}), scale, keeping_up,
           lambda g: MESSAGES_PER_PARTITION + 1 + round_ // (scale.topics // busy))


def measure_cycles(bootstrap: str, scale: Scale, cycles: int, figures: Figures) -> None:
    from controlcenter.collector.loop import Collector, CollectorConfig

    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=5.0,
                                              history_topics=True))
        try:
            figures.add("first cycle", scale.label, collector.cycle())
            steady = []
            for i in range(cycles):
                traffic(bootstrap, scale, i)
                steady.append(collector.cycle())
            figures.add(f"steady cycle (median of {cycles})", scale.label,
                        statistics.median(steady))
            figures.add("steady cycle (max)", scale.label, max(steady))
        finally:
            collector.close()


def biggest_group() -> str:
    from controlcenter.models import GroupState

    found = GroupState.objects.order_by("-partitions", "group_id").values_list(
        "group_id", flat=True).first()
    return found or ""


def measure_pages(bootstrap: str, scale: Scale, figures: Figures) -> None:
    client = Client()
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        group = quote(biggest_group(), safe="")
        for name, path in PAGES:
            url = path.format(topic=scale.topic(0), group=group)
            client.get(url)  # templates compiled, connections open
            times = []
            for _ in range(PAGE_RUNS):
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, (name, response.status_code)
            figures.add(f"page {name} (median of {PAGE_RUNS})", scale.label,
                        statistics.median(times))


async def fan_out(layers: dict[str, object], sockets: int, rounds: int) -> list[float]:
    """Seconds from one publish (in another process) until every socket has the message."""
    from channels.testing import WebsocketCommunicator

    from millrace.asgi import application

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


def measure_fan_out(sockets: int, rounds: int) -> None:
    layers: dict[str, dict[str, object]] = {
        "hub": {"default": {"BACKEND": "millrace.channelhub.HubChannelLayer",
                            "CONFIG": {"data_dir": os.environ["MILLRACE_DATA_DIR"],
                                       "name": "bench"}}}}
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_answers(redis_url):
        layers["redis"] = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                       "CONFIG": {"hosts": [redis_url],
                                                  "prefix": f"bench{uuid.uuid4().hex[:6]}"}}}
    else:
        print(f"  (no Redis at {redis_url}: the hub layer only)")
    print(f"\nfan-out of one update from another process to {sockets} sockets "
          f"(ms over {rounds} updates)", flush=True)
    medians = {}
    for name, config in layers.items():
        times = sorted(asyncio.run(fan_out(config, sockets, rounds)))
        medians[name] = statistics.median(times)
        p90 = times[int(len(times) * 0.9) - 1]
        print(f"  {name:6} median {medians[name] * 1000:7.2f}  p90 {p90 * 1000:7.2f}  "
              f"max {times[-1] * 1000:7.2f}", flush=True)
    if "redis" in medians:
        print(f"  hub/redis median ratio: {medians['hub'] / medians['redis']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--sockets", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    print(f"read model on {django.db.connection.vendor}", flush=True)
    data = Path(tempfile.mkdtemp(prefix="ccbench-broker-"))
    figures = Figures()
    for scale in (Scale("small", 10, args.partitions, 10),
                  Scale("large", args.topics, args.partitions, args.groups)):
        broker = BrokerProcess(data / scale.label, {"num.partitions": str(scale.partitions)})
        broker.start()
        try:
            started = time.perf_counter()
            create_scale(broker.bootstrap, scale)
            print(f"{scale.label}: {scale.topics} topics x {scale.partitions} partitions, "
                  f"{scale.groups} groups set up in {time.perf_counter() - started:.0f} s",
                  flush=True)
            measure_cycles(broker.bootstrap, scale, args.cycles, figures)
            measure_pages(broker.bootstrap, scale, figures)
        finally:
            broker.stop()
    figures.table()
    measure_fan_out(args.sockets, args.rounds)


if __name__ == "__main__":
    main()
