"""A coordinator that serves partitions of an internal topic, and their loading in slices.

A coordinator (groups on `__consumer_offsets`, transactions on `__transaction_state`) serves
the partitions of its topic that this broker leads, from state it rebuilt by replaying the
partition. `PartitionLoads` follows leadership and runs those replays. A replay is a
generator that yields between slices of records and installs the state it built only when
it finishes, so nothing half-loaded is ever visible. The first slice runs at once (a short
partition is served without a retry); a longer one carries on in a task on the loop, and
meanwhile `check` answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry (Kafka's
loading partitions).

A leader epoch other than the one a partition was loaded (or is loading) in means another
broker may have led and written in between: the partition is unloaded, or its load
cancelled, and loaded again.

`PartitionedCoordinator` is what both coordinators are built on: the partitions, the tick
task and the background tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol

from brokercore.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Slices = Generator[None, None, None]
# (partition, leader epoch) -> a generator that yields between slices and installs at the end
Load = Callable[[int, int], Slices]
_DONE = object()
TICK_SECONDS = 0.1
LOAD_SLICE_RECORDS = 5000  # records replayed between two turns of the event loop


class PartitionLoads:
    def __init__(self, topic: str, leader_epoch: Callable[[int], int | None], load: Load,
                 unload: Callable[[int], None]) -> None:
        self.topic = topic  # for the log lines
        self.leader_epoch = leader_epoch
        self.load = load
        self.unload = unload
        self.epochs: dict[int, int] = {}  # partition -> epoch of its load, done or running
        self.loading: dict[int, asyncio.Task[None]] = {}

    def refresh(self, partition: int) -> None:
        """Follow the partition's leadership: start, cancel or redo its load."""
        epoch = self.leader_epoch(partition)
        current = self.epochs.get(partition)
        if current is not None and current != epoch:
            self._drop(partition)
        if epoch is not None and partition not in self.epochs:
            self.epochs[partition] = epoch
            self._start(partition, epoch)

    def check(self, partition: int) -> ErrorCode:
        """NONE when the partition's state is loaded here, COORDINATOR_LOAD_IN_PROGRESS while
        it loads, NOT_COORDINATOR when this broker does not lead it."""
        self.refresh(partition)
        if partition not in self.epochs:
            return ErrorCode.NOT_COORDINATOR
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def reload(self, partition: int) -> None:
        """Read the partition again from its log: after a write that failed, what memory
        holds is ahead of it (Kafka's coordinator reverts to its last committed state)."""
        if partition in self.epochs:
            self._drop(partition)
        self.refresh(partition)

    def stop(self) -> None:
        for partition in list(self.epochs):
            self._drop(partition)

    def _start(self, partition: int, epoch: int) -> None:
        slices = self.load(partition, epoch)
        try:
            if next(slices, _DONE) is _DONE:
                return  # loaded in its first slice
        except Exception:
            log.exception("loading %s-%d failed", self.topic, partition)
            del self.epochs[partition]  # the next access tries again
            return
        task = asyncio.get_running_loop().create_task(self._finish(slices))
        self.loading[partition] = task
        task.add_done_callback(lambda t: self._loaded(partition, t))
        log.info("loading %s-%d in leader epoch %d in the background", self.topic, partition,
                 epoch)

    @staticmethod
    async def _finish(slices: Slices) -> None:
        try:
            for _ in slices:
                await asyncio.sleep(0)  # let requests in between slices
        finally:
            slices.close()

    def _loaded(self, partition: int, task: asyncio.Task[None]) -> None:
        if self.loading.get(partition) is not task:
            return  # dropped meanwhile
        del self.loading[partition]
        if not task.cancelled() and task.exception() is not None:
            log.error("loading %s-%d failed", self.topic, partition, exc_info=task.exception())
            self.epochs.pop(partition, None)  # the next access tries again

    def _drop(self, partition: int) -> None:
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()  # nothing was installed
        else:
            self.unload(partition)
        self.epochs.pop(partition, None)


class PartitionStore(Protocol):
    """What `PartitionedCoordinator` needs of its internal topic."""

    @property
    def num_partitions(self) -> int: ...

    def leader_epoch(self, partition: int) -> int | None: ...


class PartitionedCoordinator:
    """A coordinator that serves the partitions of an internal topic this broker leads: the
    group coordinator (`__consumer_offsets`) and the transaction coordinator
    (`__transaction_state`). It follows their leadership through `PartitionLoads`, runs the
    `tick` sweep every TICK_SECONDS, and owns its background tasks. A subclass says how to
    replay a partition (`load_partition`, a generator yielding every `load_slice_records`
    records and installing its state at the end) and how to drop one (`unload_partition`)."""

    topic: str

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.load_slice_records = LOAD_SLICE_RECORDS
        self.partitions = PartitionLoads(self.topic, store.leader_epoch, self.load_partition,
                                         self.unload_partition)
        self._background: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None

    def load_partition(self, partition: int, epoch: int) -> Slices:
        raise NotImplementedError

    def unload_partition(self, partition: int) -> None:
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.refresh_partitions()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._background):
            task.cancel()
        self.partitions.stop()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.tick()
            except Exception:
                log.exception("the %s coordinator's tick failed", self.topic)

    def tick(self) -> None:
        """Act on every deadline that has passed (the fake clock's tests call this)."""
        self.refresh_partitions()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- partitions -----------------------------------------------------------------------
    def refresh_partitions(self) -> None:
        """Load partitions this broker now leads; drop the state of those it lost."""
        for partition in range(self.store.num_partitions):
            self.partitions.refresh(partition)

    def check_loading_all(self) -> ErrorCode:
        """COORDINATOR_LOAD_IN_PROGRESS while any partition of this broker loads, else NONE:
        what Kafka answers a request about all of them (ListGroups, ListTransactions)
        rather than a partial list."""
        self.refresh_partitions()
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.partitions.loading
                else ErrorCode.NONE)

    async def wait_loaded(self) -> None:
        """Until no partition is loading (tests, and a broker that wants to be ready)."""
        while self.partitions.loading:
            await asyncio.gather(*self.partitions.loading.values(), return_exceptions=True)
