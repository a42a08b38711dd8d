"""Run Arize Phoenix with its gRPC receiver on loopback (run with Phoenix's own python).

Phoenix binds its OTLP/gRPC receiver to ``[::]`` whatever ``PHOENIX_HOST`` says; the tests
bind every server to 127.0.0.1 only. This wraps the public ``grpc.aio.server`` factory so
that the server it makes binds its port on 127.0.0.1, then runs ``phoenix serve``.
"""

import sys
from typing import Any

import grpc.aio

_factory = grpc.aio.server


def _loopback(address: str) -> str:
    return "127.0.0.1:" + address.rpartition(":")[2]


def loopback_server(*args: Any, **kwargs: Any) -> Any:
    """A ``grpc.aio`` server whose ports bind 127.0.0.1 whatever address is asked."""
    server = _factory(*args, **kwargs)
    insecure, secure = server.add_insecure_port, server.add_secure_port
    server.add_insecure_port = lambda address: insecure(_loopback(address))
    server.add_secure_port = lambda address, credentials: secure(_loopback(address), credentials)
    return server


if __name__ == "__main__":
    grpc.aio.server = loopback_server
    from phoenix.server.main import main

    sys.argv = ["phoenix", "serve"]
    main()
