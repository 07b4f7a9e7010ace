"""A real SMTP server for the tests (aiosmtpd on loopback) with a throwaway certificate: STARTTLS
or implicit TLS, a login that is accepted only over TLS, every message kept."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.kit.pg import free_port

USER, PASSWORD = "digest@example.org", "app-password-16c"


def certificate(root: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` (and 127.0.0.1): (certificate, key)."""
    cert, key = root / f"{name}.crt", root / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
            "-addext", f"subjectAltName=DNS:{name},IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@dataclass
class Mailbox:
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
    logins: list[tuple[str, bool]] = field(default_factory=list)  # (user, accepted)

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content
        found = message_from_bytes(raw, policy=policy.default)
        assert isinstance(found, EmailMessage)
        self.messages.append(found)
        return "250 OK"

    def authenticate(
        self, _server: Any, _session: Any, _envelope: Any, _mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = data.login.decode() == USER and data.password.decode() == PASSWORD
        self.logins.append((data.login.decode(), ok))
        return AuthResult(success=ok, handled=False)


@contextmanager
def smtp_server(root: Path, mode: str, name: str = "localhost") -> Iterator[Mailbox]:
    """``mode``: ``starttls`` (STARTTLS required before a login), ``tls`` (implicit TLS) or
    ``none`` (no TLS at all)."""
    cert, key = certificate(root, name)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Mailbox(free_port())
    options: dict[str, Any] = {"authenticator": box.authenticate, "auth_require_tls": True}
    if mode == "starttls":
        options.update(tls_context=context, require_starttls=True)
    elif mode == "tls":  # the server's own TLS check knows STARTTLS only: the socket is TLS
        options.update(ssl_context=context, auth_require_tls=False)
    else:
        options.update(auth_require_tls=False)
    controller = Controller(box, hostname="127.0.0.1", port=box.port, **options)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
