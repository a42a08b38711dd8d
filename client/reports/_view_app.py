"""The web app of ``evalport view`` (Starlette; the ``view`` extra): the pages over a folder
of run folders. A run is looked up by name among the folders it listed, never joined to a
path; it only reads. See ARCHITECTURE.md, "evalport view".
"""

from __future__ import annotations

import logging
from pathlib import Path

from evalport.protocol._loopback import local_request
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._core import ConfigError
from ._base import RunReport
from ._files import load_run_folder, load_summary
from ._view import (
    CONTENT_SECURITY_POLICY,
    RunEntry,
    compare_page,
    problem_page,
    run_page,
    runs_page,
)

_log = logging.getLogger(__name__)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _is_run(folder: Path) -> bool:
    return (folder / "summary.json").exists() or (folder / "results.jsonl").exists()


def folders(root: Path) -> dict[str, Path]:
    """The folders under ``root`` by name (``root`` itself when it is one run); reads none."""
    if _is_run(root):
        return {root.resolve().name or str(root): root}
    try:
        children = sorted(child for child in root.iterdir() if not child.name.startswith("."))
    except OSError as error:
        raise ConfigError(f"{root}: cannot list the folder ({error.strerror})") from None
    return {child.name: child for child in children if child.is_dir()}


def entry(root: Path, name: str, folder: Path) -> RunEntry:
    """One folder as the runs page lists it: its summary, or why it is not shown."""
    if folder != root and not folder.resolve().is_relative_to(root.resolve()):
        return RunEntry(name, problem=f"{folder} leads outside {root}: not shown")
    if not (folder / "summary.json").is_file():
        return RunEntry(
            name,
            problem=f"{folder / 'summary.json'} is missing: not a run folder, or a run that "
            "stopped before writing it",
        )
    try:
        summary = load_summary(folder, within=root)
    except ConfigError as error:
        return RunEntry(name, problem=str(error))
    if not (folder / "results.jsonl").is_file():
        return RunEntry(name, summary, f"{folder / 'results.jsonl'} is missing: a partial run")
    return RunEntry(name, summary)


def entries(root: Path) -> list[RunEntry]:
    """Every folder under ``root``: the runs newest first, then those not shown."""

    def order(pair: tuple[RunEntry, Path]) -> tuple[bool, str, int]:
        # started_at has whole seconds: two runs started in the same second are ordered
        # by when each wrote its summary
        item, folder = pair
        shown = item.problem is None and item.summary is not None
        started = item.summary.provenance.started_at if item.summary else ""
        return shown, started, (folder / "summary.json").stat().st_mtime_ns if shown else 0

    found = [(entry(root, name, folder), folder) for name, folder in folders(root).items()]
    return [item for item, _ in sorted(found, key=order, reverse=True)]


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=_HEADERS)


class LocalRequestsOnly:
    """Answers ``400`` to a request that names another host or comes from another site's
    page (the rules of :mod:`evalport.protocol._loopback`)."""

    def __init__(self, app: ASGIApp, bound: str) -> None:
        self.app = app
        self.bound = bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not local_request(dict(scope["headers"]), self.bound):
            page = problem_page("400", "this page answers only to the address it is served on")
            await _html(page, 400)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Refused(Exception):
    """What was asked cannot be shown: answered with the problem page saying why."""

    def __init__(self, title: str, message: str, status: int = 200) -> None:
        super().__init__(message)
        self.title, self.message, self.status = title, message, status


def build_app(root: Path, host: str = "127.0.0.1") -> Starlette:
    """The app over ``root``; ``host`` is the address it is served on."""

    def load(name: str) -> RunReport:
        try:
            folder = folders(root).get(name)
            if folder is None:
                raise _Refused("not found", f"no run named {name!r} under {root}", 404)
            listed = entry(root, name, folder)
            if listed.problem is not None:
                raise _Refused(name, listed.problem)
            return load_run_folder(folder, within=root)
        except ConfigError as error:
            raise _Refused(name, str(error)) from None

    def index(request: Request) -> HTMLResponse:
        try:
            return _html(runs_page(str(root), entries(root)))
        except ConfigError as error:
            raise _Refused("runs", str(error)) from None

    def run(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        params = request.query_params
        page = run_page(
            name,
            load(name),
            verdict=params.get("verdict", ""),
            tag=params.get("tag", ""),
            query=params.get("q", "").strip(),
        )
        return _html(page)

    def compared(request: Request) -> HTMLResponse:
        base_name = request.query_params.get("base", "")
        new_name = request.query_params.get("new", "")
        if not base_name or not new_name:
            raise _Refused("compare", "choose two runs: ?base=NAME&new=NAME", 400)
        return _html(compare_page(base_name, load(base_name), new_name, load(new_name)))

    async def refused(request: Request, error: Exception) -> HTMLResponse:
        assert isinstance(error, _Refused)
        return _html(problem_page(error.title, error.message), error.status)

    async def problem(request: Request, error: Exception) -> HTMLResponse:
        status = error.status_code if isinstance(error, HTTPException) else 500
        detail = error.detail if isinstance(error, HTTPException) else "internal error"
        return _html(problem_page(str(status), f"{request.url.path}: {detail}"), status)

    async def failure(request: Request, error: Exception) -> HTMLResponse:
        _log.error("evalport view: %s failed", request.url.path, exc_info=error)
        return await problem(request, error)

    middleware = []
    middleware.append(Middleware(LocalRequestsOnly, bound=host))
    return Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/run/{name}", run, methods=["GET"]),
            Route("/compare", compared, methods=["GET"]),
        ],
        middleware=middleware,
        exception_handlers={_Refused: refused, HTTPException: problem, Exception: failure},
    )
