"""Building the target and the judge that ``evalport run`` was told to use.

Rules: ``--target URL`` is an :class:`~evalport.client.HttpTarget` whose ``/health``
is read first (:meth:`PreparedTarget.prepare`): a server that cannot be reached raises
:class:`TargetUnreachable` (exit 3); a refused token or another protocol version is a
:class:`~evalport.client._config.ConfigError` (exit 2). ``--local module:attr`` (or
``path/to/file.py:attr``) is a :class:`~evalport.client.LocalTarget` over that
agent. The token is read from the environment only, never from the command line.

The judge (:func:`build_judge`) is the one ``[tool.evalport.judge]`` names; without that
table it is :meth:`JudgeConfig.from_env() <evalport.client.judges.JudgeConfig.from_env>`'s
(``EVALPORT_JUDGE_MODEL``, ``_BASE_URL``, ``_API_KEY_ENV``, ``_CACHE_DIR``); with neither
there is no judge, and judged assertions are not evaluated (never passed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from evalport.protocol import AuthFailed, ProtocolError, TargetError, TargetUnavailable
from evalport.protocol.runtime import load_object as _load_object

from .._config import ConfigError, Settings
from .._target import Target


class TargetUnreachable(Exception):
    """The target could not be reached before the run started."""


class PreparedTarget:
    """A target plus what must happen before (health) and after (closing) the run."""

    def __init__(self, target: Target, *, url: str | None = None) -> None:
        self.target = target
        self.url = url

    async def prepare(self) -> None:
        check = getattr(self.target, "check", None)
        if self.url is None or check is None:
            return
        try:
            await check()
        except TargetUnavailable as error:
            raise TargetUnreachable(f"{self.url} is unreachable: {error}") from None
        except AuthFailed as error:
            raise ConfigError(
                f"{self.url} refused the token ({error}); check --token-env"
            ) from None
        except ProtocolError as error:
            raise ConfigError(f"{self.url} does not speak the evalport protocol: {error}") from None
        except TargetError as error:
            raise TargetUnreachable(f"{self.url}/health failed: {error}") from None

    async def aclose(self) -> None:
        await self.target.aclose()


def load_object(spec: str) -> Any:
    """Import ``module:attr`` or ``path/to/file.py:attr`` (``--local``)."""
    try:
        return _load_object(spec)
    except ValueError as error:
        raise ConfigError(f"--local {spec!r}: {error}") from None


def build_target(settings: Settings) -> PreparedTarget:
    """The target named by ``--target`` or ``--local``."""
    if settings.target:
        from .._http import HttpTarget

        token = None
        if settings.token_env:
            token = os.environ.get(settings.token_env)
            if not token:
                raise ConfigError(f"--token-env {settings.token_env}: the variable is not set")
        try:
            target = HttpTarget(settings.target, token=token)
        except ValueError as error:
            raise ConfigError(f"--target: {error}") from None
        return PreparedTarget(target, url=settings.target)
    if settings.local:
        from .._local import LocalTarget

        agent = load_object(settings.local)
        return PreparedTarget(LocalTarget(agent, location=settings.local))
    raise ConfigError("give --target URL or --local module:attr")


def build_judge(settings: Settings, environ: Mapping[str, str] | None = None) -> Any:
    """The judge of ``[tool.evalport.judge]``, else of ``EVALPORT_JUDGE_*``, else ``None``."""
    from ..judges import JudgeConfig, OpenAIJudge

    judge = settings.judge
    if not judge.model:
        config = JudgeConfig.from_env(environ)
        return config.build() if config is not None else None
    options: dict[str, Any] = {"model": judge.model, "cache": judge.judge_cache}
    if judge.base_url:
        options["base_url"] = judge.base_url
    if judge.api_key_env is not None:  # "" means the server needs no key
        options["api_key_env"] = judge.api_key_env or None
    return OpenAIJudge(**options)
