"""Cluster metadata: records, the image they build, and the controller that writes them."""
