"""``evalport view [PATH]``: browse run folders in a local web page. See ARCHITECTURE.md,
"evalport view".
"""

from __future__ import annotations

import argparse
import socket
import webbrowser
from pathlib import Path

from evalport.protocol import MissingExtraError, require

from .._core import EXIT_OK, ConfigError, fail

HELP = "browse run folders in a local web page"
DEFAULT_PATH = ".evalport/runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "path",
        nargs="?",
        default=DEFAULT_PATH,
        metavar="PATH",
        help=f"a run folder or a folder of them (default {DEFAULT_PATH})",
    )
    add("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    add("--port", type=int, default=7878, metavar="N", help="port (default 7878; 0: any free)")
    add("--open", action="store_true", help="open the page in the default web browser")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        raise ConfigError(
            f"--host {host} --port {port}: cannot listen there ({error.strerror or error}): "
            "pick another port with --port, or 0 for any free one"
        ) from None


def main(args: argparse.Namespace) -> int:
    try:
        require("starlette", "view", "'evalport view'")
        uvicorn = require("uvicorn", "view", "'evalport view'")
    except MissingExtraError as error:
        return fail("view", str(error))
    from ._view_app import build_app, folders

    root = Path(args.path)
    try:
        if not root.is_dir():
            what = "is a file, not a folder" if root.exists() else "no such folder"
            raise ConfigError(
                f"{root}: {what}; give a run folder or a folder of them "
                "(evalport run writes them under .evalport/runs)"
            )
        runs = len(folders(root))
        listening = _listen(args.host, args.port)
    except ConfigError as error:
        return fail("view", str(error))
    port = listening.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/"
    print(f"evalport view: {runs} folders under {root} at {url} (Ctrl-C stops)", flush=True)
    if args.open:
        webbrowser.open(url)
    server = uvicorn.Server(
        uvicorn.Config(build_app(root, args.host), log_level="warning", lifespan="off")
    )
    with listening:
        server.run(sockets=[listening])
    return EXIT_OK
