"""Session stores: the interface (:class:`SessionStore`) and the in-process default."""

from .base import Lease, SessionStore, StoredSession
from .memory import MemoryStore

__all__ = ["Lease", "MemoryStore", "SessionStore", "StoredSession"]
