"""A data generator source in the spirit of Confluent's kafka-connect-datagen: realistic
records from a few quickstart schemas, so that a newcomer sees data flow at once.

Keys as Confluent's connector takes them: `kafka.topic`, `quickstart` (users, pageviews,
orders), `max.interval` (most milliseconds between records, 500), `iterations` (records per
task, -1 for no end), `schema.keyfield` (the field that becomes the key, else the
quickstart's own) and `random.seed`. Values are Connect structs, so JsonConverter (or a
schema-aware converter) writes them with their schema. Arbitrary Avro schemas
(`schema.string`, `schema.filename`) are not supported.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from connect.api import STRING_SCHEMA, Schema, SourceConnector, SourceRecord, SourceTask, Task
from connect.configdef import ConfigDef, ConfigException, Importance, Type, at_least, one_of
from connect.configdef import non_empty_string as non_empty

INT32, INT64, STRING = Schema("int32"), Schema("int64"), Schema("string")
DOUBLE = Schema("float64")
Generator = Callable[[random.Random, int], dict[str, Any]]


def _users(rng: random.Random, n: int) -> dict[str, Any]:
    return {"registertime": int(time.time() * 1000) - rng.randrange(10**10),
            "userid": f"User_{rng.randint(1, 9)}", "regionid": f"Region_{rng.randint(1, 9)}",
            "gender": rng.choice(["MALE", "FEMALE", "OTHER"])}


def _pageviews(rng: random.Random, n: int) -> dict[str, Any]:
    return {"viewtime": int(time.time() * 1000), "userid": f"User_{rng.randint(1, 9)}",
            "pageid": f"Page_{rng.randint(1, 99)}"}


def _orders(rng: random.Random, n: int) -> dict[str, Any]:
    address = {"city": f"City_{rng.randint(1, 99)}", "state": f"State_{rng.randint(1, 99)}",
               "zipcode": rng.randint(10000, 99999)}
    return {"ordertime": int(time.time() * 1000), "orderid": n,
            "itemid": f"Item_{rng.randint(1, 999)}",
            "orderunits": round(rng.uniform(0.1, 10), 2), "address": address}


def _struct(name: str, **fields: Schema) -> Schema:
    return Schema("struct", name=name, fields=tuple(fields.items()))


QUICKSTARTS: dict[str, tuple[Schema, str, Generator]] = {
    "users": (_struct("ksql.users", registertime=INT64, userid=STRING, regionid=STRING,
                      gender=STRING), "userid", _users),
    "pageviews": (_struct("ksql.pageviews", viewtime=INT64, userid=STRING, pageid=STRING),
                  "viewtime", _pageviews),
    "orders": (_struct("ksql.orders", ordertime=INT64, orderid=INT32, itemid=STRING,
                       orderunits=DOUBLE, address=_struct(
                           "ksql.address", city=STRING, state=STRING, zipcode=INT64)),
               "orderid", _orders),
}


def _no_custom_schema(name: str, value: Any) -> None:
    if value:
        raise ConfigException(f"{name} is not supported by this datagen; use quickstart")


class DatagenConnector(SourceConnector):
    kafka_class = "io.confluent.kafka.connect.datagen.DatagenConnector"

    def version(self) -> str:
        return "0.6.5"

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("kafka.topic", Type.STRING, "", Importance.HIGH, "Topic to write to",
                        validator=non_empty)
                .define("quickstart", Type.STRING, "users", Importance.HIGH,
                        "Name of the quickstart schema to use",
                        validator=one_of(*QUICKSTARTS), recommended=tuple(QUICKSTARTS))
                .define("max.interval", Type.LONG, 500, Importance.HIGH,
                        "Max interval between messages (ms)", validator=at_least(0))
                .define("iterations", Type.INT, -1, Importance.HIGH,
                        "Number of messages to send from each task, or less than 1 for "
                        "unlimited")
                .define("schema.keyfield", Type.STRING, "", Importance.MEDIUM,
                        "Name of field to use as the message key")
                .define("random.seed", Type.LONG, None, Importance.LOW,
                        "Seed of the random generator, for repeatable data")
                .define("schema.string", Type.STRING, "", Importance.LOW,
                        "Not supported here", validator=_no_custom_schema)
                .define("schema.filename", Type.STRING, "", Importance.LOW,
                        "Not supported here", validator=_no_custom_schema))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return DatagenTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.id": str(i)} for i in range(max_tasks)]

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return True  # the offset counts records; a restart goes on from the count


class DatagenTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["kafka.topic"]
        self.schema, default_key, self.generate = QUICKSTARTS[props.get("quickstart", "users")]
        self.key_field = props.get("schema.keyfield") or default_key
        self.interval = int(props.get("max.interval", 500)) / 1000
        self.iterations = int(props.get("iterations", -1))
        self.partition = {"task.id": int(props.get("task.id", 0))}
        seed = props.get("random.seed")
        self.rng = random.Random(int(seed) + self.partition["task.id"] if seed else None)
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.count = int(stored["current.iteration"]) if stored else 0

    def poll(self) -> list[SourceRecord] | None:
        if 0 < self.iterations <= self.count:
            time.sleep(1)  # done: idle, as nothing more is to come
            return None
        if self.interval:
            time.sleep(self.rng.uniform(0, self.interval))
        self.count += 1
        value = self.generate(self.rng, self.count)
        return [SourceRecord(self.partition, {"current.iteration": self.count}, self.topic,
                             value, self.schema, key=str(value[self.key_field]),
                             key_schema=STRING_SCHEMA)]

    def stop(self) -> None:
        return None
