"""The Redis URL syntax: each deployment's form parses, a bad URL says what to write."""

from __future__ import annotations

import argparse

import pytest
from evalport.protocol._redis_url import RedisURL, parse_redis_url
from evalport.server import _cli
from evalport.server.stores import RedisStore, open_store


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6390/2", RedisURL(kind="server", tls=False, hosts=(("127.0.0.1", 6390),), db=2)),
        ("redis://cache", RedisURL(kind="server", tls=False, hosts=(("cache", 6379),))),
        (
            "rediss://app:p%40ss@[::1]:6380/0?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required",
            RedisURL(
                kind="server", tls=True, hosts=(("::1", 6380),), username="app", password="p@ss",
                tls_options={"ssl_ca_certs": "/ca.pem", "ssl_cert_reqs": "required"},
            ),
        ),
        ("redis://:pw@h", RedisURL(kind="server", tls=False, hosts=(("h", 6379),), password="pw")),
        ("unix:///run/redis.sock?db=3", RedisURL(kind="unix", tls=False, path="/run/redis.sock", db=3)),
        (
            "redis+sentinel://app:pw@s1,s2:26380/main/1?wait_replicas=1&sentinel_password=sp",
            RedisURL(
                kind="sentinel", tls=False, hosts=(("s1", 26379), ("s2", 26380)),
                username="app", password="pw", service="main", db=1, wait_replicas=1,
                sentinel_password="sp",
            ),
        ),
        (
            "rediss+cluster://n1:7000,n2:7001?ssl_ca_certs=/ca.pem",
            RedisURL(
                kind="cluster", tls=True, hosts=(("n1", 7000), ("n2", 7001)),
                tls_options={"ssl_ca_certs": "/ca.pem"},
            ),
        ),
    ],
)  # fmt: skip
def test_each_form_parses(url: str, expected: RedisURL) -> None:
    assert parse_redis_url(url) == expected


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379", "no service name after the hosts"),
        ("redis+sentinel://s1:26379/", "no service name after the hosts"),
        ("redis+cluster://n1:7000/3", "a cluster has only db 0: drop the path"),
        ("redis://h1,h2", "several hosts are for redis+sentinel:// or redis+cluster://"),
        ("redis://h/0?ssl_ca_certs=/ca.pem", "need TLS: use the scheme rediss"),
        ("rediss://h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs is one of required, optional, none"),
        ("redis://h/0?socket_timeout=3", "unknown option socket_timeout (accepted: wait_replicas)"),
        ("redis+cluster://n1?wait_replicas=1", "wait_replicas is not supported with a cluster"),
        ("redis://h:70000", "must be a number from 1 to 65535"),
        ("redis://h/zero", "the db must be a whole number"),
        ("redis://h/0?wait_replicas=1&wait_replicas=2", "given twice"),
        ("redis://user:pw#1@h", "percent-encoded (%23)"),
        ("unix://host/run/redis.sock", "write unix:///PATH (three slashes)"),
        ("redis:///0", "no host"),
    ],
)
def test_a_bad_url_names_the_fix_and_the_form(url: str, says: str) -> None:
    with pytest.raises(ValueError, match="the form is") as caught:
        parse_redis_url(url)
    assert says in str(caught.value)


def test_errors_and_reprs_never_show_the_password() -> None:
    with pytest.raises(ValueError) as caught:
        parse_redis_url("redis+sentinel://app:topsecret@s1?sentinel_password=alsosecret")
    assert "topsecret" not in str(caught.value) and "alsosecret" not in str(caught.value)
    assert "app:***@s1" in str(caught.value)
    with pytest.raises(ValueError) as unknown:
        open_store("mongodb://app:topsecret@h")
    assert "topsecret" not in str(unknown.value)
    assert "redis+sentinel://HOST:26379/SERVICE" in str(unknown.value)
    store = RedisStore("redis://app:topsecret@127.0.0.1:1/0")
    assert "topsecret" not in repr(store) and "app:***@127.0.0.1:1" in repr(store)


def test_a_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ValueError, match="drop the braces"):
        RedisStore("redis://127.0.0.1:1/0", prefix="a{b}:")


def test_serve_answers_a_bad_store_url_with_exit_2_and_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", "serve-token-0123456789")
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(
        ["tests/server/replicas/agents.py:agent", "--store", "redis+sentinel://app:pw@s1:26379"]
    )
    assert _cli.main(args) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "no service name after the hosts" in error and "pw" not in error.replace("***", "")
