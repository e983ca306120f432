"""The REST Proxy API v3, under v3/clusters/{cluster_id}: clusters, brokers, topics,
configs, partitions, produce (records, records:batch), consumer groups and their lag."""
