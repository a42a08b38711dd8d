"""Who counts as this machine for a server without a token (evalport.protocol._loopback)."""

from __future__ import annotations

import pytest
from evalport.protocol._loopback import is_loopback, local_request


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.1", "localhost", "::1", "[::1]"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1", ""])
def test_other_addresses(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    "headers",
    [
        {b"host": b"127.0.0.1:8000"},
        {b"host": b"localhost"},
        {b"host": b"[::1]:8000"},
        {b"host": b"127.0.0.2:9"},
        {b"host": b"127.0.0.1:8000", b"origin": b"http://localhost:3000"},
        {b"host": b"127.0.0.1:8000", b"sec-fetch-site": b"same-origin"},
    ],
)
def test_local_requests(headers: dict[bytes, bytes]) -> None:
    assert local_request(headers)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {b"host": b"evil.example"},
        {b"host": b"127.0.0.1.evil.example"},
        {b"host": b"["},
        {b"host": b"127.0.0.1:8000", b"origin": b"https://evil.example"},
        {b"host": b"127.0.0.1:8000", b"origin": b"null"},
        {b"host": b"127.0.0.1:8000", b"origin": b"file://"},
        {b"host": b"127.0.0.1:8000", b"sec-fetch-site": b"cross-site"},
    ],
)
def test_requests_from_elsewhere(headers: dict[bytes, bytes]) -> None:
    assert not local_request(headers)


def test_the_bound_address_is_a_name_of_this_server() -> None:
    assert local_request({b"host": b"192.168.1.5:8000"}, "192.168.1.5")
    assert not local_request({b"host": b"192.168.1.6:8000"}, "192.168.1.5")
    assert local_request({b"host": b"view.internal"}, "view.internal")
    # bound to every address: any address literal, never a name (DNS rebinding needs one)
    assert local_request({b"host": b"10.1.2.3:8000"}, "0.0.0.0")
    assert local_request({b"host": b"[fe80::1]:8000"}, "::")
    assert not local_request({b"host": b"evil.example:8000"}, "0.0.0.0")
