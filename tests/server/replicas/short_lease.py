"""Replicas whose turn leases are short (``Limits.lease_ttl``), for the lease tests.

``evalport serve`` has no option for the lease, so :func:`short_lease_replicas` runs
real uvicorn processes of ``lease_app:app`` (an app factory: the agent of ``agents.py``
behind an ``EvalAdapter`` whose store, token and limits come from the environment) on free
loopback ports, waits until each answers ``/health`` and stops them (SIGTERM) on exit.
Like :func:`support.replicas.running_replicas`, each is told its name in ``$REPLICA``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from support.replicas import Replica
from support.servers import free_port, running_process

__all__ = ["short_lease_args", "short_lease_env", "short_lease_replicas"]

HERE = Path(__file__).parent


def short_lease_args(port: int) -> list[str]:
    """The command line of one replica (its settings go in the environment)."""
    return [
        sys.executable, "-m", "uvicorn", "lease_app:app", "--factory", "--app-dir", str(HERE),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "--lifespan", "off",
    ]  # fmt: skip


def short_lease_env(
    *, store: str, token: str, lease_ttl: float, turn_timeout: float, name: str
) -> dict[str, str]:
    return {
        "STORE": store,
        "EVALPORT_TOKEN": token,
        "LEASE_TTL": str(lease_ttl),
        "TURN_TIMEOUT": str(turn_timeout),
        "REPLICA": name,
    }


@contextlib.contextmanager
def short_lease_replicas(
    *,
    store: str,
    token: str,
    lease_ttl: float,
    turn_timeout: float = 10.0,
    count: int = 2,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[Replica]]:
    """``count`` replicas named A, B, ... over ``store`` with leases of ``lease_ttl`` s."""
    with contextlib.ExitStack() as stack:
        replicas = []
        for n in range(count):
            name = chr(ord("A") + n)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            settings = short_lease_env(
                store=store, token=token, lease_ttl=lease_ttl, turn_timeout=turn_timeout, name=name
            )
            process = stack.enter_context(
                running_process(
                    short_lease_args(port),
                    health_url=f"{url}/health",
                    env={**settings, **(env or {})},
                )
            )
            replicas.append(Replica(name, url, process))
        yield replicas
