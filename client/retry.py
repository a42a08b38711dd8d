"""Transition path, not API: import these names from :mod:`evalport.client`.

Kept only while README.md and tests/server/ (owned elsewhere) still import this module;
delete it once they import from the face. Nothing else lives here.
"""

from evalport.client import RetryPolicy

__all__ = ["RetryPolicy"]
