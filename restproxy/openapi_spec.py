"""The REST proxy's OpenAPI description (v2 and v3), maintained by hand beside the views.

Independent of how the views are written, so it survives their moving to plain async
views; `tests/restproxy/test_openapi.py` keeps it honest: every route is here, and
every operation answers its own example. `millrace/openapi.py` merges it with the
registry's and serves one document at `/api/schema/`. Examples build on each other in
document order: the v3 topic `orders` is created first, the v2 consumer instance
`example-group` / `example-instance` before it is used, and deletions come last.
"""

from __future__ import annotations

from typing import Any

V2, V3 = "REST proxy v2", "REST proxy v3"
V2_JSON = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA_V2 = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"
V3_JSON = "application/json"
TOPIC, GROUP, INSTANCE = "orders", "example-group", "example-instance"


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def obj(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


STR, INT, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
LINK = obj(related=STR)
RESOURCE = obj(["kind", "metadata"], kind=STR, metadata=obj(
    self=STR, resource_name={"type": "string", "nullable": True}))


def resource(**props: Any) -> dict[str, Any]:
    return {"allOf": [ref("Resource"), obj(**props)]}


def collection(item: str) -> dict[str, Any]:
    return obj(["kind", "metadata", "data"], kind=STR, metadata=obj(self=STR, next={
        "type": "string", "nullable": True}), data=array(ref(item)))


PARTITION_OFFSETS = obj(partition=INT, offset=INT, error_code={"type": "integer",
                                                                 "nullable": True},
                        error={"type": "string", "nullable": True})
TOPIC_PARTITIONS = obj(["partitions"], partitions=array(obj(["topic", "partition"],
                                                            topic=STR, partition=INT)))
TOPIC_OFFSETS = obj(["offsets"], offsets=array(obj(["topic", "partition", "offset"],
                                                   topic=STR, partition=INT, offset=INT)))
V3_DATA = obj(type={"type": "string", "enum": ["BINARY", "JSON", "STRING", "AVRO",
                                                "JSONSCHEMA", "PROTOBUF"],
                    "description": "left out: the schema's own type when schema_id or "
                                   "schema_version is given, AVRO with an inline schema, "
                                   "else BINARY"},
              data={"description": "base64 for BINARY; any JSON for JSON; JSON matching "
                                   "the schema for AVRO, JSONSCHEMA and PROTOBUF (the "
                                   "proto3 JSON mapping); a mismatch is 42203"},
              schema={"type": "string", "description": "registered under `subject`"},
              schema_id=INT, schema_version=INT,
              subject={"type": "string", "description": "default `{topic}-key|value`"})

CONSUMER_CONFIG: dict[str, Any] = {
    "auto.offset.reset": {"type": "string", "enum": ["earliest", "latest"]},
    "auto.commit.enable": STR, "fetch.min.bytes": STR, "consumer.request.timeout.ms": STR}

COMPONENTS: dict[str, Any] = {
    "ProxyError": obj(["error_code", "message"], error_code={"type": "integer", "example": 40401},
                      message={"type": "string", "example": "Topic orders not found."}),
    "Resource": RESOURCE,
    "V2ProduceRequest": obj(
        ["records"], records=array(obj(["value"], key={}, value={}, partition=INT)),
        key_schema=STR, value_schema=STR, key_schema_id=INT, value_schema_id=INT),
    "V2ProduceResponse": obj(["offsets"], key_schema_id={"type": "integer", "nullable": True},
                             value_schema_id={"type": "integer", "nullable": True},
                             offsets=array(PARTITION_OFFSETS)),
    "V2Topic": obj(["name"], name=STR, configs={"type": "object"},
                   partitions=array(ref("V2Partition"))),
    "V2Partition": obj(["partition", "leader"], partition=INT, leader=INT, replicas=array(
        obj(broker=INT, leader=BOOL, in_sync=BOOL))),
    "V2ConsumerRequest": {**obj(
        name=STR, format={"type": "string",
                         "enum": ["binary", "json", "avro", "jsonschema", "protobuf"]},
        **CONSUMER_CONFIG),
        "example": {"name": INSTANCE, "format": "json", "auto.offset.reset": "earliest"}},
    "V2Consumer": obj(["instance_id", "base_uri"], instance_id=STR, base_uri=STR),
    "V2Subscription": {**obj(topics=array(STR), topic_pattern=STR),
                       "example": {"topics": [TOPIC]}},
    "V2Partitions": {**TOPIC_PARTITIONS,
                     "example": {"partitions": [{"topic": TOPIC, "partition": 0}]}},
    "V2Offsets": {**TOPIC_OFFSETS,
                  "example": {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}},
    "V2Record": obj(["topic", "partition", "offset"], topic=STR, key={}, value={},
                    partition=INT, offset=INT, timestamp=INT,
                    headers=array(obj(name=STR, value=STR))),
    "V2CommittedOffsets": obj(["offsets"], offsets=array(obj(
        topic=STR, partition=INT, offset=INT, metadata=STR))),
    "V3Cluster": resource(cluster_id=STR, controller=LINK, brokers=LINK, topics=LINK,
                          consumer_groups=LINK),
    "V3Broker": resource(cluster_id=STR, broker_id=INT, host=STR, port=INT, configs=LINK),
    "V3Config": resource(name=STR, value={"type": "string", "nullable": True},
                         is_default=BOOL, is_read_only=BOOL, is_sensitive=BOOL, source=STR,
                         synonyms=array(obj(name=STR, value=STR, source=STR))),
    "V3Topic": resource(topic_name=STR, is_internal=BOOL, replication_factor=INT,
                        partitions_count=INT, partitions=LINK, configs=LINK),
    "V3CreateTopic": {**obj(["topic_name"], topic_name=STR, partitions_count=INT,
                            replication_factor=INT, validate_only=BOOL,
                            configs=array(obj(name=STR, value=STR))),
                      "example": {"topic_name": TOPIC, "partitions_count": 3}},
    "V3PartitionCount": {**obj(["partitions_count"], partitions_count=INT),
                         "example": {"partitions_count": 4}},
    "V3ConfigValue": {**obj(value=STR), "example": {"value": "604800000"}},
    "V3AlterConfigs": {**obj(["data"], validate_only=BOOL, data=array(obj(
        ["name"], name=STR, value=STR, operation={"type": "string",
                                                  "enum": ["SET", "DELETE"]}))),
        "example": {"data": [{"name": "retention.ms", "value": "86400000"}]}},
    "V3Partition": resource(topic_name=STR, partition_id=INT, leader=LINK, replicas=LINK),
    "V3Replica": resource(topic_name=STR, partition_id=INT, broker_id=INT, is_leader=BOOL,
                          is_in_sync=BOOL),
    "V3ProduceRecord": {**obj(partition_id=INT, headers=array(obj(name=STR, value=STR)),
                              key=V3_DATA, value=V3_DATA, timestamp=STR),
                        "example": {"key": {"type": "STRING", "data": "k1"},
                                    "value": {"type": "JSON", "data": {"id": 1}}}},
    "V3ProduceReport": obj(["error_code"], error_code=INT, cluster_id=STR, topic_name=STR,
                           partition_id=INT, offset=INT, timestamp=STR,
                           key={"type": "object", "nullable": True},
                           value={"type": "object", "nullable": True}),
    "V3ProduceBatch": {**obj(["entries"], entries=array({"allOf": [
        obj(["id"], id=STR), ref("V3ProduceRecord")]})),
        "example": {"entries": [{"id": "1", "value": {"type": "JSON", "data": {"id": 2}}}]}},
    "V3ProduceBatchReport": obj(successes=array(ref("V3ProduceReport")),
                                failures=array(ref("V3ProduceReport"))),
    "V3ConsumerGroup": resource(consumer_group_id=STR, is_simple=BOOL, partition_assignor=STR,
                                state=STR, coordinator=LINK, consumers=LINK, lag_summary=LINK),
    "V3Consumer": resource(consumer_group_id=STR, consumer_id=STR, instance_id={
        "type": "string", "nullable": True}, client_id=STR, assignments=LINK),
    "V3Assignment": resource(consumer_group_id=STR, consumer_id=STR, topic_name=STR,
                             partition_id=INT, partition=LINK, lag=LINK),
    "V3Lag": resource(consumer_group_id=STR, topic_name=STR, partition_id=INT,
                      current_offset=INT, log_end_offset=INT, lag=INT, consumer_id=STR,
                      client_id=STR),
    "V3LagSummary": resource(consumer_group_id=STR, max_lag=INT, total_lag=INT,
                             max_lag_topic_name=STR, max_lag_partition_id=INT),
}
ERRORS = {
    "400": "Bad request (400, 40002)",
    "404": "Topic, partition, consumer instance or group not found (40401, 40402, 40403, "
           "40405)",
    "406": "The Accept header names another embedded format (40601)",
    "409": "Conflict: instance exists, illegal state (40902, 40903)",
    "415": "Unsupported Content-Type",
    "422": "Invalid payload, schema or serialization (42201-42208)",
    "500": "Kafka error (50002)",
}


def path_param(name: str, example: Any, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": kind},
            "example": example}


def query(name: str, about: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": "integer"},
            "description": about}


CLUSTER = path_param("cluster_id", "MkU3OEVBNTcwNTJENDM2Qg")
P = {"topic": path_param("topic", TOPIC), "partition": path_param("partition", 0, "integer"),
     "group": path_param("group", GROUP), "instance": path_param("instance", INSTANCE),
     "broker_id": path_param("broker_id", 1, "integer"), "consumer": path_param(
         "consumer", "rest-consumer-1"), "name": path_param("name", "retention.ms")}


def op(tag: str, summary: str, ok: dict[str, Any] | None, *, params: tuple[str, ...] = (),
       body: str | None = None, status: str = "200", media: str | None = None,
       errors: tuple[str, ...] = ("404", "500"), extra: list[dict[str, Any]] | None = None,
       in_cluster: bool = True) -> dict[str, Any]:
    v3 = tag == V3
    media = media or (V3_JSON if v3 else V2_JSON)
    content = {media: {"schema": ok}} if ok is not None else None
    error = {"content": {V3_JSON if v3 else V2_JSON: {"schema": ref("ProxyError")}}}
    operation: dict[str, Any] = {
        "tags": [tag], "summary": summary,
        "parameters": ([CLUSTER] if v3 and in_cluster else []) + [P[p] for p in params]
        + (extra or []),
        "responses": {status: {"description": "OK" if ok is not None else "No content",
                               **({"content": content} if content else {})},
                      **{code: {**error, "description": ERRORS[code]} for code in errors}},
    }
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {
            V3_JSON if v3 else V2_JSON: {
                "schema": ref(body), "example": COMPONENTS[body]["example"]}}}
    return operation


