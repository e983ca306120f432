"""Running a cluster of broker processes: supervisor, control socket and CLI (README.md)."""
