"""evalport.client.targets: every kind of agent a run can evaluate, behind one contract.

Each target here implements :class:`~evalport.client.Target` (the contract the runner
uses, ``client/_core/_target.py``): :class:`HttpTarget` (the evalport protocol),
:class:`LocalTarget` (an agent in this process), :class:`AgUiTarget` (an AG-UI agent) and
:class:`A2ATarget` (an A2A agent). :func:`target_for` names one by a URL whose scheme says
the protocol, as database URLs do (``agui+https://...``, ``a2a+https://...``). Everything
above the contract runs unchanged on each; what a protocol does not carry is *not
evaluable* on its runs (see :attr:`~evalport.protocol.AgentRun.unreported`).
"""

from .._core import (
    SCHEMES,
    A2ATarget,
    AgUiSession,
    AgUiTarget,
    HttpSession,
    HttpTarget,
    LocalSession,
    LocalTarget,
    target_for,
)

__all__ = [
    "SCHEMES",
    "A2ATarget",
    "AgUiSession",
    "AgUiTarget",
    "HttpSession",
    "HttpTarget",
    "LocalSession",
    "LocalTarget",
    "target_for",
]