def produce_v2(summary: str, params: tuple[str, ...]) -> dict[str, Any]:
    operation = op(V2, summary, ref("V2ProduceResponse"), params=params,
                   errors=("404", "415", "422", "500"))
    example = {"records": [{"key": "k1", "value": {"id": 1}}]}
    operation["requestBody"] = {"required": True, "content": {
        JSON_V2: {"schema": ref("V2ProduceRequest"), "example": example},
        BINARY_V2: {"schema": ref("V2ProduceRequest"),
                    "example": {"records": [{"value": "aGVsbG8="}]}},
        AVRO_V2: {"schema": ref("V2ProduceRequest"), "example": {
            "value_schema": '{"type":"string"}', "records": [{"value": "hello"}]}},
        JSONSCHEMA_V2: {"schema": ref("V2ProduceRequest"), "example": {
            "value_schema": '{"type":"object","properties":{"id":{"type":"integer"}}}',
            "records": [{"value": {"id": 1}}]}},
        PROTOBUF_V2: {"schema": ref("V2ProduceRequest"), "example": {
            "value_schema": 'syntax = "proto3"; message Order { int64 id = 1; }',
            "records": [{"value": {"id": "1"}}]}}}}
    return operation


INSTANCE_PATH = "/consumers/{group}/instances/{instance}"
GI = ("group", "instance")
C = "/v3/clusters/{cluster_id}"
T = C + "/topics/{topic}"
G = C + "/consumer-groups/{group}"
STREAM_LIMITS = [query("max_records", "end after this many records"),
                 query("max_bytes", "end before passing this many bytes of keys and values"),
                 query("timeout", "end after this many milliseconds")]

