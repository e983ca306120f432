"""DescribeLogDirs (35): each of this broker's log dirs, its partitions and their sizes."""

import shutil
from collections import defaultdict
from typing import Any

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.log_dirs import LogDir
from brokercore.replication.partition import Partition
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


@serves(DescribeLogDirsRequest, DescribeLogDirsResponse, min_version=1, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0,
                                       error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    replicas = broker.replicas
    in_dir: dict[str, list[Any]] = defaultdict(list)
    for partition in _requested(broker, request.topics):
        tp = partition.tp
        in_dir[str(replicas.placement[tp].path)].append(
            (tp, partition.log.size_in_bytes, 0, False))
        move = replicas.moves.get(tp)
        if move is not None:  # the future replica, in the dir it moves to
            in_dir[str(move.destination.path)].append(
                (tp, move.size_in_bytes, move.lag, True))
    results = [_describe(log_dir, in_dir[str(log_dir.path)]) for log_dir in replicas.log_dirs]
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   results=results)


def _describe(log_dir: LogDir, replicas: list[tuple[TopicPartition, int, int, bool]]) -> Any:
    """The dir with its replicas: (partition, size, offset lag, is future)."""
    path = str(log_dir.path.resolve())
    if not log_dir.online:
        return Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[],
                      total_bytes=-1, usable_bytes=-1, is_cordoned=False)
    by_topic: dict[str, list[tuple[TopicPartition, int, int, bool]]] = defaultdict(list)
    for replica in replicas:
        by_topic[replica[0].topic].append(replica)
    usage = shutil.disk_usage(log_dir.path)
    return Result(
        error_code=ErrorCode.NONE, log_dir=path,
        topics=[
            TopicResult(name=name, partitions=[
                # The lag of a current replica is 0; only future replicas lag behind.
                PartitionResult(partition_index=tp.partition, partition_size=size,
                                offset_lag=lag, is_future_key=future)
                for tp, size, lag, future in sorted(found, key=lambda r: r[0].partition)
            ])
            for name, found in sorted(by_topic.items())
        ],
        total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False,
    )


def _requested(broker: BrokerParts, topics: Any) -> list[Partition]:
    hosted = broker.replicas.partitions
    if topics is None:
        return list(hosted.values())
    wanted = (TopicPartition(t.topic, index) for t in topics for index in t.partitions)
    return [hosted[tp] for tp in dict.fromkeys(wanted) if tp in hosted]
