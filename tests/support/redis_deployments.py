"""Redis as production runs it, for tests: TLS with ACL users, Sentinel, Cluster.

Every process is a real ``redis-server`` on ``127.0.0.1`` and a free port, persisting
nothing, in a temporary folder removed on exit; every wait is bounded.

- :func:`running_tls_redis` starts a server that speaks only TLS, with a CA, a server
  certificate (for ``127.0.0.1``) and a client certificate made in the test
  (:func:`make_certificates`, with the ``cryptography`` package or else ``openssl``) and the ACL user
  :data:`ACL_USER` (password :data:`ACL_PASSWORD`) allowed only what the store needs
  (:data:`STORE_ACL`); the ``default`` user is off.
- :func:`running_sentinel` starts a master, one replica and one Sentinel (quorum 1, a
  master is down after 2 s); :meth:`SentinelSetup.kill_master` kills the master with
  SIGKILL, waits for the Sentinel to promote the replica and restarts the old master as
  the new master's replica.
- :func:`running_cluster` starts three masters with ``--cluster-enabled yes`` (on ports
  whose bus port, 10000 higher, is free too) and joins them with ``redis-cli --cluster create ... --cluster-yes``.
- Each skips the test, naming what is missing, when ``redis-server`` (or ``redis-cli``,
  or TLS support in ``redis-server``, or ``cryptography``) is not there.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.redis import REDIS_SERVER
from support.servers import free_port

__all__ = [
    "ACL_PASSWORD",
    "ACL_USER",
    "STORE_ACL",
    "Certificates",
    "RedisProcess",
    "SentinelSetup",
    "make_certificates",
    "running_cluster",
    "running_sentinel",
    "running_tls_redis",
]

REDIS_CLI = shutil.which("redis-cli")
ACL_USER = "evalport"
ACL_PASSWORD = "s3cret-acl-pass"
# What RedisStore needs, and nothing else: its keys and channels under the prefix, the
# commands of its scripts, PTTL (the sweep), PING, pub/sub for the approvals relay, WAIT.
STORE_ACL = (
    "~evalport:* &evalport:* +ping +hello +auth +client|setname "
    "+evalsha +eval +script|load +script|exists +time +exists +pttl +pexpire +get +set "
    "+del +hset +hget +hmget +hdel +hexists +lrem +rpush +llen +lpop +zadd +zrem +zcard "
    "+zscore +zrangebyscore +zremrangebyscore +zremrangebyrank "
    "+publish +subscribe +unsubscribe +spublish +ssubscribe +sunsubscribe +wait"
)
_QUIET = ["--save", "", "--appendonly", "no", "--loglevel", "warning"]


def _skip_without_redis() -> str:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return REDIS_SERVER


def _command(port: int, *command: str, tls: Sequence[str] = ()) -> str:
    """``redis-cli -p port command`` (``""`` if it cannot connect)."""
    assert REDIS_CLI is not None
    done = subprocess.run(
        [REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), *tls, *command],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return done.stdout.strip()


def _wait(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@dataclass
class RedisProcess:
    """One ``redis-server`` with ``args`` (the port is ``port``); ``start`` waits for it."""

    port: int
    args: list[str]
    ready: Callable[[], bool]
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> None:
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start: {' '.join(self.args)}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                process.kill()
                process.wait(10)


@contextlib.contextmanager
def _processes() -> Iterator[tuple[Path, list[RedisProcess]]]:
    """A temporary folder and a list of processes, all stopped on exit."""
    started: list[RedisProcess] = []
    with tempfile.TemporaryDirectory(prefix="evalport-redis-") as folder:
        try:
            yield Path(folder), started
        finally:
            for process in started:
                process.stop()


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_port() -> int:
    """A free port whose cluster bus port (``port + 10000``) is free too."""
    for _ in range(200):
        port = free_port()
        if port + 10000 <= 65535 and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _server(
    folder: Path, *args: str, port: int = 0, ready: Callable[[], bool] | None = None
) -> RedisProcess:
    port = port or free_port()
    command = [_skip_without_redis(), "--port", str(port), "--bind", "127.0.0.1"]
    command += ["--dir", str(folder), *_QUIET, *args]
    return RedisProcess(port, command, ready or (lambda: _answers(port)))


# -- TLS -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """PEM files: the test CA, the server's certificate and key, a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _certificates(folder: Path) -> Certificates:
    return Certificates(
        ca=folder / "ca.crt",
        server_cert=folder / "server.crt",
        server_key=folder / "server.key",
        client_cert=folder / "client.crt",
        client_key=folder / "client.key",
    )


