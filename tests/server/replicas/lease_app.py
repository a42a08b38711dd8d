"""The app factory that :mod:`short_lease` serves with uvicorn (it runs in the replica
process, where only this folder is on ``sys.path``)."""

from __future__ import annotations

import os
from pathlib import Path

from evalport.protocol.loader import load_object
from evalport.server import EvalAdapter, Limits
from starlette.types import ASGIApp

__all__ = ["app"]

HERE = Path(__file__).parent


def app() -> ASGIApp:
    """The adapter of one replica: ``$STORE``, ``$EVALPORT_TOKEN``, ``$LEASE_TTL`` and
    ``$TURN_TIMEOUT`` (seconds)."""
    limits = Limits(
        turn_timeout=float(os.environ["TURN_TIMEOUT"]), lease_ttl=float(os.environ["LEASE_TTL"])
    )
    agent = load_object(f"{HERE / 'agents.py'}:agent")
    adapter = EvalAdapter(
        agent, token=os.environ["EVALPORT_TOKEN"], limits=limits, store=os.environ["STORE"]
    )
    return adapter.app()
