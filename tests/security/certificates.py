"""A certificate authority and a server certificate for 127.0.0.1, made per test session.

``trustme`` makes them in memory; the servers (memcached ``-Z``, redis-server
``--tls-port``) read them from files, and the clients trust ``ca.pem``. A second,
unrelated authority stands for the wrong certificate.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Certificates:
    """Files a TLS server and its clients need."""

    ca: Path
    server_cert: Path
    server_key: Path
    other_ca: Path  # an authority that signed nothing the servers show

    def client_context(self) -> ssl.SSLContext:
        """A context that trusts this authority: how the test pings a server."""
        return ssl.create_default_context(cafile=str(self.ca))

    def connect(self, port: int) -> socket.socket:
        """Open a TLS connection to the server on ``port`` (the readiness ping's)."""
        raw = socket.create_connection((HOST, port), timeout=0.5)
        try:
            return self.client_context().wrap_socket(raw, server_hostname=HOST)
        except BaseException:
            raw.close()
            raise


def make_certificates(directory: Path) -> Certificates:
    """Write a CA, a server certificate for 127.0.0.1 and an unrelated CA to ``directory``."""
    ca, other = trustme.CA(), trustme.CA()
    issued = ca.issue_cert(HOST, "localhost")
    files = Certificates(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "other-ca.pem",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.other_ca))
    issued.private_key_pem.write_to_path(str(files.server_key))
    with files.server_cert.open("wb") as chain:
        for blob in issued.cert_chain_pems:
            chain.write(blob.bytes())
    return files
