"""Time, injectable so that state machines can be driven by a fake clock in tests."""

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts, sessions)."""
        ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, time_ms: int = 1_700_000_000_000) -> None:
        self._time_ms = time_ms
        self._monotonic = 1000.0

    def time_ms(self) -> int:
        return self._time_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._time_ms += int(seconds * 1000)
        self._monotonic += seconds
