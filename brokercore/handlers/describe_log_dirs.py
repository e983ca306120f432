"""DescribeLogDirs (35): this broker's log directory and the size of each partition in it."""

import shutil
from collections import defaultdict
from typing import Any

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import Partition
from brokercore.topic_partition import TopicPartition

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


@serves(DescribeLogDirsRequest, DescribeLogDirsResponse, min_version=1, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    by_topic: dict[str, list[Partition]] = defaultdict(list)
    for partition in _requested(broker, request.topics):
        by_topic[partition.tp.topic].append(partition)
    usage = shutil.disk_usage(broker.log_dir)
    result = Result(
        error_code=ErrorCode.NONE,
        log_dir=str(broker.log_dir.resolve()),
        topics=[
            TopicResult(name=name, partitions=[
                # A replica's lag only matters while it is moved between dirs (future
                # replicas); one log dir per broker means there are none.
                PartitionResult(partition_index=p.tp.partition,
                                partition_size=p.log.size_in_bytes, offset_lag=0,
                                is_future_key=False)
                for p in sorted(partitions, key=lambda p: p.tp.partition)
            ])
            for name, partitions in sorted(by_topic.items())
        ],
        total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False,
    )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   results=[result])


def _requested(broker: BrokerParts, topics: Any) -> list[Partition]:
    hosted = broker.replicas.partitions
    if topics is None:
        return list(hosted.values())
    wanted = (TopicPartition(t.topic, index) for t in topics for index in t.partitions)
    return [hosted[tp] for tp in dict.fromkeys(wanted) if tp in hosted]
