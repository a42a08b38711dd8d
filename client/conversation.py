"""Transition path, not API: import these names from :mod:`evalport.client`.

Kept only while README.md (owned elsewhere) still imports this module; delete it
once it imports from the face. Nothing else lives here.
"""

from evalport.client import (
    ApprovalError,
    ApprovalRequest,
    UserSimulator,
    approve_all,
    decide_by_tool,
    reject_all,
)

__all__ = [
    "ApprovalError",
    "ApprovalRequest",
    "UserSimulator",
    "approve_all",
    "decide_by_tool",
    "reject_all",
]
