"""Confluent REST Proxy API (v2 and v3), over any Kafka cluster."""
