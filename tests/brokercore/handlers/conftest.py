"""Fixtures shared by the handler tests that speak the wire protocol themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokercore.wire import WireClient


@pytest.fixture
def client(kafka_bootstrap: str) -> Iterator[WireClient]:
    """A raw wire connection to the session's broker."""
    with WireClient(kafka_bootstrap) as wire:
        yield wire
