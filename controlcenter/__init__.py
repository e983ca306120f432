"""The Millrace control center: the live dashboards app (pages, live pushes, actions, the
collector, lag analytics, its JSON API)."""
