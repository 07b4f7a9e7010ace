"""agentc-attention digest by mail, against a real SMTP server in the test (STARTTLS and
implicit TLS, a throwaway certificate, a login): the mail parsed back carries the digest and a
signed "I read this" link; opening the link shows a button and records nothing, pressing it
records the read; the printed text carries no link; a relay whose certificate names another
host never gets the password."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.attention.kit import Setup, attention, private
from tests.attention.smtp import PASSWORD, USER, Mailbox, certificate, smtp_server

LINK = re.compile(r"http://\S+/console/digest-read/\S+")


def _mail(setup: Setup, box: Mailbox, tls: str, ca: Path, **more: Any) -> Path:
    password = private(setup.root / "smtp-password", PASSWORD + "\n")
    mail = {
        "smtp_host": "localhost",
        "smtp_port": box.port,
        "smtp_tls": tls,
        "ca_file": str(ca),
        "mail_from": USER,
        "mail_to": ["owner@example.org", "second@example.org"],
        **more,
    }
    if tls != "none":
        mail.update(smtp_user=USER, smtp_password_file=str(password))
    return setup.config(mail=mail)


def _last_read(setup: Setup) -> Any:
    token = setup.token_file.read_text().strip()
    got = httpx.get(
        f"{setup.server.url}/api/v1/projects/{setup.project_id}/attention",
        headers={"Authorization": f"Bearer {token}"},
    )
    return got.json()["data"]["last_read"]


@pytest.mark.parametrize("tls", ["starttls", "tls"])
def test_the_mailed_digest_carries_a_link_that_records_a_read(
    setup: Setup, tmp_path: Path, tls: str
) -> None:
    with smtp_server(tmp_path, tls) as box:
        config = _mail(setup, box, tls, tmp_path / "localhost.crt")
        out = attention(config, "digest")
        assert out.returncode == 0, out.stderr
    assert box.logins == [(USER, True)]
    [mail] = box.messages
    assert mail["To"] == "owner@example.org, second@example.org" and mail["From"] == USER
    assert mail["Subject"].startswith("agentc digest: p-") and "item(s)" in mail["Subject"]
    body = mail.get_content()
    assert "agentc attention digest" in body and "Spend:" in body and "Last read: never" in body
    assert "ready tasks: 0" in body
    [link] = LINK.findall(body)
    assert not LINK.search(out.stdout) and "agentc attention digest" in out.stdout
    assert PASSWORD not in out.stdout + out.stderr

    # A mail scanner fetching the link records nothing: the page only shows a button.
    page = httpx.get(link)
    assert page.status_code == 200 and "I read this" in page.text
    assert _last_read(setup) is None
    pressed = httpx.post(link)
    assert pressed.status_code == 200 and "is recorded" in pressed.text
    read = _last_read(setup)
    assert read["by"] == "attention-bot" and read["via"] == "link"

    # A link is only for its project and only for reading: tampered, it records nothing.
    forged = link[:-3] + ("aaa" if not link.endswith("aaa") else "bbb")
    refused = httpx.post(forged)
    assert refused.status_code == 404 and "not a digest link" in refused.text
    api = httpx.get(
        f"{setup.server.url}/api/v1/projects/{setup.project_id}/attention",
        headers={"Authorization": f"Bearer {link.rsplit('/', 1)[1]}"},
    )
    assert api.status_code == 401


def test_designating_another_sender_voids_the_links_the_last_one_mailed(
    setup: Setup, tmp_path: Path
) -> None:
    other = setup.server.issue_token("mailer-bot", setup.project_id, access="read")
    out = setup.server.cli(
        "designate-digest-sender", "--project", setup.project_id, "--agent", "mailer-bot"
    )
    assert out.returncode == 0, out.stderr
    private(setup.token_file, other + "\n")
    # The sender itself gets a link; clearing the designation voids it.
    with smtp_server(tmp_path, "starttls") as box:
        config = _mail(setup, box, "starttls", tmp_path / "localhost.crt")
        assert attention(config, "digest").returncode == 0
        [link] = LINK.findall(box.messages[0].get_content())
        cleared = setup.server.cli(
            "designate-digest-sender", "--project", setup.project_id, "--clear"
        )
        assert cleared.returncode == 0
        gone = httpx.post(link)
        assert gone.status_code == 404 and "no longer works" in gone.text
        refused = attention(config, "digest")
        assert refused.returncode == 2
        assert "an agent reads a project's digest only when designated" in refused.stderr
    assert len(box.messages) == 1


def test_a_relay_whose_certificate_names_another_host_never_gets_the_password(
    setup: Setup, tmp_path: Path
) -> None:
    with smtp_server(tmp_path, "starttls", name="relay.example.org") as box:
        config = _mail(setup, box, "starttls", tmp_path / "relay.example.org.crt")
        out = attention(config, "digest")
    assert out.returncode == 7
    assert "mail not sent (SSLCertVerificationError" in out.stderr
    assert box.logins == [] and box.messages == []
    assert "Traceback" not in out.stderr


def test_a_wrong_password_exits_non_zero_naming_the_code(setup: Setup, tmp_path: Path) -> None:
    with smtp_server(tmp_path, "starttls") as box:
        config = _mail(setup, box, "starttls", tmp_path / "localhost.crt")
        private(setup.root / "smtp-password", "wrong\n")
        out = attention(config, "digest")
    assert out.returncode == 7
    assert "mail not sent (SMTPAuthenticationError 535)" in out.stderr
    assert box.messages == [] and box.logins == [(USER, False)]


def test_a_login_without_tls_is_refused_by_the_configuration(setup: Setup, tmp_path: Path) -> None:
    cert, _key = certificate(tmp_path)
    password = private(tmp_path / "pw", "x\n")
    config = setup.config(
        mail={
            "smtp_host": "localhost",
            "smtp_tls": "none",
            "smtp_user": USER,
            "smtp_password_file": str(password),
            "ca_file": str(cert),
            "mail_from": USER,
            "mail_to": ["owner@example.org"],
        }
    )
    out = attention(config, "digest")
    assert out.returncode == 2
    assert "mail.smtp_tls: a login is refused without TLS" in out.stderr


def test_a_password_file_others_can_read_is_refused(setup: Setup, tmp_path: Path) -> None:
    with smtp_server(tmp_path, "starttls") as box:
        config = _mail(setup, box, "starttls", tmp_path / "localhost.crt")
        (setup.root / "smtp-password").chmod(0o644)
        out = attention(config, "digest")
    assert out.returncode == 2
    assert "mail.smtp_password_file:" in out.stderr and box.logins == []
