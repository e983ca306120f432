"""The platform's one way to any Kafka cluster (README.md)."""
