"""Several ``evalport serve`` processes (replicas) over one session store.

:func:`running_replicas` starts ``count`` real uvicorn processes of ``evalport serve``
on free loopback ports, all with ``--store store``, waits until each answers ``/health``
and yields their base URLs with their ``Popen`` objects; it stops them all (SIGTERM) on
exit. A test may kill one on purpose (``replica.process.kill()``) inside the block.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from subprocess import Popen

from support.servers import free_port, running_process

__all__ = ["Replica", "running_replicas", "serve_args"]


@dataclass
class Replica:
    name: str
    url: str
    process: Popen[str]


def serve_args(target: str, port: int, store: str, *options: str) -> list[str]:
    """The command line of one ``evalport serve`` replica."""
    return [
        sys.executable, "-m", "evalport.protocol._cli", "serve", target,
        "--port", str(port), "--store", store, "--log-level", "warning", *options,
    ]  # fmt: skip


@contextlib.contextmanager
def running_replicas(
    target: str,
    *,
    store: str,
    count: int = 2,
    token: str,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[list[Replica]]:
    """``count`` replicas named A, B, ... (``$REPLICA`` tells each its name)."""
    with contextlib.ExitStack() as stack:
        replicas = []
        for n in range(count):
            name = chr(ord("A") + n)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            process = stack.enter_context(
                running_process(
                    serve_args(target, port, store, *options),
                    health_url=f"{url}/health",
                    env={"EVALPORT_TOKEN": token, "REPLICA": name, **(env or {})},
                )
            )
            replicas.append(Replica(name, url, process))
        yield replicas
