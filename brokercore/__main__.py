"""`python -m brokercore --config server.properties [--override key=value ...]`

`python -m brokercluster ...` runs or operates a cluster of them (the `brokercluster` package).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from base64 import b64encode
from pathlib import Path

from brokercore.broker import Broker
from brokercore.config import BrokerConfig, ConfigError
from brokercore.controller.records import UserScramCredentialRecord
from brokercore.controller.scram import write_bootstrap
from brokercore.security.scram import MECHANISM_IDS, new_credential, parse_add_scram
from brokercore.shutdown import close_loop


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m brokercore", description="Run one Millrace broker (Kafka wire protocol)."
    )
    parser.add_argument("--config", type=Path, help="a server.properties file")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="set a config key (Kafka's names), repeatable; wins over --config",
    )
    parser.add_argument(
        "--add-scram", action="append", default=[], metavar="MECHANISM=[name=..,password=..]",
        help="a SCRAM user for a new cluster, as kafka-storage format --add-scram takes it "
             "(repeatable); written to the metadata log dir, used once when the cluster "
             "first forms",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def add_scram_users(config: BrokerConfig, specs: list[str]) -> None:
    """Write the bootstrap credentials (never the passwords) for a cluster not yet formed."""
    records = []
    for spec in specs:
        mechanism, name, password, iterations = parse_add_scram(spec)
        credential = new_credential(mechanism, password, iterations)
        records.append(UserScramCredentialRecord(
            name, MECHANISM_IDS[mechanism], b64encode(credential.salt).decode(),
            b64encode(credential.stored_key).decode(),
            b64encode(credential.server_key).decode(), iterations))
    if records:
        write_bootstrap(config.metadata_log_dir, records)


async def serve(config: BrokerConfig) -> int:
    """Run the broker until SIGINT or SIGTERM (0), or until every log dir has failed (1)."""
    broker = Broker(config)
    await broker.start()
    a = broker.advertised
    # One line on stdout that supervisors and tests wait for.
    print(f"millrace broker {broker.node_id} ready on {a.name}://{a.host}:{a.port} "
          f"cluster {broker.cluster_id}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopping = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(broker.failed.wait())]
    await asyncio.wait(stopping, return_when=asyncio.FIRST_COMPLETED)
    for waiting in stopping:
        waiting.cancel()
    await broker.stop()
    return 1 if broker.failed.is_set() else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = BrokerConfig.load(args.config, args.override)
        add_scram_users(config, args.add_scram)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"brokercore: {exc}", file=sys.stderr)
        return 2
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(serve(config))
    except (ConfigError, OSError) as exc:  # a listener's keys or JAAS line, read at start
        print(f"brokercore: {exc}", file=sys.stderr)
        return 2
    finally:
        close_loop(loop)  # asyncio.run would wait without limit for tasks left running


if __name__ == "__main__":
    sys.exit(main())