def _openssl_certificates(folder: Path) -> Certificates:
    """:func:`make_certificates` with the ``openssl`` command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("neither the cryptography package nor the openssl command is installed")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=30)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.crt"),
        "-days", "1", "-subj", "/CN=evalport test CA")  # fmt: skip
    for stem, extensions in (
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        (folder / f"{stem}.ext").write_text(extensions)
        run("req", *ec, "-keyout", str(folder / f"{stem}.key"), "-out", str(folder / f"{stem}.csr"),
            "-subj", f"/CN=evalport test {stem}")  # fmt: skip
        run("x509", "-req", "-in", str(folder / f"{stem}.csr"), "-CA", str(folder / "ca.crt"),
            "-CAkey", str(folder / "ca.key"), "-CAcreateserial", "-days", "1",
            "-out", str(folder / f"{stem}.crt"), "-extfile", str(folder / f"{stem}.ext"))  # fmt: skip
    return _certificates(folder)


def make_certificates(folder: Path) -> Certificates:
    """A CA made now, and a server (``127.0.0.1``, ``localhost``) and a client certificate
    (with the ``cryptography`` package, else the ``openssl`` command)."""
    try:
        from cryptography import x509
    except ImportError:
        return _openssl_certificates(folder)
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> object:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def write(path: Path, key: ec.EllipticCurvePrivateKey, cert: object) -> None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))  # type: ignore[attr-defined]

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("evalport test CA"))
        .issuer_name(name("evalport test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    write(folder / "ca", ca_key, ca)

    def issue(stem: str, usage: object, names: list[object]) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(f"evalport test {stem}"))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        write(folder / stem, key, builder.sign(ca_key, hashes.SHA256()))

    local = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    issue("server", ExtendedKeyUsageOID.SERVER_AUTH, local)
    issue("client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return _certificates(folder)


def _tls_capable() -> None:
    binary = _skip_without_redis()
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            [binary, "--port", "0", "--tls-port", "0", "--dir", folder],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    if "FATAL CONFIG" in probe.stdout + probe.stderr:
        pytest.skip(
            f"redis-server does not take --tls-port (built without TLS): {probe.stdout[-200:]}"
        )


@dataclass
class TLSRedis:
    """A TLS-only ``redis-server`` on ``port`` with :data:`ACL_USER`."""

    port: int
    certificates: Certificates
    process: RedisProcess

    def url(
        self, *, user: str = ACL_USER, password: str = ACL_PASSWORD, client_cert: bool = True
    ) -> str:
        certs = self.certificates
        query = f"ssl_ca_certs={certs.ca}"
        if client_cert:
            query += f"&ssl_certfile={certs.client_cert}&ssl_keyfile={certs.client_key}"
        return f"rediss://{user}:{password}@127.0.0.1:{self.port}/0?{query}"


@contextlib.contextmanager
def running_tls_redis(*, auth_clients: str = "optional") -> Iterator[TLSRedis]:
    """A TLS-only server (no plain port); ``auth_clients``: ``yes``, ``optional`` or ``no``."""
    _tls_capable()
    if REDIS_CLI is None:
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    with _processes() as (folder, started):
        certs = make_certificates(folder)
        port = free_port()
        tls_cli = ["--tls", "--cacert", str(certs.ca), "--cert", str(certs.client_cert),
                   "--key", str(certs.client_key)]  # fmt: skip
        acl = folder / "users.acl"
        acl.write_text(f"user default off\nuser {ACL_USER} on >{ACL_PASSWORD} {STORE_ACL}\n")
        args = [
            _skip_without_redis(), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
            "--dir", str(folder), *_QUIET,
            "--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key),
            "--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", auth_clients,
            "--aclfile", str(acl),
        ]  # fmt: skip

        def ready() -> bool:
            reply = _command(port, "--user", ACL_USER, "--pass", ACL_PASSWORD, "PING", tls=tls_cli)
            return reply.endswith("PONG")

        server = RedisProcess(port, args, ready)
        started.append(server)
        server.start()
        yield TLSRedis(port, certs, server)


# -- Sentinel --------------------------------------------------------------------------

SERVICE = "evalmaster"


@dataclass
class SentinelSetup:
    """A master, its replica and one Sentinel watching them as :data:`SERVICE`."""

    folder: Path
    sentinel_port: int
    nodes: list[RedisProcess] = field(default_factory=list)

    def url(self, query: str = "") -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SERVICE}" + (
            f"?{query}" if query else ""
        )

    def master_port(self) -> int:
        reply = _command(self.sentinel_port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(reply.split()[1])

    def master(self) -> RedisProcess:
        port = self.master_port()
        return next(node for node in self.nodes if node.port == port)

    def kill_master(self, timeout: float = 20.0) -> None:
        """SIGKILL the master; once the Sentinel promoted the replica, restart the old
        master (empty) as the new master's replica and wait until it is in sync."""
        old = self.master()
        old.kill()
        _wait(lambda: self.master_port() != old.port, "the Sentinel to fail over", timeout)
        new = self.master_port()
        if "--replicaof" in old.args:  # it was the replica before: drop its old master
            at = old.args.index("--replicaof")
            del old.args[at : at + 3]
        old.args += ["--replicaof", "127.0.0.1", str(new)]
        old.start()
        _wait(
            lambda: "master_link_status:up" in _command(old.port, "INFO", "replication"),
            "the old master to sync as a replica",
            timeout,
        )

    def replica_in_sync(self) -> bool:
        return "connected_slaves:1" in _command(self.master_port(), "INFO", "replication")


