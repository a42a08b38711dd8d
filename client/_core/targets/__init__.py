"""The targets room of the core: every kind of agent a run can evaluate, behind the
contract of ``_target.py`` (the public face is :mod:`evalport.client.targets`)."""

from ._a2a import A2ATarget as A2ATarget
from ._agui import AgUiSession as AgUiSession
from ._agui import AgUiTarget as AgUiTarget
from ._http import HttpSession as HttpSession
from ._http import HttpTarget as HttpTarget
from ._local import LocalSession as LocalSession
from ._local import LocalTarget as LocalTarget
from ._urls import SCHEMES as SCHEMES
from ._urls import target_for as target_for
