"""`python -m connect --config worker.properties`: one distributed worker."""

from __future__ import annotations

import argparse
import gc
import logging
import ssl
import sys

import uvicorn
from confluent_kafka import KafkaException

from connect.config import WorkerConfig
from connect.configdef import ConfigException
from connect.endpoints import router
from connect.herder import Herder
from connect.plugins import Plugins
from connect.rest import ConnectApp
from connect.rest_auth import BasicAuth, BasicAuthConfig
from connect.rest_tls import peer_verify, server_context

log = logging.getLogger("connect")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connect",
                                     description="A Kafka Connect worker (distributed mode).")
    parser.add_argument("--config", required=True, help="worker properties file")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = WorkerConfig.from_file(args.config)
        basic_auth = BasicAuthConfig.from_worker(config)
        # listeners=https://...: checked before the worker joins its group, not after
        tls = server_context(config.props) if config.rest_scheme == "https" else None
        peers = peer_verify(config.props, config.rest_scheme)
    except (OSError, ConfigException) as exc:
        print(f"connect: {exc}", file=sys.stderr)
        return 2
    herder = Herder(config, Plugins(config.plugin_path), peers)
    try:
        herder.start()
    except (KafkaException, TimeoutError) as exc:
        # e.g. a replication factor the cluster cannot give, or no cluster at all
        print(f"connect: could not set up the worker's internal topics: {exc}",
              file=sys.stderr)
        return 1
    app = ConnectApp(herder, router, BasicAuth(basic_auth) if basic_auth else None, peers)
    server = uvicorn.Server(_uvicorn_config(app, config, tls))
    # What the worker has built by now (modules, plugins, the herder) lives as long as the
    # process: kept out of the cyclic collector's full collections, which the tasks' records
    # trigger every few hundred thousand and which walked all of it (bench/README.md).
    gc.collect()
    gc.freeze()
    log.info("Kafka Connect worker %s: REST API on %s", herder.worker_id, config.advertised_url)
    try:
        server.run()
    finally:
        herder.stop()
    return 0


def _uvicorn_config(app: ConnectApp, config: WorkerConfig,
                    tls: ssl.SSLContext | None) -> uvicorn.Config:
    """uvicorn's settings for the REST API; with `tls`, our own context (Kafka's keys,
    rest_tls.py) in place of the one uvicorn would build from file names."""
    served = uvicorn.Config(app, host=config.rest_host or "0.0.0.0", port=config.rest_port,
                            log_level="warning", lifespan="on")
    if tls is not None:
        served.load()
        served.ssl = tls
    return served


if __name__ == "__main__":
    sys.exit(main())
