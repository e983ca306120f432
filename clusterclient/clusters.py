"""The clusters a platform knows: a name, bootstrap servers and client config for each.

The first is the default cluster, the one KAFKA_BOOTSTRAP_SERVERS names and everything used
before several clusters existed (REST proxy v2, the control center's first page). More come
from two settings, in the forms Kafka and Confluent users already write:

- MILLRACE_CLUSTERS, `name=bootstrap servers` pairs separated by `;` or whitespace
  (`backup=10.0.0.5:9092,10.0.0.6:9092;dr=kafka-dr:9092`): clusters that need no login;
- MILLRACE_CLUSTERS_FILE, a properties file in Confluent Control Center's multi-cluster form,
  `confluent.controlcenter.kafka.<name>.<librdkafka key>=<value>`, so an existing
  Control Center config's cluster lines work as they are:

      confluent.controlcenter.kafka.backup.bootstrap.servers=kafka-b1:9093,kafka-b2:9093
      confluent.controlcenter.kafka.backup.security.protocol=SASL_SSL
      confluent.controlcenter.kafka.backup.sasl.mechanism=SCRAM-SHA-512

A cluster of either may also take its clients' keys from a librdkafka properties file, named
in MILLRACE_CLUSTER_CLIENT_CONFIGS (`name=path` pairs): what MILLRACE_KAFKA_CLIENT_CONFIG is
to the default cluster, and how `platform --secure --clusters N` gives the services each
built-in cluster's login (the file's `bootstrap.servers` is ignored; keys the properties file
above sets for the cluster win).

Each cluster may have a Kafka Connect worker (`connect_url`, the control center's Connect
page of that cluster): the default's is MILLRACE_CONNECT_URL; any cluster's is named by
MILLRACE_CONNECT_URLS (`name=url` pairs, what `platform --clusters N` sets for its workers)
or by Control Center's own key in the same properties file,
`confluent.controlcenter.connect.<name>.cluster=http://connect-1:8083,http://connect-2:8083`.
Control Center names a Connect cluster freely and finds its Kafka cluster by the id the
worker reports; here `<name>` is the Kafka cluster's name (no request at start-up), and a
name that is no configured cluster's is refused. Of several URLs the first is used (any
worker answers: followers forward to the leader).

No Django: `from_settings(django.conf.settings)` reads the parsed settings, so callers see
`override_settings` too; the cluster id is the cluster's own (Metadata), asked of it by
whoever needs it (`ClusterClient.metadata().cluster_id`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Control Center's multi-cluster key prefixes
C3_PREFIX = "confluent.controlcenter.kafka."
C3_CONNECT_PREFIX = "confluent.controlcenter.connect."
NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class KafkaCluster:
    """One configured cluster. `config`: librdkafka keys every client of it adds (a login);
    `supervisor_dir`: a built-in cluster's data dir, where its supervisor's control socket is
    (None for an external cluster); `connect_url`: its Kafka Connect worker's REST API
    ("" for none)."""

    name: str
    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)
    supervisor_dir: str | None = None
    connect_url: str = ""

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """The librdkafka config of a client of this cluster."""
        return {**self.config, "bootstrap.servers": self.bootstrap_servers, **extra}


def parse_pairs(spec: str) -> list[KafkaCluster]:
    """MILLRACE_CLUSTERS: `name=host:port,host:port` pairs separated by `;` or whitespace."""
    found = []
    for pair in re.split(r"[;\s]+", spec.strip()):
        if not pair:
            continue
        name, sep, bootstrap = pair.partition("=")
        if not sep or not bootstrap:
            raise ValueError(f"MILLRACE_CLUSTERS: {pair!r} is not name=bootstrap.servers")
        found.append(KafkaCluster(_checked(name), bootstrap))
    return found


def parse_c3_properties(lines: Mapping[str, str]) -> list[KafkaCluster]:
    """Control Center's `confluent.controlcenter.kafka.<name>.<key>` lines, in file order;
    other keys are ignored (a whole Control Center file can be pointed at)."""
    configs: dict[str, dict[str, str]] = {}
    for key, value in lines.items():
        if not key.startswith(C3_PREFIX):
            continue
        name, _, setting = key.removeprefix(C3_PREFIX).partition(".")
        if setting:
            configs.setdefault(_checked(name), {})[setting] = value
    clusters = []
    for name, config in configs.items():
        bootstrap = config.pop("bootstrap.servers", "")
        if not bootstrap:
            raise ValueError(f"{C3_PREFIX}{name}.bootstrap.servers is missing")
        clusters.append(KafkaCluster(name, bootstrap, config))
    return clusters


def read_properties(path: Path) -> dict[str, str]:
    """A properties file's `key=value` lines (no escapes or continuations)."""
    config = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config


