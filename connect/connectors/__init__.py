"""The connectors that ship with the worker, one module per connector."""
