"""Building the target and the judge that ``evalport run`` (and ``check``) was told to use.
The token comes from the environment only, and no text of these objects holds a URL's
credentials. See ARCHITECTURE.md, "evalport run".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from evalport.protocol import (
    DEFAULT_TOKEN_ENV,
    AuthFailed,
    ProblemType,
    ProtocolError,
    RequestRejected,
    TargetError,
    TargetUnavailable,
)
from evalport.protocol._auth import NOT_A_NAME, is_variable_name, variable_name
from evalport.protocol.runtime import load_object as _load_object

from .._core import NOT_HERE, ConfigError, Settings, Target, printable


def add_server_options(add: Callable[..., object], connect_default: float | None) -> None:
    """The options by which ``run`` and ``check`` reach a server: the token's variable and
    each request's waits (see ARCHITECTURE.md, "evalport run")."""
    add(
        "--token-env",
        metavar="VAR",
        type=variable_name,
        help="environment variable holding the bearer token",
    )
    add(
        "--connect-timeout",
        type=float,
        default=connect_default,
        metavar="S",
        help="seconds to connect to the server, each attempt (default 5)",
    )
    add(
        "--read-timeout",
        type=float,
        metavar="S",
        help="seconds to wait for each answer of the server (default: --timeout)",
    )


class TargetUnreachable(Exception):
    """The target could not be reached before the run started."""


_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
_QUERY = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^?#\s]*\?)(?P<query>[^#\s]*)")


def _masked_query(match: re.Match[str]) -> str:
    params = match["query"].split("&")
    return match["head"] + "&".join(
        p.split("=", 1)[0] + "=***" if "=" in p else "***" for p in params if p
    )


DEFAULT_READ_TIMEOUT = 300.0
"""Seconds to wait for an answer when neither ``--read-timeout`` nor ``--timeout`` is set."""


def without_credentials(text: str) -> str:
    """``text`` with the user and password of every URL in it, and the value of each of
    its query parameters (``?api_key=...``), replaced by ``***``.

    Any text: a URL, or an argument such as ``--target=http://user:secret@host``."""
    return _QUERY.sub(_masked_query, _USERINFO.sub(r"\g<scheme>***@", text))


def read_token(
    token_env: str | None, environ: Mapping[str, str] | None = None, named: str = "--token-env"
) -> tuple[str | None, str]:
    """The bearer token and the variable it was read from, never the command line.

    A variable named explicitly must be set (:class:`ConfigError`, naming it as ``named``,
    otherwise); the default one may be unset, and then no token is sent."""
    environ = os.environ if environ is None else environ
    if token_env:
        if not is_variable_name(token_env):
            raise ConfigError(f"{named} {NOT_A_NAME}")
        token = environ.get(token_env)
        if not token:
            raise ConfigError(f"{named} {token_env}: the variable is not set")
        return token, token_env
    return environ.get(DEFAULT_TOKEN_ENV) or None, DEFAULT_TOKEN_ENV


def token_refused(url: str, token_env: str, sent: bool, option: str = "--token-env") -> str:
    """What to say when ``url`` answers 401 or 403 (``option`` names the token variable)."""
    if sent:
        return (
            f"{url} refused the token read from ${token_env}: check that variable "
            f"(or name another with {option})"
        )
    return (
        f"{url} asks for a token and none was sent (${token_env} is not set): set it, "
        f"or name the variable holding the token with {option}"
    )


async def not_here(url: str, timeout: float = 5.0) -> str:
    """Why ``url``'s ``/health`` answered 404, for ``run`` and ``check`` alike: the host's own
    short plain-text answer quoted (``it says 'No such app'``), then "drop the path" when
    the server's root answers the protocol (``/health`` as JSON with ``protocol``, or
    refusing without a token as an evalport problem), else :data:`NOT_HERE`."""
    import httpx

    base = url if url.endswith("/") else url + "/"
    parsed = httpx.URL(base)
    root = str(parsed.copy_with(path="/", query=None, fragment=None))
    said, speaks = "", False
    async with httpx.AsyncClient(timeout=timeout) as client:
        with contextlib.suppress(httpx.HTTPError):
            said = _short_text(await client.get(base + "health"))
        if parsed.path not in ("", "/"):
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = await client.get(root + "health")
                body = answer.json()
                speaks = isinstance(body, dict) and (
                    (
                        answer.status_code == 200
                        and body.get("status") == "ok"
                        and "protocol" in body
                    )
                    or str(body.get("type", "")) == ProblemType.UNAUTHORIZED
                )
    hint = (
        f"the protocol answers at {without_credentials(root)} (its /health), not under this "
        "path: drop the path"
        if speaks
        else NOT_HERE
    )
    return f"{said}; {hint}" if said else hint


def _short_text(response: Any) -> str:
    """A host's own short plain-text answer, quoted; "" for anything else (JSON, HTML, a
    long page)."""
    kind = response.headers.get("content-type", "")
    text = response.text.strip()
    if not kind.startswith("text/plain") or not text or len(text) > 200:
        return ""
    return f"it says {printable(text)!r}"


