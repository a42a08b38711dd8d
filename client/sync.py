"""Transition path, not API: import these names from :mod:`evalport.client`.

Kept only while README.md (owned elsewhere) still imports this module; delete it
once it imports from the face. Nothing else lives here.
"""

from evalport.client import SyncSession, SyncTarget, connect

__all__ = ["SyncSession", "SyncTarget", "connect"]
