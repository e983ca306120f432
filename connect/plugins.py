"""Finding connector plugins: the connectors shipped in `connect.connectors`, those that
installed packages declare under the entry point group `millrace.connect`, and Python files
or packages in the directories of the worker's `plugin.path`.

A plugin answers to its class name (Kafka's, for the shipped ones: a connector class may
set `kafka_class`), to its simple name, and to its simple name without `Connector`
(`FileStreamSource`), as Kafka's plugin aliases do.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from connect.api import Connector, SinkConnector, SourceConnector
from connect.configdef import ConfigException

log = logging.getLogger(__name__)

BUILT_IN = (
    "connect.connectors.filestream", "connect.connectors.datagen", "connect.connectors.jdbc",
    "connect.connectors.mirror.source", "connect.connectors.mirror.checkpoint",
    "connect.connectors.mirror.heartbeat",
)
ENTRY_POINT_GROUP = "millrace.connect"


def class_name(cls: type[Connector]) -> str:
    return getattr(cls, "kafka_class", None) or f"{cls.__module__}.{cls.__qualname__}"


def plugin_type(cls: type[Connector]) -> str:
    return "source" if issubclass(cls, SourceConnector) else "sink"


class Plugins:
    def __init__(self, plugin_path: Iterable[str] = ()) -> None:
        self.connectors: dict[str, type[Connector]] = {}
        for module in BUILT_IN:
            self._scan(importlib.import_module(module))
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = entry.load()
            except ImportError as exc:
                log.warning("plugin %s: %s", entry.name, exc)
                continue
            if isinstance(loaded, ModuleType):
                self._scan(loaded)
            elif inspect.isclass(loaded) and issubclass(loaded, Connector):
                self._add(loaded)
        for directory in plugin_path:
            self._scan_directory(Path(directory))

    def _scan_directory(self, directory: Path) -> None:
        for path in sorted(directory.glob("*")):
            target = path / "__init__.py" if path.is_dir() else path
            if target.suffix != ".py" or not target.exists() or path.name.startswith("_"):
                continue
            name = f"connect_plugin_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, target)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except Exception:  # a broken plugin must not stop the worker
                log.exception("plugin.path: %s could not be loaded", target)
                continue
            self._scan(module)

    def _scan(self, module: ModuleType) -> None:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, SourceConnector | SinkConnector) and not inspect.isabstract(cls)
                    and cls.__module__ == module.__name__):
                self._add(cls)

    def _add(self, cls: type[Connector]) -> None:
        self.connectors[class_name(cls)] = cls

    def find(self, name: str) -> type[Connector]:
        for full, cls in self.connectors.items():
            simple = full.rsplit(".", 1)[-1]
            if name in (full, simple, simple.removesuffix("Connector")):
                return cls
        raise ConfigException(
            f"Failed to find any class that implements Connector and which name matches "
            f"{name}, available connectors are: "
            + ", ".join(f"PluginDesc{{klass={c}, type={plugin_type(k)}}}"
                        for c, k in sorted(self.connectors.items())))

    def listing(self) -> list[dict[str, str]]:
        """Kafka's /connector-plugins answer."""
        return [{"class": full, "type": plugin_type(cls), "version": cls().version()}
                for full, cls in sorted(self.connectors.items())]