def connect_urls(pairs: str, properties_file: str) -> dict[str, str]:
    """Connect workers by cluster name: MILLRACE_CONNECT_URLS (`name=url` pairs separated by
    `;` or whitespace), then the properties file's `confluent.controlcenter.connect.<name>.
    cluster` lines; the first URL of a comma-separated list."""
    found: dict[str, str] = {}
    for pair in re.split(r"[;\s]+", pairs.strip()):
        if not pair:
            continue
        name, sep, url = pair.partition("=")
        if not sep or not url:
            raise ValueError(f"MILLRACE_CONNECT_URLS: {pair!r} is not name=url")
        found[_checked(name)] = url
    lines = read_properties(Path(properties_file)) if properties_file else {}
    for key, value in lines.items():
        name, _, setting = key.removeprefix(C3_CONNECT_PREFIX).partition(".")
        if key.startswith(C3_CONNECT_PREFIX) and setting == "cluster" and value:
            found[_checked(name)] = value
    return {name: url.split(",")[0].strip().rstrip("/") for name, url in found.items()}


def client_config_files(pairs: str) -> dict[str, Path]:
    """MILLRACE_CLUSTER_CLIENT_CONFIGS: `name=path` pairs separated by `;` or whitespace."""
    found: dict[str, Path] = {}
    for pair in re.split(r"[;\s]+", pairs.strip()):
        if not pair:
            continue
        name, sep, path = pair.partition("=")
        if not sep or not path:
            raise ValueError(f"MILLRACE_CLUSTER_CLIENT_CONFIGS: {pair!r} is not name=path")
        found[_checked(name)] = Path(path)
    return found


def extra_clusters(pairs: str, properties_file: str, data_dir: Path,
                   client_configs: str = "") -> tuple[KafkaCluster, ...]:
    """The clusters after the default one: MILLRACE_CLUSTERS, then MILLRACE_CLUSTERS_FILE,
    each with the keys of its MILLRACE_CLUSTER_CLIENT_CONFIGS file (if named there; a name
    that is no cluster's is refused). One whose `<data_dir>/cluster-<name>` exists is a
    built-in cluster (`platform --clusters N` keeps each there), operated through its
    supervisor."""
    found = parse_pairs(pairs)
    if properties_file:
        found += parse_c3_properties(read_properties(Path(properties_file)))
    files = client_config_files(client_configs)
    if unknown := sorted(set(files) - {c.name for c in found}):
        raise ValueError(f"MILLRACE_CLUSTER_CLIENT_CONFIGS names {', '.join(unknown)}: no "
                         "such cluster in MILLRACE_CLUSTERS or MILLRACE_CLUSTERS_FILE")
    return tuple(
        KafkaCluster(c.name, c.bootstrap_servers,
                     {**_client_keys(files.get(c.name)), **c.config},
                     str(data_dir / f"cluster-{c.name}")
                     if (data_dir / f"cluster-{c.name}").is_dir() else None)
        for c in found)


def _client_keys(path: Path | None) -> dict[str, str]:
    """A client config file's keys but `bootstrap.servers` (the cluster's own says where)."""
    if path is None:
        return {}
    return {k: v for k, v in read_properties(path).items() if k != "bootstrap.servers"}


def from_settings(settings: Any) -> tuple[KafkaCluster, ...]:
    """Every configured cluster, the default first: THE list other code uses
    (`from_settings(django.conf.settings)`). Names are unique; ValueError otherwise."""
    default = KafkaCluster(settings.MILLRACE_CLUSTER_NAME, settings.KAFKA_BOOTSTRAP_SERVERS,
                           dict(settings.KAFKA_CLIENT_CONFIG), settings.MILLRACE_CLUSTER_DIR,
                           str(getattr(settings, "MILLRACE_CONNECT_URL", "")).rstrip("/"))
    # KafkaCluster values, or their fields as dicts (a settings override in JSON)
    clusters = (default, *(c if isinstance(c, KafkaCluster) else KafkaCluster(**c)
                           for c in settings.KAFKA_EXTRA_CLUSTERS))
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise ValueError(f"cluster names must be unique: {names}")
    urls: Mapping[str, str] = getattr(settings, "KAFKA_CONNECT_URLS", {})
    if unknown := sorted(set(urls) - set(names)):
        raise ValueError(f"Kafka Connect URLs for {', '.join(unknown)}: no such cluster "
                         f"(configured: {', '.join(names)})")
    return tuple(replace(c, connect_url=urls[c.name]) if c.name in urls else c
                 for c in clusters)


def by_name(clusters: tuple[KafkaCluster, ...], name: str | None) -> KafkaCluster | None:
    """The cluster called `name`; None (not the default) for an unknown name."""
    return next((c for c in clusters if c.name == name), None)


def _checked(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(f"cluster name {name!r}: letters, digits, '_' and '-' only")
    return name
