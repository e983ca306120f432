"""Stream queries: Spark SQL over topics, run as Structured Streaming queries into topics
(persistent queries) or as bounded batch reads (ad-hoc queries). controlcenter/README.md,
"Streams"."""
