"""The safe trace policy keeps no credential of a part's URL, whatever its scheme or spacing."""

from __future__ import annotations

import hashlib

import pytest
from evalport.protocol import AgentRun, Message, Step, TracePolicy, UserPart
from evalport.protocol._policy import safe_url


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@files.example/a.png",
        " https://user:pw@files.example/a.png",  # a leading space used to keep it verbatim
        "https://user:pw@files.example/a.png\n",
        "ftp://user:pw@files.example/a.png",
        "s3://bucket/a.png?X-Amz-Signature=secret",
        "gs://bucket/a.png#token=secret",
        "HTTPS://files.example/a.png?sig=secret",
    ],
)
def test_credentials_become_a_digest_of_the_whole_url(url: str) -> None:
    safe = safe_url(url)
    assert "pw" not in safe and "secret" not in safe
    assert safe.endswith("?sha256=" + hashlib.sha256(url.encode()).hexdigest())
    assert "files.example/a.png" in safe or "bucket/a.png" in safe


@pytest.mark.parametrize(
    "url",
    ["https://files.example/a.png", "s3://bucket/a.png", "a note, not a URL", "receipt.png"],
)
def test_a_url_with_nothing_to_hide_stays(url: str) -> None:
    assert safe_url(url) == url


def test_a_malformed_url_keeps_only_its_digest() -> None:
    url = "https://user:pw@[::1/a"
    assert safe_url(url) == "sha256:" + hashlib.sha256(url.encode()).hexdigest()


@pytest.mark.parametrize("scheme", ["data:", "DATA:", "Data:", " data:"])
def test_a_data_url_in_any_case_keeps_only_the_digest_of_its_bytes(scheme: str) -> None:
    url = scheme + "image/png;base64,iVBORw0KGgo="
    run = AgentRun(user_parts=[UserPart(type="image", turn=1, url=url)])
    part = TracePolicy.safe().apply(run).user_parts[0]
    assert part.url is None and part.data is None
    assert part.sha256 == hashlib.sha256(url.encode()).hexdigest()
    block = {"type": "image_url", "image_url": {"url": url}}
    message = Message(role="assistant", content=[block])
    step = TracePolicy.safe().apply(AgentRun(steps=[Step(output_messages=[message])])).steps[0]
    assert "iVBOR" not in str(step.output_messages[0].content)
