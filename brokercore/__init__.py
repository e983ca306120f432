"""Pure-Python asyncio Kafka-wire-compatible broker. Never imports Django."""
