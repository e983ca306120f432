"""`python -m brokercluster ...`: run the supervisor, or ask a running one to act.

    python -m brokercluster --brokers 3 --base-port 9092 --data-dir D   # foreground
    python -m brokercluster status --data-dir D [--json]
    python -m brokercluster kill 2 --data-dir D    # stop, kill, pause, resume, start, restart

Exit status: 0 done, 1 refused or no supervisor, 2 bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from brokercluster.control import ACTIONS, NoSupervisor, request
from brokercluster.layout import SOCKET_NAME, ClusterLayout, LayoutError
from brokercluster.probe import probe_security
from brokercluster.supervisor import Supervisor
from brokercore.config import BrokerConfig, ConfigError
from brokercore.security.scram import parse_add_scram

DESCRIPTION = """\
Without ACTION: run a cluster of broker processes in the foreground until Ctrl-C.
With ACTION: ask the supervisor running at --data-dir to act on one broker:
stop (SIGTERM), kill (SIGKILL), pause (SIGSTOP), resume (SIGCONT), start, restart, or
show the status of all of them. A stopped or killed broker stays down until `start`."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m brokercluster", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", nargs="?", choices=ACTIONS, help="omit to run the cluster")
    parser.add_argument("id", nargs="?", type=int, help="broker id (every action but status)")
    parser.add_argument("--data-dir", type=Path, required=True,
                        help=f"brokers' data, their logs and the control socket {SOCKET_NAME}")
    parser.add_argument("--brokers", type=int, help="how many brokers to run (default 3)")
    parser.add_argument("--base-port", type=int,
                        help="broker i serves Kafka on BASE+i-1, the controller quorum on "
                             "BASE+100+i-1, metrics on BASE+200+i-1 (default 9092)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for every broker (Kafka's names), repeatable")
    parser.add_argument("--add-scram", action="append", default=[],
                        metavar="MECHANISM=[name=..,password=..]",
                        help="a SCRAM user for the new cluster (kafka-storage format "
                             "--add-scram), repeatable")
    parser.add_argument("--kafka-listener", default=None, metavar="NAME",
                        help="the name of each broker's Kafka listener (default PLAINTEXT); "
                             "secure it with --override listener.security.protocol.map=...")
    parser.add_argument("--json", action="store_true", help="machine-readable answer")
    args = parser.parse_args(argv)
    if args.action is None:
        if args.id is not None or args.json:
            parser.error("a broker id and --json go with an ACTION")
    else:
        if (args.brokers is not None or args.base_port is not None or args.override
                or args.add_scram or args.kafka_listener):
            parser.error("--brokers, --base-port, --override, --add-scram and --kafka-listener "
                         "are for starting the cluster")
        if (args.action == "status") != (args.id is None):
            parser.error("status takes no broker id" if args.action == "status"
                         else f"{args.action} needs a broker id")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    data_dir: Path = args.data_dir.resolve()
    if args.action is None:
        return run(data_dir, args.brokers or 3, args.base_port or 9092, args.override,
                   args.add_scram, args.kafka_listener or "PLAINTEXT")
    message: dict[str, Any] = {"action": args.action}
    if args.id is not None:
        message["id"] = args.id
    try:
        answer = request(data_dir / SOCKET_NAME, message)
    except NoSupervisor as exc:
        answer = {"ok": False, "error": str(exc)}
    except (OSError, ValueError) as exc:
        answer = {"ok": False, "error": f"the supervisor at {data_dir} did not answer: {exc}"}
    if args.json:
        print(json.dumps(answer, indent=2))
    elif not answer.get("ok"):
        print(f"brokercluster: {answer.get('error')}", file=sys.stderr)
    elif args.action == "status":
        print(format_status(answer))
    else:
        print(answer["message"])
    return 0 if answer.get("ok") else 1


def run(data_dir: Path, brokers: int, base_port: int, overrides: list[str],
        add_scram: list[str] | None = None, kafka_listener: str = "PLAINTEXT") -> int:
    extra = dict(item.split("=", 1) for item in overrides if "=" in item)
    try:
        layout = ClusterLayout(brokers, base_port, data_dir, kafka_listener)
        # Checked once here, so that a typo fails now rather than in N brokers' logs; the
        # first node's whole config also gives the status probe its way in (probe.py).
        BrokerConfig.load(None, overrides)
        probe_security(layout, extra)
        for user in add_scram or []:
            parse_add_scram(user)
    except (LayoutError, ConfigError, ValueError) as exc:
        print(f"brokercluster: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(Supervisor(layout, extra, add_scram=add_scram).run())
    except NoSupervisor as exc:
        print(f"brokercluster: {exc}", file=sys.stderr)
        return 1


def format_status(status: dict[str, Any]) -> str:
    active = status.get("active_controller")
    lines = [
        f"cluster at {status['data_dir']}",
        f"bootstrap servers: {status['bootstrap']}",
        f"active controller: {active if active is not None else 'unknown (no broker answered)'}",
        "",
        f"{'ID':>3}  {'STATE':<20}  {'PID':>7}  {'KAFKA':>5}  {'CONTROLLER':>10}  "
        f"{'LEADS':>5}  SEES",
    ]
    for b in status["brokers"]:
        leads = "-" if b["leaders"] is None else str(b["leaders"])
        sees = "-" if b["sees"] is None else ",".join(str(i) for i in b["sees"])
        lines.append(
            f"{b['id']:>3}  {b['state_text']:<20}  {b['pid'] or '-':>7}  {b['kafka_port']:>5}  "
            f"{b['controller_port']:>10}  {leads:>5}  {sees}"
        )
    return "\n".join(lines)
