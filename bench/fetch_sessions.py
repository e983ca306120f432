"""What fetch sessions (KIP-227) save a consumer of many idle partitions, side by side.

In one run, against one broker (`python -m brokercore`, a fresh log dir) and one topic of
N partitions (1,000 by default) with nothing new to read, a consumer's idle fetch as
  (a) a full fetch without a session (session epoch -1: every partition in the request and
      in the response, as before sessions and as aiokafka and librdkafka still fetch),
  (b) an incremental fetch in a session (what kafka-python and the Java client send once
      the session is open: no partitions in the request, none in the response).
Both over one raw connection, `max_wait_ms` 0 so the broker answers at once, interleaved
rounds. It prints request and response bytes per fetch and the round-trip time, and the
ratios incremental/full. Compare ratios, not absolute times: the machine is noisy.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--fetches 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess

FETCH_VERSION = 12  # kafka-python 3's, by topic name
FetchTopic = FetchRequest.FetchTopic


def request(topic: str, partitions: int, session_id: int, epoch: int) -> Any:
    wanted = [FetchTopic.FetchPartition(partition=i, current_leader_epoch=-1, fetch_offset=0,
                                        last_fetched_epoch=-1, log_start_offset=-1,
                                        partition_max_bytes=1 << 20)
              for i in range(partitions)]
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[FetchTopic(topic=topic, partitions=wanted)] if wanted else [],
        forgotten_topics_data=[], rack_id="")


def timed_fetch(client: WireClient, fetch: Any) -> tuple[int, int, float, Any]:
    """(request bytes, response bytes, seconds, response) of one fetch."""
    client.correlation_id += 1
    fetch.with_header(correlation_id=client.correlation_id, client_id="bench")
    raw = bytes(fetch.encode(version=FETCH_VERSION, header=True, framed=True))
    started = time.perf_counter()
    client.send_raw(raw)
    frame = client.read_frame()
    seconds = time.perf_counter() - started
    response = fetch.header.get_response_class().decode(frame, version=FETCH_VERSION, header=True)
    return len(raw), len(frame) + 4, seconds, response


def wait_for_leaders(client: WireClient, topic: str, partitions: int) -> None:
    """Until every partition is served (a loaded machine may fence a new broker briefly)."""
    deadline = time.monotonic() + 120
    while True:
        *_, response = timed_fetch(client, request(topic, partitions, 0, -1))
        errors = [p.error_code for t in response.responses for p in t.partitions]
        if len(errors) == partitions and not any(errors):
            return
        if time.monotonic() > deadline:
            sys.exit(f"{sum(1 for e in errors if e)} partitions still unserved after 120 s")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=200)
    args = parser.parse_args()
    topic, n = "idle", args.partitions
    with tempfile.TemporaryDirectory() as tmp:
        # Creating 1,000 partitions keeps a loaded machine's broker from heartbeating for
        # seconds; a long session keeps it from fencing itself (and moving every leader)
        # in the middle of the measurement.
        broker = BrokerProcess(Path(tmp) / "broker",
                               {"broker.session.timeout.ms": "600000"}).start()
        try:
            with WireClient(broker.bootstrap, timeout=60) as client:
                client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                    name=topic, num_partitions=n, replication_factor=1, assignments=[],
                    configs=[])], timeout_ms=60_000, validate_only=False), version=4)
                wait_for_leaders(client, topic, n)
                *_, opened = timed_fetch(client, request(topic, n, 0, 0))
                session, epoch = opened.session_id, 1
                full: list[tuple[int, int, float]] = []
                incremental: list[tuple[int, int, float]] = []
                for _ in range(args.fetches):
                    sent, got, seconds, _ = timed_fetch(client, request(topic, n, 0, -1))
                    full.append((sent, got, seconds))
                    sent, got, seconds, answer = timed_fetch(client,
                                                             request(topic, 0, session, epoch))
                    if answer.error_code or answer.responses:
                        sys.exit(f"an idle incremental fetch answered {answer.error_code} "
                                 f"with {len(answer.responses)} topics: leadership moved")
                    incremental.append((sent, got, seconds))
                    epoch += 1
        finally:
            broker.stop()
    print(f"idle fetch of {n} partitions, Fetch v{FETCH_VERSION}, {args.fetches} interleaved "
          "fetches each (medians)")
    rows = {"full (no session)": full, "incremental (session)": incremental}
    for name, runs in rows.items():
        print(f"  {name:24} request {runs[0][0]:>7,} B   response {runs[0][1]:>7,} B   "
              f"round trip {statistics.median(r[2] for r in runs) * 1000:7.2f} ms")
    print("ratios incremental/full (same run):")
    for label, column in (("request bytes", 0), ("response bytes", 1), ("round trip", 2)):
        ratio = statistics.median(r[column] for r in incremental) / statistics.median(
            r[column] for r in full)
        print(f"  {label:15} {ratio:.3f}")


if __name__ == "__main__":
    main()
