"""The lag-anomaly rule the streaming alert query applies (issue 21): a group's lag on a topic
against its rolling baseline, mean + k·stddev of the topic's last `window` cycles.

The collector writes one `_millrace-lag-samples` record per group, topic, partition and cycle,
every record of a cycle with the same `ts`. A (group, topic)'s lag in a cycle is the sum over
its partitions. `feed` folds samples, in any order within a batch, into the pair's `Baseline`:
samples of the pending cycle add to it, a sample of a newer cycle closes the pending one
(scores it, then adds it to the history) and opens its own, and a sample older than the
pending cycle is late and dropped (counted). So a cycle is judged one collector interval
after it was sampled, when the next cycle shows it complete.

The closed cycle is anomalous when the history holds at least `min_history` cycles and its lag
is above `mean + k · max(stddev, mean / 10, 1)`: the deviation counts as at least a tenth of
the baseline and at least one record, as in the batch `anomalies` job, so a flat baseline
does not make every wobble an anomaly. An anomalous cycle stays out of the history: the
baseline is what normal looked like, so a group that falls behind and stays behind stays
alerted until it catches up (were the jump let in, one such cycle would inflate the stddev
enough to clear the alert a cycle or two later, while the group is still behind).

Alerts are edges, not levels: `RAISED` when a pair turns anomalous, `CLEARED` when it stops
being so, nothing while it stays either way.

Pure and immutable (no Spark, no I/O): the Spark job (`laganalysis/alertstream.py`) keeps a
`Baseline` per pair in Spark's state store as `Baseline.to_state()`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

RAISED, CLEARED = "RAISED", "CLEARED"


class RuleError(ValueError):
    """A rule parameter out of range, named."""


@dataclass(frozen=True, slots=True)
class Rule:
    k: float = 3.0  # deviations above the mean
    window: int = 60  # cycles in the rolling baseline
    min_history: int = 10  # cycles before anything is judged

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> Rule:
        unknown = set(params) - {"k", "window", "min_history"}
        if unknown:
            raise RuleError(f"unknown parameters: {', '.join(sorted(unknown))} "
                            "(k, window, min_history)")
        default = cls()
        try:
            rule = cls(float(params.get("k", default.k)),
                       int(params.get("window", default.window)),
                       int(params.get("min_history", default.min_history)))
        except (TypeError, ValueError) as exc:
            raise RuleError(f"k, window and min_history must be numbers: {exc}") from exc
        if not (math.isfinite(rule.k) and rule.k > 0):
            raise RuleError(f"k must be a positive number, not {rule.k}")
        if not 2 <= rule.window <= 10_000:
            raise RuleError(f"window must be between 2 and 10000 cycles, not {rule.window}")
        if not 1 <= rule.min_history <= rule.window:
            raise RuleError(f"min_history must be between 1 and the window ({rule.window}), "
                            f"not {rule.min_history}")
        return rule

    def as_params(self) -> dict[str, Any]:
        return {"k": self.k, "window": self.window, "min_history": self.min_history}


@dataclass(frozen=True, slots=True)
class Judgement:
    """One closed cycle of a (group, topic): its lag against the baseline before it."""

    ts: int  # the cycle's sample time, ms
    lag: int
    mean: float | None  # None while the history is shorter than min_history
    stddev: float | None
    threshold: float | None
    anomalous: bool


@dataclass(frozen=True, slots=True)
class Alert:
    state: str  # RAISED or CLEARED
    judgement: Judgement


@dataclass(frozen=True, slots=True)
class Baseline:
    """A (group, topic)'s rolling history and the cycle being summed."""

    history: tuple[int, ...] = ()  # closed cycles' lags, oldest first, at most `window`
    pending_ts: int | None = None
    pending_lag: int = 0
    alerting: bool = False
    late: int = 0  # samples dropped for arriving after a newer cycle

    def to_state(self) -> tuple[int, int, bool, int, str]:
        """The row Spark's state store keeps (STATE_DDL)."""
        return (-1 if self.pending_ts is None else self.pending_ts, self.pending_lag,
                self.alerting, self.late, json.dumps(self.history))

    @classmethod
    def from_state(cls, row: Iterable[Any]) -> Baseline:
        pending_ts, pending_lag, alerting, late, history = row
        return cls(tuple(int(v) for v in json.loads(history)),
                   None if int(pending_ts) < 0 else int(pending_ts), int(pending_lag),
                   bool(alerting), int(late))


STATE_DDL = "pending_ts LONG, pending_lag LONG, alerting BOOLEAN, late LONG, history STRING"


def judge(history: tuple[int, ...], ts: int, lag: int, rule: Rule) -> Judgement:
    if len(history) < rule.min_history:
        return Judgement(ts, lag, None, None, None, False)
    mean = sum(history) / len(history)
    variance = sum((v - mean) ** 2 for v in history) / len(history)
    stddev = math.sqrt(variance)
    threshold = mean + rule.k * max(stddev, mean / 10, 1.0)
    return Judgement(ts, lag, mean, stddev, threshold, lag > threshold)


@dataclass(frozen=True, slots=True)
class Fed:
    baseline: Baseline
    judgements: list[Judgement] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)


def feed(baseline: Baseline, samples: Iterable[tuple[int, int]], rule: Rule) -> Fed:
    """Fold (ts, lag) samples of one (group, topic), one per partition and cycle, into the
    baseline: the cycles they close, judged, and the alerts those judgements raise or clear."""
    state = baseline
    judgements: list[Judgement] = []
    alerts: list[Alert] = []
    for ts, lag in sorted(samples):
        if state.pending_ts is None or ts > state.pending_ts:
            if state.pending_ts is not None:
                verdict = judge(state.history, state.pending_ts, state.pending_lag, rule)
                judgements.append(verdict)
                if verdict.anomalous != state.alerting:
                    alerts.append(Alert(RAISED if verdict.anomalous else CLEARED, verdict))
                history = state.history if verdict.anomalous else (
                    *state.history, state.pending_lag)[-rule.window:]
                state = replace(state, alerting=verdict.anomalous, history=history)
            state = replace(state, pending_ts=ts, pending_lag=lag)
        elif ts == state.pending_ts:
            state = replace(state, pending_lag=state.pending_lag + lag)
        else:
            state = replace(state, late=state.late + 1)
    return Fed(state, judgements, alerts)
