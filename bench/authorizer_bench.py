"""What the StandardAuthorizer with 10,000 ACLs costs a produce request, side by side.

In one run, two brokers (`python -m brokercore`, fresh log dirs) take the same produce
requests over one raw connection each, one at a time (acks=1, one 100-byte record, so the
request's fixed costs dominate and the authorizer's share is as large as it gets):
  (a) no authorizer (`authorizer.class.name` unset),
  (b) the StandardAuthorizer with N ACLs (10,000 by default): half LITERAL topic ACLs and
      half PREFIXED ones of other principals and names, of many prefix lengths, and the one
      ALLOW that lets User:ANONYMOUS write the bench topic (a PREFIXED one), so every
      request takes the full decision path, not the super-user shortcut.
Rounds alternate between the brokers. It prints the median round trip of each, the ratio,
and, in this process, what one decision costs the authorizer with the same ACLs: the first
time (the index lookup) and then (the cached decision). Compare ratios: the machine is noisy.

    .venv/bin/python bench/authorizer_bench.py [--acls 10000] [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka.protocol.admin import CreateAclsRequest, CreateTopicsRequest
from kafka.protocol.producer import ProduceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from brokercore.config import BrokerConfig
from brokercore.controller.image import MetadataImage, acl_record
from brokercore.protocol.context import RequestContext
from brokercore.protocol.framing import RequestHeader
from brokercore.security.acls import AclOperation, ResourceType, new_acl
from brokercore.security.authorizer import Authorizer
from tests.brokercore.wire import WireClient, record_batch
from tests.brokerproc import BrokerProcess

TOPIC = "bench-authorizer"
PRODUCE_VERSION = 9
TopicData = ProduceRequest.TopicProduceData
Acl = tuple[int, str, int, str, str, int, int]
TOPIC_TYPE, LITERAL, PREFIXED, ALLOW, DENY, WRITE, READ = 2, 3, 4, 3, 2, 4, 3


def acls(n: int) -> list[Acl]:
    """n ACLs: the one that allows the bench, and n-1 others (none of them applies)."""
    others: list[Acl] = []
    for i in range(n - 1):
        if i % 2:
            others.append((TOPIC_TYPE, f"orders-{i}", LITERAL, f"User:app{i}", "*", READ, ALLOW))
        else:  # prefixes of many lengths, some sharing the bench topic's first letters
            prefix = f"b{'x' * (i % 13)}-{i}-" if i % 4 == 0 else f"team{i}."
            others.append((TOPIC_TYPE, prefix, PREFIXED, f"User:app{i}", "*", WRITE,
                           DENY if i % 10 == 0 else ALLOW))
    return [*others, (TOPIC_TYPE, "bench-", PREFIXED, "User:ANONYMOUS", "*", WRITE, ALLOW)]


def grant(client: WireClient, bindings: list[Acl]) -> None:
    for start in range(0, len(bindings), 1000):
        response = client.request(CreateAclsRequest(creations=[
            CreateAclsRequest.AclCreation(
                resource_type=a[0], resource_name=a[1], resource_pattern_type=a[2],
                principal=a[3], host=a[4], operation=a[5], permission_type=a[6])
            for a in bindings[start:start + 1000]]), version=3)
        failed = [r for r in response.results if r.error_code]
        if failed:
            sys.exit(f"CreateAcls failed: {failed[0]}")


def produce_request() -> Any:
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        TopicData(name=TOPIC, partition_data=[TopicData.PartitionProduceData(
            index=0, records=record_batch([b"x" * 100]))])])


def timed_produces(client: WireClient, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        response = client.request(produce_request(), PRODUCE_VERSION)
        times.append(time.perf_counter() - start)
        code = response.responses[0].partition_responses[0].error_code
        if code:
            sys.exit(f"produce answered error {code}")
    return times


def prepare(broker: BrokerProcess, bindings: list[Acl]) -> WireClient:
    client = WireClient(broker.bootstrap, timeout=60)
    if bindings:
        grant(client, bindings)
    created = client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30_000, validate_only=False), version=4)
    if created.topics[0].error_code:
        sys.exit(f"CreateTopics failed: {created.topics[0].error_code}")
    timed_produces(client, 200)  # warm up: leadership settled, caches filled
    return client


def decision_costs(bindings: list[Acl], samples: int = 20_000) -> tuple[float, float]:
    """(first decision, cached decision) in µs, in this process, with the same ACLs."""
    image = MetadataImage()
    for offset, fields in enumerate(bindings):
        image.apply(acl_record(str(offset), new_acl(*fields)), offset)
    authorizer = Authorizer(BrokerConfig({"authorizer.class.name": "StandardAuthorizer"}),
                            image.acls)
    header = RequestHeader(0, PRODUCE_VERSION, 1, "bench")
    ctx = RequestContext(header, "127.0.0.1:5000")
    names = [f"bench-{i}" for i in range(samples)]
    start = time.perf_counter()
    for name in names:  # each name new: the index lookup
        authorizer.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
    first = (time.perf_counter() - start) / samples
    start = time.perf_counter()
    for name in names:  # each decided before: the cache
        authorizer.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
    cached = (time.perf_counter() - start) / samples
    return first * 1e6, cached * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bindings = acls(args.acls)
    with tempfile.TemporaryDirectory() as tmp:
        plain = BrokerProcess(Path(tmp) / "plain").start()
        secured = BrokerProcess(Path(tmp) / "secured", {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # nobody holds a cluster ACL, so the bench may create ACLs and its topic
            "allow.everyone.if.no.acl.found": "true",
        }).start()
        try:
            plain_client, secured_client = prepare(plain, []), prepare(secured, bindings)
            without: list[float] = []
            with_acls: list[float] = []
            for _ in range(args.rounds):
                without += timed_produces(plain_client, args.requests)
                with_acls += timed_produces(secured_client, args.requests)
        finally:
            plain.stop()
            secured.stop()
    first, cached = decision_costs(bindings)
    off, on = statistics.median(without), statistics.median(with_acls)
    print(f"produce round trip, one 100-byte record, acks=1, {args.rounds} alternating rounds "
          f"of {args.requests} requests (medians)")
    print(f"  no authorizer                       {off * 1e6:8.1f} µs")
    print(f"  StandardAuthorizer, {len(bindings):,} ACLs     {on * 1e6:8.1f} µs")
    print(f"  ratio authorizer/none (same run)    {on / off:8.3f}")
    print(f"one WRITE decision in process, {len(bindings):,} ACLs: first {first:.2f} µs, "
          f"cached {cached:.2f} µs ({cached * 1e-6 / off:.2%} of a produce round trip)")


if __name__ == "__main__":
    main()
