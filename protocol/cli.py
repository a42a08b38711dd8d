"""The ``evalport`` command: a dispatcher that imports each part only when it is used.

Subcommands live with the part they drive (``serve`` in :mod:`evalport.server`, the
evaluation commands in :mod:`evalport.client`), so a service that installed only
``evalport[server]`` can still run ``evalport serve``. A part registers its subcommands in
:data:`COMMANDS` as ``name -> (module, extra, help)``; the module exposes
``add_arguments(parser)`` and ``main(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from .extras import MissingExtraError, require
from .version import PROTOCOL_VERSION, __version__

__all__ = ["COMMANDS", "main"]

COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    "serve": ("evalport.server.cli", "server", "serve an agent over the eval protocol"),
    "run": ("evalport.client.cli.run", "client", "run eval cases against a target"),
    "check": ("evalport.client.cli.check", "client", "check a server's protocol conformance"),
    "compare": ("evalport.client.cli.compare", "client", "compare two runs' results"),
    "merge": ("evalport.client.cli.merge", "client", "merge the results of sharded runs"),
    "judge": ("evalport.client.judges.cli", "client", "calibrate judges against human labels"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalport", description="Evaluate AI agents where they run."
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"evalport {__version__} (protocol {PROTOCOL_VERSION})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for usage errors)."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not args or args[0] not in COMMANDS:
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name, (_, _, help_text) in COMMANDS.items():
            sub.add_parser(name, help=help_text, add_help=False)
        if not args:
            parser.print_help()
            return 2
        parser.parse_args(args)  # prints usage and exits 2 for an unknown command
        return 2
    name = args[0]
    module_name, extra, help_text = COMMANDS[name]
    try:
        module = require(module_name, extra, f"'evalport {name}'")
    except MissingExtraError as error:
        print(f"evalport: {error}", file=sys.stderr)
        return 2
    command = argparse.ArgumentParser(prog=f"evalport {name}", description=help_text)
    module.add_arguments(command)
    return int(module.main(command.parse_args(args[1:])))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
