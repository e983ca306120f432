"""Schemas of the requests clusterclient's own connection sends that kafka-python 3's codec
does not ship: KIP-848's ConsumerGroupDescribe (69), as Kafka 4.0 defines it (the same
definitions brokercore serves it from; clusterclient may not import brokercore)."""
