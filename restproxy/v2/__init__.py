"""The REST Proxy API v2: topics, partitions, brokers and produce (the consumer API:
instances/)."""
