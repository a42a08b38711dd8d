"""Where every evalport command finds the bearer token.

Rule: the token is read from an environment variable, never from the command line (where
``ps`` would show it): the one named by ``--token-env``, else :data:`DEFAULT_TOKEN_ENV`.
``evalport serve``, ``run``, ``check`` and the pytest plugin all follow it.
"""

from __future__ import annotations

from typing import Final

DEFAULT_TOKEN_ENV: Final = "EVALPORT_TOKEN"
