"""The Kafka wire protocol: framing, headers, the API registry and error codes. No I/O."""
