"""The settings of a platform a test starts: `manage.py platform` with
DJANGO_SETTINGS_MODULE=tests.platform_settings, which every Django process it starts (the
admin's `ensure_admin`, the web server, the collectors, the Celery workers and beat)
inherits. The platform's own settings, but for the password hasher.

Django's default, PBKDF2 with a million iterations, costs about 0.3 s of CPU per hash: each
account made, each login, and each request signed in with HTTP Basic (a test polling an
analysis run every second hashes every second). MD5 costs a tenth of a millisecond, and
proves as much in a test: the same `check_password` path, the same accounts and sessions.
Only for tests: the product keeps Django's default (millrace/settings.py sets none).

Not tests.settings: that module points MILLRACE_DATA_DIR at the pytest worker's directory,
and a platform keeps its data in its own --data-dir."""

from millrace.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
