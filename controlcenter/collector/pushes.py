"""Live pushes rendered and sent on their own thread, so a cycle never waits on rendering.

Rendering is the collector's most expensive step at scale: every changed topic and group
has its fragments rendered from the read model (a few queries and templates each; 200
groups and 100 topics change in a steady cycle at 1,000 groups, all 1,000 groups when
their statuses first settle). Done inside the cycle it pushed a 5 s cycle to 10-30 s, and
the cluster was sampled that much less often. Here the cycle hands over what changed and
goes on; changes that arrive while a batch is being rendered are merged into the next one,
and each (kind, key) is rendered once from the tables as they are then, which is what a
reload would show. So the pushes fall behind under load, never the sampling, and never by
more than one batch.
"""

from __future__ import annotations

import logging
import threading

from django.db import connections

from controlcenter import clusters, events

log = logging.getLogger(__name__)
Changed = list[tuple[str, str | None]]


class Pusher:
    def __init__(self, cluster: str = "") -> None:
        self.cluster = cluster  # whose rows and event groups ("": the current one's)
        self.pending: dict[tuple[str, str | None], None] = {}  # insertion-ordered set
        self.busy = False
        self.stopping = False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="collector-pushes", daemon=True)
        self.thread.start()

    def submit(self, changed: Changed) -> None:
        with self.changed:
            self.pending.update(dict.fromkeys(changed))
            self.changed.notify_all()

    def wait(self, timeout: float = 60.0) -> bool:
        """Until everything submitted so far has been sent; False on timeout."""
        with self.changed:
            return self.changed.wait_for(lambda: not self.pending and not self.busy, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stops the thread after the batch it is sending; what is pending is dropped (the
        collector is stopping: nothing will render the next changes either)."""
        with self.changed:
            self.stopping = True
            self.pending.clear()
            self.changed.notify_all()
        self.thread.join(timeout)

    def _run(self) -> None:
        try:
            while (batch := self._next()) is not None:
                try:
                    with clusters.using(self.cluster):  # a thread starts with no context
                        events.publish_changes(batch)
                except Exception:  # a failed push must not end the pushes; the next retries
                    log.exception("live push of %d changes failed", len(batch))
                with self.changed:
                    self.busy = False
                    self.changed.notify_all()
        finally:
            connections.close_all()  # this thread's own database connections

    def _next(self) -> Changed | None:
        with self.changed:
            self.changed.wait_for(lambda: self.pending or self.stopping)
            if not self.pending:
                return None
            batch, self.pending, self.busy = list(self.pending), {}, True
            return batch
