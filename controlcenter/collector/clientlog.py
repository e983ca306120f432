"""librdkafka's log lines (the collector's admin client and history producer) through Python
logging, at most one line of each kind a minute.

With no `logger` in its config librdkafka writes to stderr from its own threads, and while a
broker or the whole cluster is down every reconnect attempt is a line: each admin request
wakes a connection to a dead bootstrap server, so the collector printed about one line a
second per client for as long as the outage lasted. With `logger` set, confluent-kafka
hands the lines over on `poll()`, which the collector calls every cycle.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

LOG_EVERY_S = 60.0


class OncePerInterval(logging.Filter):
    """Lets one record of each kind through per `every` seconds and counts the rest into
    the next one it lets through. A librdkafka record's kind is its facility and client
    (FAIL, millrace-collector#producer-2): the args of confluent-kafka's log callback."""

    def __init__(self, every: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self.last: dict[tuple[Any, ...], float] = {}
        self.held: dict[tuple[Any, ...], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        kind = (record.levelno, *args[:2])
        now = self.clock()
        if now - self.last.get(kind, -math.inf) < self.every:
            self.held[kind] = self.held.get(kind, 0) + 1
            return False
        self.last[kind] = now
        held = self.held.pop(kind, 0)
        if held:
            record.msg = f"{record.msg} ({held} alike in the last {self.every:.0f}s not shown)"
        return True


librdkafka = logging.getLogger(__name__)
librdkafka.addFilter(OncePerInterval())
