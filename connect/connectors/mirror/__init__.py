"""Replication between clusters as Kafka's MirrorMaker 2 does it (KIP-382), as three Connect
connectors: `source` copies topics and writes offset syncs, `checkpoint` translates consumer
group offsets through them, `heartbeat` shows the flow is alive (connect/README.md,
"Replication between clusters")."""
