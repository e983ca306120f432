"""COMPAT.md lists exactly the APIs and versions the broker registers."""

import re
from pathlib import Path

import brokercore.handlers  # noqa: F401  (registers the handlers)
from brokercore.handlers.registry import REGISTRY

COMPAT = Path(__file__).resolve().parents[2] / "brokercore" / "COMPAT.md"
ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\d+)\u2013(\d+) \|", re.MULTILINE)


def test_compat_md_matches_the_registered_handlers() -> None:
    documented = {int(key): (name, int(lo), int(hi))
                  for name, key, lo, hi in ROW.findall(COMPAT.read_text())}
    registered = {key: (api.name, api.min_version, api.max_version)
                  for key, api in REGISTRY.items()}
    assert documented == registered
