"""The evaluation subcommands of ``evalport``: ``run``, ``check``, ``compare``, ``merge``,
``view``.

Each command is a private module (``_run``, ``_check``, ``_compare``, ``_merge``,
``_view``) with ``HELP``, ``add_arguments(parser)`` and ``main(args) -> int``, registered in the
``evalport.commands`` entry-point group of ``pyproject.toml``. Exit codes are the same
everywhere: the ``EXIT_*`` constants below.
"""

from ._common import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE"]
