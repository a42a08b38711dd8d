"""Choosing which cases run: tags, ``-k`` expressions and shards. Rules: see
ARCHITECTURE.md, "Cases, datasets and selection".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from ._config import ConfigError


class Selectable(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def tags(self) -> Sequence[str]: ...


C = TypeVar("C", bound=Selectable)

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")
Matcher = Callable[[str, frozenset[str]], bool]


def _either(a: Matcher, b: Matcher) -> Matcher:
    return lambda case_id, tags: a(case_id, tags) or b(case_id, tags)


def _both(a: Matcher, b: Matcher) -> Matcher:
    return lambda case_id, tags: a(case_id, tags) and b(case_id, tags)


def keyword_matcher(expression: str) -> Matcher:
    """Compile a ``-k`` expression into a predicate over (case id, tags)."""
    tokens: list[tuple[int, str]] = []
    position = 0
    stripped = expression.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:  # pragma: no cover - the pattern matches any non-space run
            break
        tokens.append((match.start(1), match.group(1)))
        position = match.end()
    if not tokens:
        raise ConfigError("-k: the expression is empty")
    index = 0

    def fail(message: str) -> ConfigError:
        where = tokens[index][0] if index < len(tokens) else len(stripped)
        return ConfigError(f"-k {expression!r}: {message} at column {where + 1}")

    def peek() -> str | None:
        return tokens[index][1] if index < len(tokens) else None

    def parse_or() -> Matcher:
        nonlocal index
        left = parse_and()
        while peek() == "or":
            index += 1
            left = _either(left, parse_and())
        return left

    def parse_and() -> Matcher:
        nonlocal index
        left = parse_not()
        while peek() == "and":
            index += 1
            left = _both(left, parse_not())
        return left

    def parse_not() -> Matcher:
        nonlocal index
        if peek() == "not":
            index += 1
            inner = parse_not()
            return lambda i, t: not inner(i, t)
        return parse_atom()

    def parse_atom() -> Matcher:
        nonlocal index
        token = peek()
        if token is None:
            raise fail("expected a word or '('")
        if token == "(":
            index += 1
            inner = parse_or()
            if peek() != ")":
                raise fail("expected ')'")
            index += 1
            return inner
        if token in (")", "and", "or"):
            raise fail(f"unexpected {token!r}")
        index += 1
        word = token.lower()
        return lambda i, t: word in i.lower() or word in t

    matcher = parse_or()
    if index != len(tokens):
        raise fail(f"unexpected {tokens[index][1]!r}")
    return matcher


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; raises :class:`ConfigError` otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None:
        raise ConfigError(f"--shard {text!r}: write it as I/N, e.g. 1/4")
    shard, total = int(match.group(1)), int(match.group(2))
    if not 1 <= shard <= total:
        raise ConfigError(f"--shard {text!r}: need 1 <= I <= N")
    return shard, total


def select(
    cases: Iterable[C],
    *,
    tags: Sequence[str] = (),
    exclude_tags: Sequence[str] = (),
    keyword: str | None = None,
    shard: tuple[int, int] | None = None,
) -> list[C]:
    """The cases to run, in their original order."""
    matcher = keyword_matcher(keyword) if keyword else None
    wanted, unwanted = set(tags), set(exclude_tags)
    chosen = []
    for case in cases:
        case_tags = frozenset(case.tags)
        if wanted and not wanted & case_tags:
            continue
        if unwanted & case_tags:
            continue
        if matcher is not None and not matcher(case.id, frozenset(t.lower() for t in case_tags)):
            continue
        chosen.append(case)
    if shard is not None:
        number, total = shard
        ids = sorted(case.id for case in chosen)
        keep = set(ids[number - 1 :: total])
        chosen = [case for case in chosen if case.id in keep]
    return chosen
