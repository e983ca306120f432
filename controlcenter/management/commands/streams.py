"""`manage.py streams list|create|lag-anomaly|stop|restart|delete|run-sql`: the Streams page
from a shell.

Changes are made as the platform (audited as "platform"), through the same actions as the
page and the API; validation and ad-hoc queries start this process's own Spark session.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlcenter.actions import ActionError
from controlcenter.streams import actions
from controlcenter.streams.models import OutputMode, StreamQuery, ValueFormat


class Command(BaseCommand):
    help = "Persistent and ad-hoc Spark SQL queries over topics (the Streams page)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        sub.add_parser("list", help="every persistent query, its state and latest progress")
        create = sub.add_parser("create", help="validate a query in Spark and start it")
        create.add_argument("name")
        create.add_argument("sql")
        create.add_argument("--output-topic", required=True)
        create.add_argument("--key-column", default="")
        create.add_argument("--format", choices=ValueFormat.values, default=ValueFormat.JSON)
        create.add_argument("--output-mode", choices=OutputMode.values,
                            default=OutputMode.APPEND)
        anomaly = sub.add_parser("lag-anomaly", help="start the built-in lag-anomaly query "
                                 "(alerts on the consumer groups' pages)")
        anomaly.add_argument("name", nargs="?", default="lag-anomalies")
        anomaly.add_argument("--k", type=float, default=3.0)
        anomaly.add_argument("--window", type=int, default=60)
        anomaly.add_argument("--min-history", type=int, default=10)
        for verb in ("stop", "restart", "delete"):
            sub.add_parser(verb, help=f"{verb} a persistent query").add_argument("name")
        run = sub.add_parser("run-sql", help="an ad-hoc batch query; rows as JSON lines")
        run.add_argument("sql")
        run.add_argument("--limit", type=int, default=100)
        run.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        verb = opts["verb"]
        try:
            if verb == "list":
                self._list()
            elif verb == "create":
                query = actions.create_stream_query(None, actions.QuerySpec(
                    opts["name"], opts["sql"], opts["output_topic"], opts["key_column"],
                    opts["format"], opts["output_mode"]))
                self.stdout.write(f"{query.name} {query.state} reads "
                                  f"{','.join(query.source_topics)}")
            elif verb == "lag-anomaly":
                query = actions.create_stream_query(None, actions.lag_anomaly_spec(
                    opts["name"], {"k": opts["k"], "window": opts["window"],
                                   "min_history": opts["min_history"]}))
                self.stdout.write(f"{query.name} {query.state} writes {query.output_topic}")
            elif verb == "run-sql":
                rows = actions.run_adhoc_query(None, opts["sql"], opts["limit"], opts["timeout"])
                for row in rows.rows:
                    self.stdout.write(json.dumps(dict(zip(rows.columns, row, strict=True)),
                                                 default=str))
            else:
                self._command(verb, opts["name"])
        except ActionError as exc:
            raise CommandError(f"{exc.code_name or 'ERROR'}: {exc.message}") from exc

    def _list(self) -> None:
        for q in StreamQuery.objects.all():
            p = q.last_progress or {}
            self.stdout.write(f"{q.name}\t{q.state}\t{','.join(q.source_topics)} -> "
                              f"{q.output_topic}\tbatch={p.get('batch_id', '-')}\t"
                              f"lag={p.get('lag', '-')}\trestarts={q.restarts}"
                              + (f"\terror={q.last_error.splitlines()[0]}" if q.last_error
                                 else ""))

    def _command(self, verb: str, name: str) -> None:
        query = StreamQuery.objects.filter(name=name).first()
        if query is None:
            raise CommandError(f"No stream query {name}.")
        if verb == "delete":
            actions.delete_stream_query(None, query)
            self.stdout.write(f"{name} deleted")
            return
        verbs = {"stop": actions.stop_stream_query, "restart": actions.restart_stream_query}
        query = verbs[verb](None, query)
        self.stdout.write(f"{name} {query.state}")
