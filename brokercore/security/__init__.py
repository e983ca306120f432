"""Listeners, TLS and SASL: who is on the other end of a connection."""