PATHS: dict[str, dict[str, Any]] = {
    "/": {"get": op(V2, "Root (`{}`; a browser gets an HTML index)",
                    {"type": "object"}, errors=("500",))},
    "/v3/clusters": {"get": op(V3, "Clusters (this one)", collection("V3Cluster"),
                               errors=("500",), in_cluster=False)},
    C: {"get": op(V3, "The cluster", ref("V3Cluster"))},
    C + "/topics": {
        "post": op(V3, "Create a topic", ref("V3Topic"), body="V3CreateTopic", status="201",
                   errors=("400", "500")),
        "get": op(V3, "Topics", collection("V3Topic"))},
    "/topics": {"get": op(V2, "Topic names", array(STR), errors=("500",))},
    "/topics/{topic}": {"get": op(V2, "A topic", ref("V2Topic"), params=("topic",)),
                        "post": produce_v2("Produce to a topic", ("topic",))},
    "/topics/{topic}/partitions": {"get": op(V2, "Partitions", array(ref("V2Partition")),
                                             params=("topic",))},
    "/topics/{topic}/partitions/{partition}": {
        "get": op(V2, "A partition", ref("V2Partition"), params=("topic", "partition")),
        "post": produce_v2("Produce to a partition", ("topic", "partition"))},
    "/topics/{topic}/partitions/{partition}/offsets": {"get": op(
        V2, "A partition's log start and end offsets",
        obj(beginning_offset=INT, end_offset=INT), params=("topic", "partition"))},
    "/brokers": {"get": op(V2, "Broker ids", obj(brokers=array(INT)), errors=("500",))},
    "/consumers/{group}": {"post": op(
        V2, "Create a consumer instance", ref("V2Consumer"), params=("group",),
        body="V2ConsumerRequest", errors=("409", "422", "500"))},
    # Deletions run last and in reverse order: the instance goes after its subscription.
    INSTANCE_PATH: {"delete": op(V2, "Delete a consumer instance", None, params=GI,
                                 status="204")},
    f"{INSTANCE_PATH}/subscription": {
        "post": op(V2, "Subscribe to topics or a pattern", None, params=GI, status="204",
                   body="V2Subscription", errors=("404", "409", "422")),
        "get": op(V2, "The subscription", obj(topics=array(STR)), params=GI),
        "delete": op(V2, "Unsubscribe", None, params=GI, status="204")},
    f"{INSTANCE_PATH}/records": {"get": op(
        V2, "Fetch records (an undecodable one answers 42207 naming topic, partition and "
            "offset, until you seek past it)", array(ref("V2Record")), params=GI,
        media=JSON_V2, errors=("404", "406", "422"),
        extra=[query("timeout", "ms to wait for records"), query("max_bytes", "size cap")])},
    f"{INSTANCE_PATH}/records/stream": {"get": op(
        V2, "Stream records as NDJSON (or server-sent events) — a Millrace extension",
        {"type": "string", "description": "one v2 record per line"}, params=GI,
        media="application/x-ndjson", errors=("404", "406", "422"),
        extra=[*STREAM_LIMITS[:2], {**STREAM_LIMITS[2], "example": 100}])},
}
PATHS[f"{INSTANCE_PATH}/records/stream"]["get"]["responses"]["200"]["content"][
    "text/event-stream"] = {"schema": {"type": "string", "description": "`id:`/`data:` events"}}
