"""Celery's queue on one machine: kombu's filesystem transport, with whole message files.

kombu's own `_put` creates the message file under its final name and then writes it. A worker
polling the folder can move and read that file in between, find it empty, and fail with
"Expecting value: line 1 column 1" (kombu issue #1551, open); the message is lost and the
worker's consumer restarts. Here a message is written under a name the reader skips and then
renamed into place, which is atomic on one file system, so a reader sees all of it or none.

A worker told to stop (SIGTERM: Celery's warm shutdown) notices it only between two waits
for messages, and kombu's virtual transport waits out the whole of the worker's 2 s timeout
polling an empty folder; Celery then runs one more such wait before it stops. Here a wait
ends at the first empty poll after the stop was asked for, so a worker's warm shutdown
takes about a poll (1 s) instead of up to 4 s (millrace/README.md, "Stopping").
"""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        # kombu's reader takes the files whose name after the first dot is "<queue>.msg",
        # oldest (by the leading milliseconds) first; the partial name has no such ending.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f"partial-{uuid.uuid4()}.tmp")
        try:
            body = str_to_bytes(dumps(payload))  # type: ignore[no-untyped-call]
            with open(partial, "wb") as f:
                f.write(body)
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


def _worker_stopping() -> bool:
    from celery.worker import state  # set by the worker's SIGTERM/SIGQUIT handlers

    return state.should_stop is not None or state.should_terminate is not None


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(  # type: ignore[override]
            self, connection: Any, timeout: float | None = None) -> None:
        """kombu's wait for a message, in slices of one poll, ending (as a timeout) at
        the first empty poll once the worker is stopping."""
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            if _worker_stopping():
                raise TimeoutError()
            step = self.polling_interval or 1.0
            if deadline is not None:
                step = min(step, deadline - monotonic())
                if step <= 0:
                    raise TimeoutError()
            try:
                super().drain_events(connection, timeout=step)  # type: ignore[no-untyped-call]
                return
            except TimeoutError:
                if deadline is not None and monotonic() >= deadline:
                    raise
