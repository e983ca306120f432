"""Codec classes for the KIP-848 APIs the kafka-python 3 codec does not ship.

ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) are built by the same codec from
schemas in `schemas/`, written from the protocol's message definitions at the versions
Kafka 4.0 serves, so their handlers work like every other one.
"""

import types
from typing import Any

from kafka.protocol.api_message import ApiMessage

from brokercore.protocol import schemas


def _message(name: str) -> Any:
    """The codec's class for `schemas/<name>.json` (its metaclass reads the schema)."""
    return types.new_class(name, (ApiMessage,), {"load_json": schemas})


ConsumerGroupHeartbeatRequest = _message("ConsumerGroupHeartbeatRequest")
ConsumerGroupHeartbeatResponse = _message("ConsumerGroupHeartbeatResponse")
ConsumerGroupDescribeRequest = _message("ConsumerGroupDescribeRequest")
ConsumerGroupDescribeResponse = _message("ConsumerGroupDescribeResponse")
