"""The evaluation subcommands of ``evalport``: ``run``, ``check``, ``compare``, ``merge``.

Each module exposes ``add_arguments(parser)`` and ``main(args) -> int`` and is registered
in :data:`evalport.protocol._cli.COMMANDS`. Exit codes are the same everywhere: see
:mod:`evalport.client.cli._common`.
"""

from ._common import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE"]
