"""Delivering pages: ntfy (an HTTP POST of the message to ``<url>/<topic>`` with ``Title``,
``Priority`` and ``Tags`` headers, and a bearer token when one is set) and a generic webhook (a
JSON POST, with a ``text`` field so a Slack incoming webhook takes it as it is).

A page is delivered to each destination once: a destination that accepted it (any 2xx) is
struck from the page's ``to`` list, and what is left is tried again at the next run. Redirects
are not followed and no proxy or netrc setting is read from the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from agentc import __version__
from agentc.attention.config import AttentionConfig
from agentc.attention.state import Page
from agentc.core.errors import AgentcError, ConfigError
from agentc.files import JsonLines, UnsafeFile, read_private

TIMEOUT = httpx.Timeout(15.0, connect=10.0)
MAX_TOKEN_BYTES = 4096
NTFY = "ntfy"
WEBHOOK = "webhook"
LOG = "log"

Send = Callable[[Page], None]


def read_secret(path: Path, what: str) -> str:
    """A token or password file's one line (owner only, no group or other bits, no symlink)."""
    try:
        raw = read_private(path, max_bytes=MAX_TOKEN_BYTES)
    except UnsafeFile as exc:
        raise ConfigError(f"{what}: {exc.path}: {exc.reason}") from None
    text = raw.decode("utf-8", errors="replace").strip()
    if not text or "\n" in text:
        raise ConfigError(f"{what}: {path}: expected one line")
    return text


def _client() -> httpx.Client:
    return httpx.Client(
        timeout=TIMEOUT,
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": f"agentc-attention/{__version__}"},
    )


def _header(text: str) -> str:
    """A header value: one line of printable ASCII (ntfy also reads RFC 2047, not needed)."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:250]


def _where(kind: str, url: str) -> str:
    """A destination as logs name it: its kind and host, not its path (which may be a secret)."""
    return f"{kind} at {urlsplit(url).hostname or '?'}"


def _post(
    url: str,
    where: str,
    token: str | None,
    headers: dict[str, str],
    *,
    content: bytes | None = None,
    body: object = None,
) -> None:
    if token:
        headers = {**headers, "Authorization": f"Bearer {token}"}
    try:
        with _client() as client:
            resp = client.post(url, headers=headers, content=content, json=body)
    except httpx.HTTPError as exc:
        raise DeliveryFailed(f"{where}: no answer ({type(exc).__name__})") from None
    if not 200 <= resp.status_code < 300:
        raise DeliveryFailed(f"{where}: answered {resp.status_code}")


class DeliveryFailed(AgentcError):
    """A destination did not accept a page. The message names the destination's kind and host,
    never its URL: a webhook's URL (Slack's) or an ntfy topic is often the secret itself."""


def ntfy_sender(config: AttentionConfig) -> Send | None:
    ntfy = config.ntfy
    if ntfy is None:
        return None
    token = read_secret(ntfy.token_file, "ntfy.token_file") if ntfy.token_file else None
    url = f"{ntfy.url}/{ntfy.topic}"

    def send(page: Page) -> None:
        headers = {
            "Title": _header(page.title),
            "Priority": str(page.priority),
            "Tags": _header(",".join(page.tags)),
        }
        _post(url, _where("ntfy", url), token, headers, content=page.message.encode())

    return send


def webhook_sender(config: AttentionConfig) -> Send | None:
    hook = config.webhook
    if hook is None:
        return None
    token = read_secret(hook.token_file, "webhook.token_file") if hook.token_file else None

    def send(page: Page) -> None:
        body = {
            "id": page.id,
            "project_id": config.project_id,
            "check": page.key,
            "state": page.kind,
            "title": page.title,
            "message": page.message,
            "priority": page.priority,
            "tags": page.tags,
            "at_ms": page.at_ms,
            "text": f"{page.title}: {page.message}",
        }
        _post(hook.url, _where("webhook", hook.url), token, {}, body=body)

    return send


def log_sender(config: AttentionConfig) -> Send | None:
    if config.log is None:
        return None
    path = config.log.path

    def send(page: Page) -> None:
        try:
            out = JsonLines.open(path)
        except OSError as exc:
            raise DeliveryFailed(f"{path}: {exc.strerror}") from None
        try:
            out.write({k: v for k, v in asdict(page).items() if k != "to"})
        finally:
            out.close()

    return send


def senders(config: AttentionConfig) -> dict[str, Send]:
    """The configured destinations by name; at least one is required to page."""
    found = {
        name: send
        for name, send in (
            (NTFY, ntfy_sender(config)),
            (WEBHOOK, webhook_sender(config)),
            (LOG, log_sender(config)),
        )
        if send is not None
    }
    if not found:
        raise ConfigError("no page destination: configure [ntfy] topic, [webhook] url or [log]")
    return found


def deliver(outbox: list[Page], send: dict[str, Send]) -> list[str]:
    """Send every page to each destination still on its list; pages fully delivered leave the
    outbox. Returns a line per failure (a destination no longer configured is dropped)."""
    problems: list[str] = []
    for page in list(outbox):
        for dest in list(page.to):
            sender = send.get(dest)
            if sender is None:
                page.to.remove(dest)
                continue
            try:
                sender(page)
            except DeliveryFailed as exc:
                problems.append(f"page {page.key} not delivered to {dest}: {exc}")
                continue
            page.to.remove(dest)
        if not page.to:
            outbox.remove(page)
    return problems
