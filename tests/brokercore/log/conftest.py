from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brokercore.clock import FakeClock
from brokercore.log import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


@pytest.fixture
def open_log(log_dir: Path, clock: FakeClock) -> Iterator[OpenLog]:
    """Open (or reopen) the partition log; ``crash()`` a log by simply dropping it."""

    def _open(recovery_point: int | None = None, log_start_offset: int | None = None,
              **config: object) -> PartitionLog:
        return PartitionLog.open(log_dir, LogConfig(**config), clock,  # type: ignore[arg-type]
                                 recovery_point=recovery_point,
                                 log_start_offset=log_start_offset)

    yield _open
