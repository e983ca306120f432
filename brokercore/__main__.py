"""`python -m brokercore --config server.properties [--override key=value ...]`

`python -m brokercluster ...` runs or operates a cluster of them (the `brokercluster` package).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from brokercore.broker import Broker
from brokercore.config import BrokerConfig, ConfigError
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
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


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
    except (ConfigError, OSError) as exc:
        print(f"brokercore: {exc}", file=sys.stderr)
        return 2
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(serve(config))
    finally:
        close_loop(loop)  # asyncio.run would wait without limit for tasks left running


if __name__ == "__main__":
    sys.exit(main())
