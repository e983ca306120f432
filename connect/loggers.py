"""KIP-495's /admin/loggers: the worker's log levels, read and changed at run time, named as
Kafka names them (Python's WARNING and CRITICAL are WARN and FATAL)."""

from __future__ import annotations

import logging
import time
from typing import Any

from connect.errors import BadRequest, NotFound

TO_PYTHON = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
             "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
             "OFF": logging.CRITICAL + 10}
FROM_PYTHON = {v: k for k, v in TO_PYTHON.items()}
ROOT = "root"
_modified: dict[str, int] = {}  # logger -> when it was last set here (ms)


def _level(logger: logging.Logger) -> str:
    return FROM_PYTHON.get(logger.getEffectiveLevel(), logging.getLevelName(
        logger.getEffectiveLevel()))


def _described(name: str, logger: logging.Logger) -> dict[str, Any]:
    return {"level": _level(logger), "last_modified": _modified.get(name)}


def _named() -> dict[str, logging.Logger]:
    loggers = {n: lg for n, lg in logging.Logger.manager.loggerDict.items()
               if isinstance(lg, logging.Logger) and lg.level != logging.NOTSET}
    return {ROOT: logging.getLogger(), **loggers}


def list_levels() -> dict[str, dict[str, Any]]:
    """Every logger with a level of its own, and the root."""
    return {name: _described(name, lg) for name, lg in sorted(_named().items())}


def level_of(name: str) -> dict[str, Any]:
    if name != ROOT and name not in logging.Logger.manager.loggerDict:
        raise NotFound(f"Logger {name} not found.")
    return _described(name, logging.getLogger(None if name == ROOT else name))


def set_level(name: str, body: Any) -> list[str]:
    """Set `name` and every logger below it; the names changed, as Kafka answers."""
    if not isinstance(body, dict) or "level" not in body:
        raise BadRequest("Desired 'level' parameter was not specified in the request.")
    level = str(body["level"]).upper()
    if level not in TO_PYTHON:
        raise BadRequest(f"Invalid log level '{body['level']}'.")
    target = logging.getLogger(None if name == ROOT else name)
    below = sorted(n for n, lg in logging.Logger.manager.loggerDict.items()
                   if isinstance(lg, logging.Logger)
                   and (name == ROOT or n.startswith(name + ".")))
    affected = [name, *below]
    now = int(time.time() * 1000)
    for affected_name in affected:
        logger = target if affected_name == name else logging.getLogger(affected_name)
        logger.setLevel(TO_PYTHON[level])
        _modified[affected_name] = now
    return affected
