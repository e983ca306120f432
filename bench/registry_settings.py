"""Settings for bench/registry_bench.py: the platform's, plus the framework's-floor view."""

from controlcenter.settings import *  # noqa: F403

ROOT_URLCONF = "bench.registry_urls"
