"""Mail through an SMTP relay: STARTTLS (``starttls``, port 587), implicit TLS (``tls``, 465) or
none (``none``, 25, a local relay, no login). The relay's certificate and host name are always
verified (the system's CAs, or ``ca_file``); a login is never sent without TLS; the password is
read from its own file (owner only, no group or other permission)."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from agentc.attention.config import MailConfig
from agentc.attention.paging import read_secret
from agentc.core.errors import AgentcError


class MailFailed(AgentcError):
    """The relay refused or could not be reached (the message names the error, never the
    password)."""


def _context(config: MailConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(config.ca_file) if config.ca_file else None)
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def message(config: MailConfig, subject: str, body: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = config.mail_from
    msg["To"] = ", ".join(config.mail_to)
    msg["Subject"] = subject
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain="agentc.invalid")
    msg.set_content(body)
    return msg


def _login(client: smtplib.SMTP, user: str, password: str) -> None:
    """AUTH PLAIN when the relay offers it (one try: a refusal is final, not a cue to try the
    next mechanism), else whatever smtplib finds."""
    client.ehlo_or_helo_if_needed()
    if "PLAIN" in client.esmtp_features.get("auth", "").upper().split():
        client.user, client.password = user, password
        client.auth("PLAIN", client.auth_plain)
    else:
        client.login(user, password)


def send(config: MailConfig, subject: str, body: str) -> None:
    password = (
        read_secret(config.smtp_password_file, "mail.smtp_password_file")
        if config.smtp_password_file
        else None
    )
    tls, port, timeout = config.tls(), config.port(), config.timeout_seconds
    msg = message(config, subject, body)
    try:
        if tls == "tls":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                config.smtp_host, port, timeout=timeout, context=_context(config)
            )
        else:
            client = smtplib.SMTP(config.smtp_host, port, timeout=timeout)
        with client:
            if tls == "starttls":
                client.starttls(context=_context(config))
            if password is not None and config.smtp_user is not None:
                _login(client, config.smtp_user, password)
            client.send_message(msg)
    except smtplib.SMTPResponseException as exc:
        raise MailFailed(f"{type(exc).__name__} {exc.smtp_code}") from None
    except (smtplib.SMTPException, ssl.SSLError, OSError) as exc:
        raise MailFailed(f"{type(exc).__name__}: {exc}") from None
