"""Load a local HTML file in headless Chromium over the DevTools protocol.

Collects console messages, uncaught exceptions, log entries (failed loads, CSP, network
attempts) and requests to anything but the file itself, then returns the rendered DOM's
text. Launch flags keep Chromium offline and quiet; the profile is a temporary folder.
``width`` sets the viewport width in CSS pixels, ``checks`` are JavaScript expressions
evaluated after every ``<details>`` was opened (their JSON values land in ``values``), and
``screenshot`` saves a full-page PNG there (and the page in slices beside it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import websockets

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    "about:blank",
]


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageLoad:
    text: str = ""
    html: str = ""
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: list[object] = field(default_factory=list)


async def _endpoint(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> str:
    port_file = profile / "DevToolsActivePort"
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode}")
        if port_file.exists():
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        await asyncio.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


async def load_page(
    path: Path,
    *,
    timeout: float = 30.0,
    width: int | None = None,
    checks: tuple[str, ...] = (),
    screenshot: Path | None = None,
) -> PageLoad:
    binary = chromium_binary()
    if binary is None:
        raise RuntimeError("chromium is not installed")
    profile = Path(tempfile.mkdtemp(prefix="evalport-chromium-"))
    process = subprocess.Popen(
        [binary, f"--user-data-dir={profile}", *FLAGS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = await _endpoint(profile, process, timeout)
        async with asyncio.timeout(timeout):
            return await _drive(url, path, width, checks, screenshot)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)


async def _slices(call, session: str, screenshot: Path, height: int = 1100) -> None:
    """Also save the page in viewport-sized slices (``name-1.png``, ...) for reading."""
    metrics = await call("Page.getLayoutMetrics", session)
    size = metrics["cssContentSize"]
    for number, top in enumerate(range(0, int(size["height"]), height), start=1):
        clip = {"x": 0, "y": top, "width": size["width"], "height": height, "scale": 1}
        shot = await call(
            "Page.captureScreenshot", session, format="png", clip=clip, captureBeyondViewport=True
        )
        path = screenshot.with_name(f"{screenshot.stem}-{number}.png")
        path.write_bytes(base64.b64decode(shot["data"]))


async def _drive(
    browser_url: str,
    path: Path,
    width: int | None,
    checks: tuple[str, ...],
    screenshot: Path | None,
) -> PageLoad:
    result = PageLoad()
    file_url = path.resolve().as_uri()
    async with websockets.connect(browser_url, max_size=None) as socket:
        ids = iter(range(1, 10_000))
        pending: dict[int, asyncio.Future[dict]] = {}
        loaded = asyncio.Event()

        async def reader() -> None:
            async for raw in socket:
                message = json.loads(raw)
                if "id" in message and message["id"] in pending:
                    pending.pop(message["id"]).set_result(message)
                    continue
                method, params = message.get("method"), message.get("params", {})
                if method == "Runtime.consoleAPICalled":
                    texts = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
                    result.console.append(f"{params['type']}: {' '.join(texts)}")
                elif method == "Runtime.exceptionThrown":
                    details = params["exceptionDetails"]
                    result.errors.append(
                        details.get("exception", {}).get("description") or details.get("text", "")
                    )
                elif method == "Log.entryAdded":
                    entry = params["entry"]
                    result.console.append(f"{entry['level']}: {entry['text']}")
                elif method == "Network.requestWillBeSent":
                    request_url = params["request"]["url"]
                    if request_url != file_url:
                        result.requests.append(request_url)
                elif method == "Page.loadEventFired":
                    loaded.set()

        async def call(method: str, session: str | None = None, **params: object) -> dict:
            number = next(ids)
            future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
            pending[number] = future
            message: dict[str, object] = {"id": number, "method": method, "params": params}
            if session:
                message["sessionId"] = session
            await socket.send(json.dumps(message))
            answer = await future
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error']}")
            return answer.get("result", {})

        listening = asyncio.create_task(reader())
        try:
            target = await call("Target.createTarget", url="about:blank")
            attached = await call(
                "Target.attachToTarget", targetId=target["targetId"], flatten=True
            )
            session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                await call(f"{domain}.enable", session)
            if width is not None:
                await call(
                    "Emulation.setDeviceMetricsOverride",
                    session,
                    width=width,
                    height=900,
                    deviceScaleFactor=1,
                    mobile=False,
                )
            await call("Page.navigate", session, url=file_url)
            await loaded.wait()
            await asyncio.sleep(0.2)  # let late console messages arrive
            evaluated = await call(
                "Runtime.evaluate",
                session,
                expression=(
                    "document.querySelectorAll('details').forEach(d => { d.open = true; });"
                    "[document.body.innerText, document.documentElement.outerHTML]"
                ),
                returnByValue=True,
            )
            result.text, result.html = evaluated["result"]["value"]
            for expression in checks:
                checked = await call(
                    "Runtime.evaluate", session, expression=expression, returnByValue=True
                )
                result.values.append(checked["result"].get("value"))
            if screenshot is not None:
                shot = await call(
                    "Page.captureScreenshot", session, format="png", captureBeyondViewport=True
                )
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                await _slices(call, session, screenshot)
            # exercise the filter script: clicking must not throw
            await call(
                "Runtime.evaluate",
                session,
                expression="document.querySelector('.filters button[data-verdict=failed]').click()",
            )
            await asyncio.sleep(0.05)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
    return result
