"""Replication: this broker's partition replicas and the fetchers that copy leaders' logs."""
