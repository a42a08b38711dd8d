"""Shared test helpers: real servers on loopback ports (see :mod:`support.servers`)."""
