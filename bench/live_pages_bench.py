"""What the topic list's live rows and the shared live tail cost, side by side in one run.

    python bench/live_pages_bench.py [--topics 1000]

- Rows: the collector renders the row of each changed topic once (`events.render_rows`) for
  10 and for --topics changed topics, against rendering the topic list page itself (what
  one page view per browser, or per distinct view, would cost instead); and what a list
  page receives: every row the first time it is sent (new to the list), then only the
  rows it shows (their own groups).
- Tail: one push of 100 records by a shared tail (`livetail.Tail._deliver`) to 1 browser,
  to 50 browsers with the same filters (rendered once), and to 50 browsers with 50
  different filters (rendered 50 times).
The read model goes to SQLite in a temporary directory. Medians of several runs; compare
the ratios, not the absolute times, on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MILLRACE_DATA_DIR", tempfile.mkdtemp(prefix="livebench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusterclient.records import ConsumedRecord  # noqa: E402
from controlcenter import events, livetail  # noqa: E402
from controlcenter.messagebrowser import MessageQuery  # noqa: E402
from controlcenter.models import ClusterState, TopicState  # noqa: E402

RUNS = 7


def median_ms(work: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def seed(topics: int) -> list[str]:
    from django.conf import settings

    now = timezone.now()
    ClusterState.objects.create(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
                                collected_at=now, reachable=True)
    names = [f"topic-{i:05}" for i in range(topics)]
    TopicState.objects.bulk_create(
        TopicState(name=name, partitions=10, replication_factor=3, total_messages=i * 50,
                   size_bytes=i * 5000, messages_in_per_sec=float(i % 7), updated_at=now)
        for i, name in enumerate(names))
    return names


def bench_rows(names: list[str]) -> None:
    client = Client()
    page = median_ms(lambda: client.get("/topics/"))
    print(f"topic list page render (50 rows of {len(names)}): {page:.1f} ms")
    rows = events.rows_of("topic")
    assert rows is not None
    for count in (10, len(names)):
        changed = names[:count]
        rows.sent.clear()
        first = events.render_rows("topic", changed)  # new to the list: to its group
        took = median_ms(partial(events.render_rows, "topic", changed))  # steady: row groups
        steady = events.render_rows("topic", changed)
        shown = [text for group, text in steady if group in {f"topics.{n}" for n in names[:50]}]
        print(f"{count} changed topics, rendered once: {took:.1f} ms "
              f"({took / page:.2f} x one page render); sent first to the list's group: "
              f"{kib(first, 'topics')} KiB; then to the list's group {kib(steady, 'topics')} "
              f"KiB, to a page showing 50 rows {sum(map(len, shown)) / 1024:.0f} KiB")


def kib(messages: list[tuple[str, str]], group: str) -> str:
    return f"{sum(len(text) for g, text in messages if g == group) / 1024:.0f}"


def records(count: int) -> list[ConsumedRecord]:
    now = int(time.time() * 1000)
    return [ConsumedRecord("bench", 0, offset, now + offset, "CreateTime", b"order",
                           f'{{"item": "tea {offset}", "n": {offset}}}'.encode(), ())
            for offset in range(count)]


def bench_tail() -> None:
    batch = records(100)

    def push(queries: list[MessageQuery]) -> Callable[[], object]:
        def run() -> None:
            tail = livetail.Tail(livetail.TailHub(), "bench")
            tail.followers = [livetail.Follower(lambda text: None, q, {0: 0}) for q in queries]
            tail._deliver(batch)
        return run

    one = median_ms(push([MessageQuery("bench")]))
    same = median_ms(push([MessageQuery("bench")] * 50))
    different = median_ms(push([MessageQuery("bench", value=f"tea {i}") for i in range(50)]))
    print(f"tail push of 100 records: 1 browser {one:.1f} ms; 50 browsers, same filters "
          f"{same:.1f} ms ({same / one:.2f}x); 50 browsers, 50 filters {different:.1f} ms "
          f"({different / one:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    bench_rows(seed(args.topics))
    bench_tail()


if __name__ == "__main__":
    main()
