"""The control center's pages: one module per page (README.md)."""