class PreparedTarget:
    """A target plus what must happen before (health) and after (closing) the run."""

    def __init__(
        self,
        target: Target,
        *,
        url: str | None = None,
        timeout: float | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        token_sent: bool = False,
        token_option: str = "--token-env",
    ) -> None:
        self.token_option = token_option
        self.target = target
        self.url = without_credentials(url) if url is not None else None
        self.timeout = timeout
        self.token_env = token_env
        self.token_sent = token_sent

    async def prepare(self) -> None:
        check = getattr(self.target, "check", None)
        if self.url is None or check is None:
            return
        try:
            async with asyncio.timeout(self.timeout):
                await check()
        except TimeoutError:
            raise TargetUnreachable(
                f"{self.url} did not answer GET /health within {self.timeout:g} s "
                "(--timeout; --connect-timeout and --read-timeout bound each attempt)"
            ) from None
        except TargetUnavailable as error:
            raise TargetUnreachable(f"{self.url} is unreachable: {error}") from None
        except AuthFailed as error:
            refused = token_refused(self.url, self.token_env, self.token_sent, self.token_option)
            raise ConfigError(f"{refused} ({error})") from None
        except ProtocolError as error:
            raise ConfigError(f"{self.url} does not speak the evalport protocol: {error}") from None
        except RequestRejected as error:  # the server answered: not a network fault
            said = f"/health answered 404: {await not_here(self.url)}"
            said = said if error.status == 404 else str(error)
            raise ConfigError(f"{self.url} is not the adapter's address: {said}") from None
        except TargetError as error:
            raise TargetUnreachable(f"{self.url.rstrip('/')}/health failed: {error}") from None

    async def aclose(self) -> None:
        await self.target.aclose()


def load_object(spec: str, named: str = "--local") -> Any:
    """Import ``module:attr`` or ``path/to/file.py:attr``; ``named`` is where the user wrote
    ``spec`` (an option, or the config key it came from)."""
    try:
        return _load_object(spec)
    except ValueError as error:
        raise ConfigError(f"{named} {spec!r}: {error}") from None


OPTIONS: Final = {"local": "--local", "token-env": "--token-env"}
"""How ``evalport run`` names the settings :func:`build_target` reads, in its errors."""
CONFIG_LOCAL: Final = "[tool.evalport] local"
CONFIG_TOKEN_ENV: Final = "[tool.evalport] token-env"


def build_target(settings: Settings, *, named: Mapping[str, str] = OPTIONS) -> PreparedTarget:
    """The target named by ``--target`` or ``--local``; errors name each setting as the
    user wrote it (``named``: an option, or the config key the value came from)."""
    policy = settings.policy()
    if settings.target:
        import httpx
        from evalport.client import target_for
        from evalport.protocol import MissingExtraError

        token, token_env = read_token(settings.token_env, named=named["token-env"])
        read = settings.read_timeout or settings.timeout or DEFAULT_READ_TIMEOUT
        timeout = httpx.Timeout(30.0, connect=settings.connect_timeout, read=read)
        try:
            target = target_for(settings.target, token=token, timeout=timeout, policy=policy)
        except (ValueError, MissingExtraError) as error:
            raise ConfigError(f"--target: {error}") from None
        return PreparedTarget(
            target,
            url=getattr(target, "base_url", settings.target),
            timeout=settings.timeout,
            token_env=token_env,
            token_sent=token is not None,
            token_option=named["token-env"],
        )
    if settings.local:
        from evalport.client import LocalTarget

        agent = load_object(settings.local, named["local"])
        try:
            local = LocalTarget(agent, policy=policy, location=settings.local)
        except TypeError as error:  # not an agent shape: one line, exit 2
            raise ConfigError(f"{named['local']} {settings.local!r}: {error}") from None
        return PreparedTarget(local)
    raise ConfigError("give --target URL or --local module:attr")


def build_judge(settings: Settings, environ: Mapping[str, str] | None = None) -> Any:
    """The judge of ``[tool.evalport.judge]``, else of ``EVALPORT_JUDGE_*``, else ``None``."""
    from ..judges import AgentLoopJudge, JudgeConfig, OpenAIJudge

    judge = settings.judge
    # As many judge calls in flight as trials: a judge per case keeps up with the run.
    concurrency = max(8, settings.concurrency)
    if not judge.model:
        config = JudgeConfig.from_env(environ)
        return config.build(concurrency) if config is not None else None
    options: dict[str, Any] = {"concurrency": concurrency}
    if judge.base_url:
        options["base_url"] = judge.base_url
    if judge.api_key_env is not None:  # "" means the server needs no key
        options["api_key_env"] = judge.api_key_env or None
    if judge.agent_loop:
        for name in ("max_steps", "max_tokens"):
            if getattr(judge, name) is not None:
                options[name] = getattr(judge, name)
        return AgentLoopJudge.openai(judge.model, cache=judge.judge_cache, **options)
    return OpenAIJudge(judge.model, cache=judge.judge_cache, **options)
