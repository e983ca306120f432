"""The control center's JSON API (DRF, documented by drf-spectacular at /api/docs/) under
/api/v1/: what the pages show, and the same state changes, through `controlcenter.actions`.
"""
