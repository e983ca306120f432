"""Errors the REST API renders as Connect's body `{"error_code": <HTTP status>, "message"}`."""

from __future__ import annotations


class ConnectRestError(Exception):
    status = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class BadRequest(ConnectRestError):
    status = 400


class NotFound(ConnectRestError):
    status = 404


class Conflict(ConnectRestError):
    status = 409


class NotLeader(ConnectRestError):
    """The request must be served by the leader: the REST layer forwards it to `url`, or
    answers 409 while no leader is known (a rebalance)."""
    status = 409

    def __init__(self, url: str | None) -> None:
        super().__init__("Cannot complete request because of a conflicting operation "
                         "(e.g. worker rebalance)")
        self.url = url


class NotOwner(NotLeader):
    """The request must be served by the worker that runs the task (`url`)."""


def connector_not_found(name: str) -> NotFound:
    return NotFound(f"Connector {name} not found")
