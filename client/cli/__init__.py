"""The evaluation subcommands of ``evalport`` (``run``, ``check``, ``compare``, ``init``,
``new``) and the pytest plugin. Every command, here or elsewhere, exits with the same
codes: the ``EXIT_*`` constants below.
"""

from .._core import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE"]
