"""Lag analytics in the control center: the jobs' forms, running `laganalysis.run` as a
subprocess for a Celery task, and reading its results (README.md, "Lag analytics")."""