PATHS |= {
    f"{INSTANCE_PATH}/offsets": {
        "post": op(V2, "Commit offsets (all fetched records without a body)", None,
                   params=GI, status="204", body="V2Offsets", errors=("404", "422", "500")),
        "get": op(V2, "Committed offsets (a JSON body names the partitions)",
                  ref("V2CommittedOffsets"), params=GI, body="V2Partitions",
                  errors=("404", "422", "500"))},
    f"{INSTANCE_PATH}/assignments": {
        "post": op(V2, "Assign partitions manually", None, params=GI, status="204",
                   body="V2Partitions", errors=("404", "409", "422")),
        "get": op(V2, "Assigned partitions", TOPIC_PARTITIONS, params=GI)},
    f"{INSTANCE_PATH}/positions": {"post": op(
        V2, "Seek to offsets (or timestamps: `{timestamps: [...]}`)", None, params=GI,
        status="204", body="V2Offsets", errors=("404", "409", "422"))},
    f"{INSTANCE_PATH}/positions/beginning": {"post": op(
        V2, "Seek to the beginning", None, params=GI, status="204", body="V2Partitions",
        errors=("404", "409", "422"))},
    f"{INSTANCE_PATH}/positions/end": {"post": op(
        V2, "Seek to the end", None, params=GI, status="204", body="V2Partitions",
        errors=("404", "409", "422"))},
    C + "/brokers": {"get": op(V3, "Brokers", collection("V3Broker"))},
    C + "/brokers/{broker_id}": {"get": op(V3, "A broker", ref("V3Broker"),
                                           params=("broker_id",))},
    C + "/brokers/{broker_id}/configs": {"get": op(
        V3, "A broker's configs", collection("V3Config"), params=("broker_id",))},
    C + "/brokers/{broker_id}/configs/{name}": {"get": op(
        V3, "A broker config", ref("V3Config"), params=("broker_id",), extra=[
            path_param("name", "num.partitions")])},
    T: {"get": op(V3, "A topic", ref("V3Topic"), params=("topic",)),
        "patch": op(V3, "Add partitions", ref("V3Topic"), params=("topic",),
                    body="V3PartitionCount", errors=("400", "404", "500")),
        "delete": op(V3, "Delete a topic", None, params=("topic",), status="204")},
    T + "/configs": {"get": op(V3, "A topic's configs", collection("V3Config"),
                               params=("topic",))},
    T + "/configs:alter": {"post": op(V3, "Alter several topic configs", None,
                                      params=("topic",), body="V3AlterConfigs", status="204",
                                      errors=("400", "404", "500"))},
    T + "/configs/{name}": {
        "get": op(V3, "A topic config", ref("V3Config"), params=("topic", "name")),
        "put": op(V3, "Set a topic config", None, params=("topic", "name"), status="204",
                  body="V3ConfigValue", errors=("400", "404", "500")),
        "delete": op(V3, "Reset a topic config to its default", None,
                     params=("topic", "name"), status="204")},
    T + "/partitions": {"get": op(V3, "Partitions", collection("V3Partition"),
                                  params=("topic",))},
    T + "/partitions/{partition}": {"get": op(V3, "A partition", ref("V3Partition"),
                                              params=("topic", "partition"))},
    T + "/partitions/{partition}/replicas": {"get": op(
        V3, "Replicas", collection("V3Replica"), params=("topic", "partition"))},
    T + "/records": {"post": op(
        V3, "Produce a record (several concatenated, or chunked, stream NDJSON reports)",
        ref("V3ProduceReport"), params=("topic",), body="V3ProduceRecord",
        errors=("400", "404", "422", "500"))},
    T + "/records:batch": {"post": op(
        V3, "Produce a batch of records", ref("V3ProduceBatchReport"), params=("topic",),
        body="V3ProduceBatch", status="207", errors=("400", "404", "422"))},
    C + "/consumer-groups": {"get": op(V3, "Consumer groups",
                                       collection("V3ConsumerGroup"))},
    G: {"get": op(V3, "A consumer group", ref("V3ConsumerGroup"), params=("group",))},
    G + "/consumers": {"get": op(V3, "Members", collection("V3Consumer"), params=("group",))},
    G + "/consumers/{consumer}": {"get": op(V3, "A member", ref("V3Consumer"),
                                            params=("group", "consumer"))},
    G + "/consumers/{consumer}/assignments": {"get": op(
        V3, "A member's partitions", collection("V3Assignment"),
        params=("group", "consumer"))},
    G + "/lags": {"get": op(V3, "Lag per partition", collection("V3Lag"), params=("group",))},
    G + "/lags/{topic}/partitions/{partition}": {"get": op(
        V3, "Lag of one partition", ref("V3Lag"), params=("group", "topic", "partition"))},
    G + "/lag-summary": {"get": op(V3, "Lag summary", ref("V3LagSummary"),
                                   params=("group",))},
}
