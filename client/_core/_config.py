"""Run settings from ``[tool.evalport]`` in ``pyproject.toml``: nothing is guessed (an
unknown key is a :class:`ConfigError`); the agent-loop judge's verdicts go into
``judge-cache`` as the single-call judge's do. Rules: see ARCHITECTURE.md, "Settings".
"""

from __future__ import annotations

import math
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import TracePolicy

TRACE_POLICIES = ("safe", "verbatim")
"""The names ``--trace-policy`` and ``trace-policy`` accept (the default is the first)."""


class ConfigError(ValueError):
    """A setting is missing, unknown or invalid; the message says where and how to fix it."""


class JudgeSettings(msgspec.Struct, kw_only=True, rename="kebab", forbid_unknown_fields=True):
    """The judge model behind judged assertions (an OpenAI-compatible endpoint)."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    judge_cache: str | None = None
    """A folder of cached verdicts (same model, prompt and parameters: paid once)."""
    agent_loop: bool = False
    """The agent-loop judge (reads the run through tools) instead of the single-call one."""
    max_steps: int | None = None
    max_tokens: int | None = None


class Settings(msgspec.Struct, kw_only=True, rename="kebab", forbid_unknown_fields=True):
    """Everything ``evalport run`` can be told, with its defaults."""

    path: str | None = None
    target: str | None = None
    local: str | None = None
    token_env: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    exclude_tags: list[str] = msgspec.field(default_factory=list)
    keyword: str | None = None
    repeat: int = 1
    pass_rate: float = 1.0
    min_lower_bound: float | None = None
    concurrency: int = 8
    rps: float | None = None
    timeout: float | None = 120.0
    connect_timeout: float = 5.0
    """Seconds to wait for a connection to the target (each attempt)."""
    read_timeout: float | None = None
    """Seconds to wait for each answer of the target; ``None``: as long as ``timeout``."""
    trace_policy: str = "safe"
    """What of a run stays readable: ``safe`` (payloads digested) or ``verbatim``."""
    strict: bool = False
    cache: bool = False
    fresh: bool = False
    cache_dir: str = ".evalport/cache"
    cache_store: str | None = None
    """Where recordings live instead of ``cache_dir``: a Redis URL or ``module:Name``."""
    cache_dependencies: list[str] = msgspec.field(default_factory=list)
    out: str | None = None
    json: str | None = None
    junit: str | None = None
    md: str | None = None
    html: str | None = None
    baseline: str | None = None
    reporters: list[str | dict[str, Any]] = msgspec.field(default_factory=list)
    bootstrap: str | None = None
    """A module or file imported once before the eval files load."""
    factory: str | None = None
    """``module:attr``: a callable that builds evaluators and reporters from their class."""
    judge: JudgeSettings = msgspec.field(default_factory=JudgeSettings)

    def validate(self, source: str = "settings") -> Settings:
        """Check ranges; raises :class:`ConfigError` naming ``source``."""
        if self.repeat < 1:
            raise ConfigError(f"{source}: repeat must be at least 1, got {self.repeat}")
        if not 0.0 <= self.pass_rate <= 1.0:
            raise ConfigError(f"{source}: pass-rate must be within [0, 1], got {self.pass_rate}")
        if self.min_lower_bound is not None and not 0.0 <= self.min_lower_bound <= 1.0:
            raise ConfigError(
                f"{source}: min-lower-bound must be within [0, 1], got {self.min_lower_bound}"
            )
        if self.concurrency < 1:
            raise ConfigError(f"{source}: concurrency must be at least 1, got {self.concurrency}")
        if self.rps is not None and self.rps <= 0:
            raise ConfigError(f"{source}: rps must be positive, got {self.rps}")
        for name in ("timeout", "connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                key = name.replace("_", "-")
                raise ConfigError(
                    f"{source}: {key} must be a positive number of seconds, got {value}"
                )
        if self.trace_policy not in TRACE_POLICIES:
            raise ConfigError(
                f"{source}: trace-policy must be one of {', '.join(TRACE_POLICIES)}, "
                f"got {self.trace_policy!r}"
            )
        if self.target and self.local:
            raise ConfigError(f"{source}: give either target (a URL) or local, not both")
        return self

    def policy(self) -> TracePolicy:
        """The trace policy ``trace_policy`` names."""
        return TracePolicy.verbatim() if self.trace_policy == "verbatim" else TracePolicy.safe()


_PATHS = ("path", "cache_dir", "out", "json", "junit", "md", "html", "baseline")


def _beside(pyproject: Path, value: str | None) -> str | None:
    """A path from the file, relative to the file's folder unless absolute."""
    if value is None or Path(value).is_absolute():
        return value
    return str(pyproject.parent / value)


