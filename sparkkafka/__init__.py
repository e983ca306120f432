"""Spark's Kafka connector for Millrace (and any Kafka cluster): the ``millrace-kafka`` Python
Data Source — batch and streaming reads, a batch and streaming sink with exactly-once — and
Avro, JSON Schema and Protobuf columns through the schema registry (``sparkkafka.formats``:
decode on read, encode on write). Django-free; the lag jobs and stream queries import it,
and Spark executors unpickle it. ``from sparkkafka.datasource import register``.
"""
