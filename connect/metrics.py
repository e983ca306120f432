"""Throughput of the tasks on this worker: records each task has written (a source, to
Kafka) or delivered (a sink, to `put`), and their rate over the last seconds, as Kafka's
`source-record-write-rate` and `sink-record-send-rate` task metrics give them.

Served at `GET /metrics/tasks` (endpoints.py), a route of its own outside Kafka's API so
that no Kafka answer changes; each worker answers for the tasks it runs.
"""

from __future__ import annotations

import threading
import time
from collections import deque

WINDOW_S = 10.0
STEP_S = 0.1  # at most one sample per step: a task of one-record polls keeps 100, not 1M


class TaskMetrics:
    """Counted by the task's thread, read by the REST API's."""

    def __init__(self) -> None:
        self.total = 0
        self.samples: deque[tuple[float, int]] = deque()
        self.lock = threading.Lock()
        self.samples.append((time.monotonic(), 0))

    def record(self, count: int) -> None:
        now = time.monotonic()
        with self.lock:
            self.total += count
            if now - self.samples[-1][0] < STEP_S:
                return  # counted; the next sample's total includes it
            self.samples.append((now, self.total))
            while len(self.samples) > 2 and self.samples[1][0] < now - WINDOW_S:
                self.samples.popleft()

    def rate(self) -> float:
        """Records per second over the last WINDOW_S seconds (0 when none came)."""
        now = time.monotonic()
        with self.lock:
            first_time, first_total = self.samples[0]
            if first_time < now - WINDOW_S:  # an older sample stands for the window's start
                first_time = now - WINDOW_S
            span = max(now - first_time, 1.0)
            return round((self.total - first_total) / span, 2)