_CODE = ("local", "bootstrap", "factory")


def _code_beside(pyproject: Path, spec: str | None) -> str | None:
    """A code spec from the file: a file's path (``x.py:attr``, ``dir/x.py``) relative to
    the file's folder, written relative to the working directory (so reports and cache
    slots name it as written when the run starts beside the file); a module name as
    written (the folder is importable)."""
    if spec is None:
        return None
    location, colon, attribute = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if (location.endswith(".py") or "/" in location) and not Path(location).is_absolute():
        return f"{os.path.relpath(pyproject.parent / location)}{colon}{attribute}"
    return spec


def _importable(folder: Path) -> None:
    """Put the project's folder first on ``sys.path`` (once)."""
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.insert(0, entry)


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    folder = start.resolve()
    if folder.is_file():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load_settings(start: Path | None = None, *, file: Path | None = None) -> Settings:
    """Settings from ``[tool.evalport]`` of ``file`` or of the nearest ``pyproject.toml``."""
    path = file or find_pyproject(start or Path.cwd())
    if path is None:
        return Settings()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it as TOML: {error}") from None
    table = document.get("tool", {}).get("evalport")
    if table is None:
        return Settings()
    source = f"{path} [tool.evalport]"
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: must be a table")
    try:
        settings = msgspec.convert(table, Settings)
    except msgspec.ValidationError as error:
        raise ConfigError(f"{source}: {_explain(error)}") from None
    for name in _PATHS:
        if name.replace("_", "-") in table:
            setattr(settings, name, _beside(path, getattr(settings, name)))
    settings.cache_dependencies = [
        str(_beside(path, pattern)) for pattern in settings.cache_dependencies
    ]
    for name in _CODE:
        setattr(settings, name, _code_beside(path, getattr(settings, name)))
    settings.reporters = [_reporter_beside(path, spec) for spec in settings.reporters]
    _importable(path.parent)
    judge = settings.judge
    judge.judge_cache = _beside(path, judge.judge_cache)
    _check_agent_loop(path, judge)
    if not judge.model and judge != JudgeSettings():
        given = [
            name.replace("_", "-")
            for name in JudgeSettings.__struct_fields__
            if name != "model" and getattr(judge, name) not in (None, False)
        ]
        what = f"sets {', '.join(given)} but no model" if given else "has an empty model"
        raise ConfigError(
            f'{path} [tool.evalport.judge]: {what}; add model = "..." '
            "(or drop the table to take the judge from EVALPORT_JUDGE_* variables)"
        )
    return settings.validate(source)


def _reporter_beside(pyproject: Path, spec: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(spec, str):
        return _code_beside(pyproject, spec) or spec
    use = spec.get("use")
    return {**spec, "use": _code_beside(pyproject, use)} if isinstance(use, str) else spec


def _check_agent_loop(path: Path, judge: JudgeSettings) -> None:
    where = f"{path} [tool.evalport.judge]"
    limits = [
        name
        for name in ("max-steps", "max-tokens")
        if getattr(judge, name.replace("-", "_")) is not None
    ]
    if limits and not judge.agent_loop:
        raise ConfigError(
            f"{where}: {', '.join(limits)} bound the agent-loop judge; add agent-loop = true "
            "or drop them"
        )
    for name in limits:
        if getattr(judge, name.replace("-", "_")) < 1:
            raise ConfigError(f"{where}: {name} must be at least 1")


def _explain(error: msgspec.ValidationError) -> str:
    text = str(error)
    if text.startswith("Object contains unknown field"):
        known = ", ".join(f.replace("_", "-") for f in Settings.__struct_fields__)
        return f"{text}; known keys: {known}"
    return text
