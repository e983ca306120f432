"""Confluent-compatible Avro schema registry."""
