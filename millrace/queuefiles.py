"""Celery's queue on one machine: kombu's filesystem transport, with whole message files.

kombu's own `_put` creates the message file under its final name and then writes it. A worker
polling the folder can move and read that file in between, find it empty, and fail with
"Expecting value: line 1 column 1" (kombu issue #1551, open); the message is lost and the
worker's consumer restarts. Here a message is written under a name the reader skips and then
renamed into place, which is atomic on one file system, so a reader sees all of it or none.
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


class Transport(filesystem.Transport):
    Channel = Channel
