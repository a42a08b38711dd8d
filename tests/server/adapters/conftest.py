"""Framework adapter tests: each framework's own offline test double, evaluated over HTTP.

This folder is on ``sys.path`` (pytest's prepend import mode), so the test modules share
the scenario in ``adapterkit``.
"""