@contextlib.contextmanager
def running_sentinel() -> Iterator[SentinelSetup]:
    """Master + replica + Sentinel (quorum 1, down after 2 s, failover timeout 3 s)."""
    if REDIS_CLI is None:
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    with _processes() as (folder, started):
        (folder / "m").mkdir()
        master = _server(folder / "m")
        started.append(master)
        master.start()
        (folder / "r").mkdir()
        replica = _server(folder / "r", "--replicaof", "127.0.0.1", str(master.port))
        started.append(replica)
        replica.start()
        _wait(
            lambda: "master_link_status:up" in _command(replica.port, "INFO", "replication"),
            "the replica to sync",
        )
        port = free_port()
        config = folder / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 1\n"
            # 2 s, not less: on a loaded 2-core machine a PING answered late must not
            # look like a dead master (a second, unplanned failover mid-test)
            f"sentinel down-after-milliseconds {SERVICE} 2000\n"
            f"sentinel failover-timeout {SERVICE} 3000\n"
        )
        sentinel = RedisProcess(
            port, [_skip_without_redis(), str(config), "--sentinel"], lambda: _answers(port)
        )
        started.append(sentinel)
        sentinel.start()
        setup = SentinelSetup(folder, port, [master, replica])
        _wait(
            lambda: "127.0.0.1" in _command(port, "SENTINEL", "REPLICAS", SERVICE),
            "the Sentinel to find the replica",
        )
        yield setup


# -- Cluster ---------------------------------------------------------------------------


@contextlib.contextmanager
def running_cluster(masters: int = 3) -> Iterator[list[RedisProcess]]:
    """``masters`` cluster nodes on loopback ports, joined, every slot served."""
    if REDIS_CLI is None:
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    with _processes() as (folder, started):
        for n in range(masters):
            node_folder = folder / f"n{n}"
            node_folder.mkdir()
            node = _server(
                node_folder,
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(node_folder / "nodes.conf"),
                "--cluster-node-timeout", "2000",
                port=_cluster_port(),
            )  # fmt: skip
            started.append(node)
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in started]
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *addresses, "--cluster-yes"],
            capture_output=True,
            timeout=30,
            check=True,
        )
        for node in started:
            _wait(
                lambda node=node: "cluster_state:ok" in _command(node.port, "CLUSTER", "INFO"),  # type: ignore[misc]
                "the cluster to serve every slot",
            )
        yield started
