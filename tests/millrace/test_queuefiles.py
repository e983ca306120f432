"""The filesystem Celery queue hands a reader whole messages only, however slow the writer
(kombu's own transport let a polling worker take a file its writer had created but not yet
filled: the message was lost and the worker failed with a JSON error)."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from queue import Empty

from django.conf import settings
from kombu.connection import Connection

from tests.brokerproc import REPO

MESSAGES = 4
# A body big enough that serializing it takes the writer a while (tens of milliseconds),
# which is when kombu's transport showed the reader an empty file.
BODY_BYTES = 20_000_000


def test_a_reader_polling_the_queue_gets_every_message_whole(tmp_path: Path) -> None:
    (tmp_path / "control").mkdir()
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path),
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    transport = settings.MILLRACE_FILE_QUEUE_TRANSPORT
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from kombu.connection import Connection
        with Connection("filesystem://", transport={transport!r},
                        transport_options={options!r}) as conn:
            queue = conn.SimpleQueue("whole")
            for i in range({MESSAGES}):
                queue.put({{"i": i, "body": "x" * {BODY_BYTES}}})
        """)], cwd=REPO)  # fmt: skip
    received: list[int] = []
    with Connection("filesystem://", transport=transport,  # type: ignore[no-untyped-call]
                    transport_options=options) as conn:
        queue = conn.SimpleQueue("whole")
        deadline = time.monotonic() + 60
        while len(received) < MESSAGES and time.monotonic() < deadline:
            try:
                message = queue.get(block=False)
            except Empty:
                continue
            assert len(message.payload["body"]) == BODY_BYTES
            received.append(message.payload["i"])
            message.ack()
    assert writer.wait(timeout=60) == 0
    assert received == list(range(MESSAGES))
