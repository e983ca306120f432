"""The platform's settings for a test run, with a data directory of its own per pytest-xdist
worker: `var/` holds the test database, the file channel hub, the cache, the Celery
filesystem queues and the analysis results, and two workers sharing them would see each
other's pushes, tasks and run ids.

The settings module pytest-django loads (`--ds` in pyproject.toml), so this runs before
Django reads `MILLRACE_DATA_DIR`: `var/xdist/<worker>/` for a worker, `var/` (or the
variable's value) on a serial run. It sets the variable in `os.environ`, so that every
process a test starts (Celery workers, live servers, commands) inherits the worker's
directory, and hands those processes the platform's own settings module.

Passwords are hashed with MD5, not Django's PBKDF2 (0.3 s of CPU per hash: each account a
test makes, each login): tests/platform_settings.py says why, and gives a platform a test
starts the same hasher. The live servers of the browser tests load this module."""

import os
from pathlib import Path

# Idempotent: a live server started with these settings imports them again.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["MILLRACE_DATA_DIR"] = str(
        Path(__file__).resolve().parents[1] / "var" / "xdist" / worker)
os.environ["DJANGO_SETTINGS_MODULE"] = "millrace.settings"

from millrace.settings import *  # noqa: F403
from tests.platform_settings import PASSWORD_HASHERS  # noqa: F401
