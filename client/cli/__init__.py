"""The evaluation subcommands of ``evalport``: ``run``, ``check``, ``compare``, ``init``,
``new``; and the pytest plugin.

Each command is a private module (``_run``, ``_check``, ``_compare``, ``_init``, ``_new``)
with ``HELP``, ``add_arguments(parser)`` and ``main(args) -> int``, registered in the
``evalport.commands`` entry-point group of ``pyproject.toml`` (``merge`` and ``view`` live
with the reports, ``judge`` with the judges). Exit codes are the same everywhere: the
``EXIT_*`` constants below.
"""

from .._core import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE"]
