"""The one error type of the controller: a Kafka error code and a message."""

from __future__ import annotations

from brokercore.protocol.errors import ErrorCode


class ControllerError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @classmethod
    def from_wire(cls, error_code: int, message: str) -> ControllerError:
        try:
            code = ErrorCode(error_code)
        except ValueError:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        return cls(code, message)
