"""``evalport serve TARGET``: serve an agent over the eval protocol with uvicorn. The token
comes from the environment, never the command line; every setting is checked before
anything starts (exit 2, one line). Its rules: ARCHITECTURE.md, "evalport serve".
"""

from __future__ import annotations

import argparse
import os
import sys
from types import FrameType
from typing import Final

import uvicorn
from evalport.protocol import DEFAULT_TOKEN_ENV, TracePolicy
from evalport.protocol._auth import variable_name
from evalport.protocol._extras import MissingExtraError, require
from evalport.protocol._loopback import is_loopback
from evalport.protocol.runtime import load_object

from ._app import EvalAdapter
from ._limits import Limits
from ._served import LocalCallersOnly, ServedApp, stderr_line

HELP = "serve an agent over the eval protocol"

_DEFAULTS: Final = Limits()
_LIMITS_HELP: Final = {  # the Limits a serve option sets, in --help's order
    "turn_timeout": "seconds a turn may run",
    "session_ttl": "idle seconds before a session expires",
    "max_sessions": "live sessions at most",
    "max_body_bytes": "largest request body",
    "lease_ttl": "seconds a turn's lease lasts between renewals, with a store that renews them"
    " (Redis): how soon a dead replica frees its sessions",
    "turn_threads": "worker threads for sync turns, one per session at most",
    "max_run_bytes": "largest accumulated run of a session; further turns get 413 run-too-large",
    "stream_buffer_bytes": "events a streamed turn keeps for its readers; a reader that falls "
    "behind them gets an overflow event",
}
_OPTIONS: Final = {field: "--" + field.replace("_", "-") for field in _LIMITS_HELP}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` options."""
    parser.add_argument("target", metavar="TARGET", help="module:attr or path/to/file.py:attr")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind (default 8765)")
    parser.add_argument(
        "--token-env",
        default=DEFAULT_TOKEN_ENV,
        metavar="VAR",
        type=variable_name,
        help=f"environment variable holding the bearer token (default {DEFAULT_TOKEN_ENV})",
    )
    parser.add_argument("--prefix", default="", help="path prefix of the routes, e.g. /agent")
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without a token; allowed only on a loopback host",
    )
    parser.add_argument("--public-health", action="store_true", help="serve /health without auth")
    parser.add_argument("--name", help="agent name shown by /health")
    parser.add_argument("--agent-version", help="agent version shown by /health")
    for field, text in _LIMITS_HELP.items():
        default = getattr(_DEFAULTS, field)
        shown = f"{default:g}" if isinstance(default, float) else default
        parser.add_argument(
            _OPTIONS[field], type=type(default), default=default, help=f"{text} (default {shown})"
        )
    parser.add_argument(
        "--store",
        default="memory",
        metavar="URL",
        help="session store: memory (default) or a Redis URL shared by replicas: "
        "redis://HOST:PORT/DB, rediss://... (TLS), redis+sentinel://HOST:PORT/SERVICE, "
        "redis+cluster://HOST:PORT[,HOST:PORT] (see docs/expose.md, Redis in production)",
    )
    parser.add_argument(
        "--allow-eviction",
        action="store_true",
        help="start even when the Redis store's maxmemory-policy evicts keys (it loses "
        "live sessions once full; by default serve refuses to start)",
    )
    parser.add_argument(
        "--trace-policy",
        choices=("safe", "verbatim"),
        default=None,
        help="redact every run before it leaves the service: safe digests tool payloads, "
        "verbatim keeps them (default: none, runs leave as the agent recorded them)",
    )
    parser.add_argument(
        "--allow-faults",
        action="store_true",
        help="accept tool faults in new sessions (for eval deployments; off by default)",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        help="export each turn as OpenTelemetry spans to this OTLP/HTTP collector, continuing "
        "the caller's traceparent (off by default)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


class DrainingServer(uvicorn.Server):
    """uvicorn that drains the adapter (503 ``draining``) as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, adapter: EvalAdapter | ServedApp) -> None:
        super().__init__(config)
        self.adapter = adapter

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.adapter.drain()
        super().handle_exit(sig, frame)


def limits_from(args: argparse.Namespace) -> Limits:
    """The adapter's limits from the options; ``ValueError`` names the bad option."""
    timeout: float | None = args.turn_timeout
    if timeout == 0:
        timeout = None
    elif timeout is not None and timeout < 0:
        raise ValueError(f"--turn-timeout must be above 0 (or 0 for none), not {timeout!r}")
    values = {field: getattr(args, field) for field in _OPTIONS}
    values["turn_timeout"] = timeout
    try:
        return Limits(**values)
    except ValueError as error:
        text = str(error)
        field = text.split(" ", 1)[0]
        option = _OPTIONS.get(field)
        raise ValueError(text.replace(field, option, 1) if option else text) from None


_POLICIES: Final = {"safe": TracePolicy.safe, "verbatim": TracePolicy.verbatim}


def _fail(message: str) -> int:
    print(f"evalport serve: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit code."""
    token = os.environ.get(args.token_env) or None
    if token is None and not args.insecure_no_auth:
        return _fail(
            f"no bearer token: set ${args.token_env} (or pass --token-env VAR); "
            "--insecure-no-auth serves without one, on a loopback host only"
        )
    if token is None and not is_loopback(args.host):
        return _fail(f"--insecure-no-auth is refused on {args.host}: bind a loopback address")
    if not 1 <= args.port <= 65535:
        return _fail(f"--port must be 1-65535, not {args.port}")
    try:
        limits = limits_from(args)
    except ValueError as error:
        return _fail(str(error))
    provider = None
    if args.otlp:
        try:
            tracing = require("evalport.protocol.tracing", "otel", "--otlp")
            provider = tracing.otlp_provider(args.otlp, args.name or "evalport-serve")
        except MissingExtraError as error:
            return _fail(str(error))
        except ValueError as error:
            return _fail(f"--otlp: {error}")
    try:
        target = load_object(args.target)

        def build(agent: object) -> EvalAdapter:
            return EvalAdapter(
                agent,
                token=token,
                name=args.name,
                version=args.agent_version,
                limits=limits,
                public_health=args.public_health,
                store=args.store,
                faults=args.allow_faults,
                tracing=provider or False,
                policy=_POLICIES[args.trace_policy]() if args.trace_policy else None,
            )

        closing = provider.shutdown if provider is not None else None
        app = ServedApp(
            target,
            build,
            prefix=args.prefix,
            say=stderr_line,
            closing=closing,
            allow_eviction=args.allow_eviction,
        )
    except (ValueError, TypeError, ImportError) as error:
        if provider is not None:
            provider.shutdown()
        shape = isinstance(error, TypeError)  # not an agent: name it as the user wrote it
        return _fail(f"{args.target}: {error}" if shape else str(error))

    grace = (limits.turn_timeout or 60.0) + 5.0
    auth = f"bearer token from ${args.token_env}" if token else "NO AUTH (loopback only)"
    print(
        f"evalport serve: {args.target} at http://{args.host}:{args.port}{args.prefix} ({auth})",
        file=sys.stderr,
    )
    config = uvicorn.Config(
        app if token else LocalCallersOnly(app, args.host),
        host=args.host,
        port=args.port,
        lifespan="on",
        log_level=args.log_level,
        timeout_graceful_shutdown=int(grace),
    )
    server = DrainingServer(config, app)
    try:
        server.run()
    except SystemExit:  # uvicorn's exit when the start-up (an async target) failed
        if server.started:
            raise
        return 2
    return 0 if server.started else 2
