"""The collector: one process per platform samples the cluster into the read model.

sampler (I/O through clusterclient) -> analysis (laganalysis rules, in-memory windows) ->
store (changed rows, bounded history) + history (internal Kafka topics) + metrics
(kafka-lag-exporter names) + events (fragments pushed to the live websocket groups).
"""
