"""``evalport view`` as a real process over real runs, read with an HTTP client: unreadable
folders listed with their reason, hostile text escaped, no path outside PATH reachable,
other hosts refused, nothing written; and the command's usage errors."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from evalport.client.reports._view_app import build_app
from evalport.protocol._cli import main
from view_support import AGENTS, EVALPORT, files_and_times, make_runs, viewing

HOSTILE = """
from evalport.client import eval_case


@eval_case("<script>alert('description')</script>", tags=["<i>tag</i>"])
async def hostile(ctx):
    await ctx.send("<img src=x onerror=alert('message')>")
    ctx.contains("</td></table><script>alert('assertion')</script>")


@eval_case("a long message")
async def long_message(ctx):
    await ctx.send("filler " * 80 + "NEEDLE-PAST-THE-CUT")
"""
SECRET = "TOP-SECRET-OUTSIDE-THE-RUNS"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("view")
    (top / "secret.txt").write_text(SECRET)
    folder = top / "runs"
    make_runs(folder)
    (top / "evals").mkdir()
    (top / "evals" / "hostile_eval.py").write_text(textwrap.dedent(HOSTILE))
    done = subprocess.run(
        [EVALPORT, "run", str(top / "evals"), "--local", AGENTS["passing"], "--out", "hostile"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (folder / "empty").mkdir()
    (folder / "garbage").mkdir()
    (folder / "garbage" / "summary.json").write_text("{not json")
    (folder / "partial").mkdir()
    (folder / "partial" / "summary.json").write_bytes(
        (folder / "passing" / "summary.json").read_bytes()
    )
    broken_lines = folder / "broken-lines"
    broken_lines.mkdir()
    (broken_lines / "summary.json").write_bytes((folder / "passing" / "summary.json").read_bytes())
    (broken_lines / "results.jsonl").write_text('{"case_id": 5}\n')
    damaged = folder / "damaged-trial"
    shutil.copytree(folder / "passing", damaged)
    trial = sorted(damaged.glob("cases/*/trial-1.json"))[0]
    saved = json.loads(trial.read_text())
    saved["run"] = {"steps": "abc"}
    trial.write_text(json.dumps(saved))
    (folder / "outside").symlink_to(top / "evals")
    (folder / "notes.txt").write_text("a file, not a run")
    (folder / "<img src=x onerror=alert('folder')>").mkdir()
    return folder


@pytest.fixture(scope="module")
def url(runs: Path) -> Iterator[str]:
    before = files_and_times(runs)
    with viewing(runs) as address:
        yield address
    assert files_and_times(runs) == before


def get(url: str, path: str, **headers: str) -> httpx.Response:
    return httpx.get(url + path, headers=headers, timeout=10)


def raw_get(url: str, path: str) -> tuple[int, str]:
    """A request with its path sent exactly as written (no client-side normalising)."""
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


def test_every_folder_is_listed_and_unreadable_ones_say_why(url: str, runs: Path) -> None:
    answer = get(url, "/")
    assert answer.status_code == 200
    page = answer.text
    for name in ("passing", "regressed", "hostile"):
        assert f'href="/run/{name}"' in page
    shown = page[page.index("<h2>Not shown</h2>") :]
    assert f"{runs / 'empty' / 'summary.json'} is missing: not a run folder" in shown
    assert f"{runs / 'garbage' / 'summary.json'}: not an evalport results file" in shown
    assert f"{runs / 'partial' / 'results.jsonl'} is missing: a partial run" in shown
    assert f"{runs / 'outside'} leads outside {runs}: not shown" in shown
    assert "notes.txt" not in page
    # a run whose results do not decode is listed, and opening it says why
    assert 'href="/run/broken-lines"' in page
    opened = get(url, "/run/broken-lines")
    assert opened.status_code == 200
    assert f"{runs / 'broken-lines' / 'results.jsonl'}:1: not a case result" in opened.text
    assert "is missing: a partial run" in get(url, "/run/partial").text


def test_a_trial_file_with_a_damaged_run_is_a_reason_not_a_failure(url: str, runs: Path) -> None:
    opened = get(url, "/run/damaged-trial")
    assert opened.status_code == 200
    assert "default-src 'none'" in opened.headers["content-security-policy"]
    assert opened.headers["content-type"].startswith("text/html")
    assert "trial-1.json: its run is unreadable" in opened.text
    compared = get(url, "/compare?base=passing&new=damaged-trial")
    assert compared.status_code == 200 and "its run is unreadable" in compared.text


async def test_a_failing_page_answers_the_problem_page_with_its_headers(
    runs: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from evalport.client.reports import _view_app

    def broken(*args: object, **kwargs: object) -> str:
        raise AttributeError("a page that fails")

    monkeypatch.setattr(_view_app, "run_page", broken)
    transport = httpx.ASGITransport(_view_app.build_app(runs), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.get("/run/passing")
    assert answer.status_code == 500
    assert answer.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert "/run/passing: internal error" in answer.text
    assert "a page that fails" not in answer.text
    assert "a page that fails" in caplog.text


def test_every_value_is_escaped(url: str) -> None:
    for path in ("/", "/run/hostile", "/run/hostile?q=alert", "/compare?base=hostile&new=passing"):
        page = get(url, path).text
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "<i>tag</i>" not in page
    assert "&lt;img src=x onerror=alert(&#x27;folder&#x27;)&gt;" in get(url, "/").text
    page = get(url, "/run/hostile?q=alert").text
    assert "&lt;script&gt;alert(&#x27;description&#x27;)&lt;/script&gt;" in page
    assert "onerror=<mark>alert</mark>(&#x27;message&#x27;)&gt;" in page
    echoed = get(url, '/run/hostile?q="><script>alert(1)</script>').text
    assert 'value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in echoed


@pytest.mark.parametrize(
    "path",
    [
        "/run/..",
        "/run/%2e%2e",
        "/run/..%2Fsecret.txt",
        "/run/..%2F..%2Fsecret.txt",
        "/run/%2Fetc%2Fpasswd",
        "/run/passing/..%2F..%2Fsecret.txt",
        "/../secret.txt",
        "/run/../../secret.txt",
        "/compare?base=..&new=passing",
        "/compare?base=passing&new=%2Fetc%2Fpasswd",
        "/run/outside",
        "/secret.txt",
    ],
)
def test_no_path_reaches_outside_the_runs(url: str, path: str) -> None:
    status, body = raw_get(url, path)
    assert SECRET not in body and "root:x:0:0" not in body and "hostile_eval" not in body
    assert status in (200, 404), (status, body[:200])
    if path == "/run/outside":  # listed as not shown: its page says why, and no more
        assert "leads outside" in body
    else:
        assert status == 404 and "not found" in body.lower()


def test_another_host_and_other_methods_are_refused(url: str) -> None:
    assert get(url, "/", host="attacker.example").status_code == 400
    assert get(url, "/", host="127.0.0.1.attacker.example").status_code == 400
    assert get(url, "/", host="[").status_code == 400
    for name in ("localhost", "127.0.0.1", "[::1]"):
        assert get(url, "/", host=f"{name}:{urlsplit(url).port}").status_code == 200
    assert httpx.post(url + "/", timeout=10).status_code == 405
    # a page of another site that reached the right address (a rebound name) is refused too
    assert get(url, "/", origin="https://attacker.example").status_code == 400
    assert get(url, "/", origin="null").status_code == 400
    assert get(url, "/", **{"sec-fetch-site": "cross-site"}).status_code == 400
    assert get(url, "/", origin=f"http://localhost:{urlsplit(url).port}").status_code == 200


@pytest.mark.parametrize("address", ["127.0.0.2", "127.1", "192.168.1.5", "0.0.0.0"])
async def test_any_address_it_binds_keeps_other_host_names_out(runs: Path, address: str) -> None:
    app = build_app(runs, address)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        assert (await client.get("http://127.0.0.2:8000/")).status_code == 200
        assert (await client.get("http://attacker.example/")).status_code == 400
        if address == "192.168.1.5":
            assert (await client.get("http://192.168.1.5:8000/")).status_code == 200


def test_pages_allow_no_script_and_no_network(url: str) -> None:
    answer = get(url, "/run/regressed")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script" not in policy
    assert "<script" not in answer.text and "http://" not in answer.text.split("</style>")[1]


def test_a_missing_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert f"{tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err


def test_a_port_in_use_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["view", str(tmp_path), "--port", str(port)]) == 2
    assert f"--host 127.0.0.1 --port {port}: cannot listen there (" in capsys.readouterr().err


def test_without_the_view_extra_it_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)  # as if it were not installed
    assert main(["view", str(tmp_path)]) == 2
    assert "pip install 'evalport[view]'" in capsys.readouterr().err


def test_one_run_folder_as_path(runs: Path) -> None:
    with viewing(runs / "regressed") as address:
        page = get(address, "/").text
        assert 'href="/run/regressed"' in page and "Not shown" not in page
        assert get(address, "/run/regressed?verdict=failed").text.count("<details") == 4
    summary = json.loads((runs / "regressed" / "summary.json").read_text())
    assert summary["counts"]["failed"] == 4


def test_open_opens_the_printed_address_in_the_browser(runs: Path, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"  # what $BROWSER names is what webbrowser runs
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    with viewing(runs, "--open", env={"BROWSER": str(browser)}) as address:
        deadline = time.monotonic() + 10
        while not (opened.exists() and opened.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.read_text() == address + "/"


def test_search_reads_long_messages_whole(url: str) -> None:
    page = get(url, "/run/hostile?q=needle-past").text
    assert page.count("<details") == 1 and "hostile_eval::long_message" in page
    assert "filler filler <mark>NEEDLE-PAST</mark>-THE-CUT</code>" in page
    assert "<code>…" in page  # the hit is shown around the match, not whole


def test_runs_started_in_the_same_second_are_listed_by_when_they_were_written(
    runs: Path, tmp_path: Path
) -> None:
    from evalport.client.reports._view_app import entries

    # two copies of one run: the same started_at to the second, names against the order
    older, newer = tmp_path / "b", tmp_path / "a"
    shutil.copytree(runs / "passing", older)
    shutil.copytree(runs / "passing", newer)
    written = (older / "summary.json").stat().st_mtime_ns
    os.utime(older / "summary.json", ns=(written, written))
    os.utime(newer / "summary.json", ns=(written + 10**9, written + 10**9))
    assert [item.name for item in entries(tmp_path)] == ["a", "b"]
    os.utime(older / "summary.json", ns=(written + 2 * 10**9, written + 2 * 10**9))
    assert [item.name for item in entries(tmp_path)] == ["b", "a"]


async def test_files_inside_a_run_that_lead_elsewhere_are_reasons_not_reads(
    runs: Path, tmp_path: Path
) -> None:
    """A run's own files linked outside PATH, to a device, or made a FIFO are not read:
    each page answers at once with the file and why (one showed a file outside PATH,
    /dev/zero was read without end, a FIFO hung its request)."""
    root = tmp_path / "runs"
    outside = tmp_path / "outside"
    shutil.copytree(runs / "passing", outside)
    trial = sorted((runs / "passing").glob("cases/*/trial-1.json"))[0].relative_to(runs / "passing")
    spoils = {
        "linked-results": ("results.jsonl", lambda file: file.symlink_to(outside / file.name)),
        "zero-trial": (trial, lambda file: file.symlink_to("/dev/zero")),
        "fifo-trial": (trial, lambda file: os.mkfifo(file)),
    }
    for name, (spoilt, spoil) in spoils.items():
        shutil.copytree(runs / "passing", root / name)
        (root / name / spoilt).unlink()
        spoil(root / name / spoilt)
    app = build_app(root)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        for name, says in (
            ("linked-results", "leads outside"),
            ("zero-trial", "leads outside"),
            ("fifo-trial", "not a regular file"),
        ):
            page = await asyncio.wait_for(client.get(f"/run/{name}"), 10)
            assert page.status_code == 200 and says in page.text, (name, page.text[-500:])
