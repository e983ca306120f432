"""The tasks' throughput counters (connect/metrics.py): every record counted, memory bounded
however small the batches."""

from __future__ import annotations

from connect.metrics import STEP_S, WINDOW_S, TaskMetrics


def test_every_record_is_counted_and_the_samples_stay_bounded() -> None:
    metrics = TaskMetrics()
    for _ in range(100_000):  # a source whose every poll returns one record
        metrics.record(1)
    assert metrics.total == 100_000
    assert len(metrics.samples) <= WINDOW_S / STEP_S + 2
    assert metrics.rate() > 0


def test_a_task_that_wrote_nothing_has_a_rate_of_zero() -> None:
    assert TaskMetrics().rate() == 0
