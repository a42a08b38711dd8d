"""The ``evalport`` command: a dispatcher that imports each part only when it is used.

Rules: see ARCHITECTURE.md, "Shared below the server and the client".
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint
from typing import Any, cast

from ._extras import MissingExtraError, extra_of, load_plugin, plugins
from ._version import PROTOCOL_VERSION, __version__

GROUP = "evalport.commands"


def _summary(point: EntryPoint) -> str:
    """A command's one-line help, or the extra it needs when it is not installed."""
    try:
        module = load_plugin(point, f"'evalport {point.name}'")
    except MissingExtraError:
        return f"(needs pip install 'evalport[{extra_of(point)}]')"
    return str(module.HELP)


class Parser(argparse.ArgumentParser):
    """Every evalport command's parser (its subcommands' too): no abbreviations
    (``--token`` is never taken for ``--token-env``), and arguments it does not know are
    named without their values, which may be secrets, with the closest option the command
    has ("did you mean --exclude-tag?")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> argparse.Namespace:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            options = [argument.split("=", 1)[0] for argument in unknown if argument[:1] == "-"]
            named = f"option(s) {' '.join(options)}" if options else "argument(s)"
            known = sorted(set(re.findall(r"--[\w-]+", self.format_help())))
            close = [
                match
                for option in options
                for match in difflib.get_close_matches(option, known, n=1, cutoff=0.75)
            ]
            hint = f"; did you mean {' '.join(close)}?" if close else ""
            self.error(f"unrecognized {named} (values are not shown){hint}")
        return cast(argparse.Namespace, parsed)


class _QuietWhenClosed:
    """``sys.stdout`` whose reader may go away (``evalport run ... | head -1``): from the
    first write that finds the pipe closed on, output goes to ``os.devnull``, so the command
    finishes quietly (no BrokenPipe traceback, now or at exit) with its own exit code."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for usage errors)."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = plugins(GROUP)
    parser = Parser(prog="evalport", description="Evaluate AI agents where they run.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"evalport {__version__} (protocol {PROTOCOL_VERSION})",
    )
    if not args or args[0] not in commands:
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name in sorted(commands):
            sub.add_parser(name, help=_summary(commands[name]), add_help=False)
        if not args:
            parser.print_help()
            return 2
        parser.parse_args(args)  # prints usage and exits 2 for an unknown command
        return 2
    name = args[0]
    try:
        module = load_plugin(commands[name], f"'evalport {name}'")
    except MissingExtraError as error:
        print(f"evalport: {error}", file=sys.stderr)
        return 2
    command = Parser(prog=f"evalport {name}", description=module.HELP)
    module.add_arguments(command)
    parsed = command.parse_args(args[1:])
    stdout = sys.stdout
    sys.stdout = _QuietWhenClosed(stdout)
    try:
        code = int(module.main(parsed))
        sys.stdout.flush()
    finally:
        sys.stdout = stdout
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
