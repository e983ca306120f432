"""Consumer instances (the v2 consumer API): one librdkafka consumer owned by one worker thread,
the process registry of instances, forwarding to the worker that owns one, fetched records as
REST JSON, and the views."""
