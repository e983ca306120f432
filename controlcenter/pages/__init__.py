"""The control center's pages: one module per page (views and their forms)."""
