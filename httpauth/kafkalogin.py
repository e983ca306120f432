"""Is this the password of this SCRAM user? Asked of the cluster itself, by logging in.

The cluster's SCRAM credentials are the one identity store: the broker keeps only salted
keys (StoredKey, ServerKey), from which a password cannot be checked without running the
SCRAM exchange, and the apps reach brokers only through a Kafka client. So a login is a
confluent-kafka AdminClient with the user's name and password asking for metadata: an
answer means the broker accepted the proof; librdkafka's `_AUTHENTICATION` error means it
refused it. Anything else before the deadline (no broker answering) is neither: the
caller answers 503, not 401.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

POLL_S = 0.05
log = logging.getLogger(__name__)  # librdkafka's own lines (a refused login is one)


class LoginUnavailable(Exception):
    """The cluster did not answer either way before the deadline."""


def kafka_login(config: dict[str, Any], username: str, password: str,
                timeout_s: float) -> bool:
    """True when the cluster accepts the login, False when it refuses it."""
    errors: list[KafkaError] = []
    client = AdminClient({
        **config,
        "sasl.username": username,
        "sasl.password": password,
        "error_cb": errors.append,
        "client.id": "millrace-http-auth",
        "logger": log,
    })
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.list_topics(timeout=POLL_S)
        except KafkaException:
            pass
        else:
            return True
        client.poll(0)  # serves error_cb
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors):
            return False
        if time.monotonic() >= deadline:
            raise LoginUnavailable(str(errors[-1]) if errors else "no broker answered")
