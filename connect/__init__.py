"""A Kafka Connect worker (Django-free): distributed herder, Connect REST API, converters and
connectors. See connect/README.md."""

__version__ = "4.0.0-millrace"
