"""Secrets for the scanner's tests, made at run time: no file of the repository carries one, so
the push helper's scan of this repository finds nothing (docs/security.md)."""

from __future__ import annotations

import base64
import secrets
import string
import textwrap
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits


def _random(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# A fresh secret of each format the scanner knows (core.secrets.FORMATS), by its kind.
FORMATS: dict[str, Callable[[], str]] = {
    "a private key": lambda: (
        "-----BEGIN "
        + "OPENSSH PRIVATE"
        + " KEY-----\n"
        + _random(64)
        + "\n-----END OPENSSH "
        + "PRIVATE KEY-----\n"
    ),
    "an AWS access key id": lambda: "AK" + "IA" + _random(16, string.ascii_uppercase + "234567"),
    "a GitHub token": lambda: "gh" + "p_" + _random(36),
    "a GitLab token": lambda: "gl" + "pat-" + _random(20),
    "a Slack token": lambda: "xo" + "xb-" + _random(12, string.digits) + "-" + _random(24),
    "an Anthropic API key": lambda: "sk-" + "ant-api03-" + _random(93, ALNUM + "-_"),
    "an OpenAI API key": lambda: "sk-" + "proj-" + _random(56, ALNUM + "-_"),
    "a Google API key": lambda: "AI" + "za" + _random(35, ALNUM + "-_"),
    "a Stripe live key": lambda: "sk" + "_live_" + _random(32),
}


def token() -> str:
    """A coordinator-shaped token: 64 lowercase hex characters."""
    return secrets.token_hex(32)


# How an agent could write a token: name -> (encode, the encoding the scanner names).
ENCODINGS: dict[str, tuple[Callable[[str], str], str]] = {
    "plain": (lambda t: t, "plain"),
    "upper case": (lambda t: t.upper(), "upper(text)"),
    "base64 of the text": (lambda t: _b64(t.encode()), "base64(text)"),
    "base64 of the raw bytes": (lambda t: _b64(bytes.fromhex(t)), "base64(raw bytes)"),
    "url-safe base64 of the raw bytes, unpadded": (
        lambda t: base64.urlsafe_b64encode(bytes.fromhex(t)).decode().rstrip("="),
        "base64(raw bytes)",
    ),
    "base64 wrapped at 76 columns": (
        lambda t: "\n".join(textwrap.wrap(_b64(t.encode()), 76)),
        "base64(text)",
    ),
    "hex of the text": (lambda t: t.encode().hex(), "hex(text)"),
    "hex of the text, bytes apart": (
        lambda t: " ".join(f"{b:02x}" for b in t.encode()),
        "hex(text)",
    ),
    "reversed": (lambda t: t[::-1], "reversed(text)"),
    "base64 of the reversed text": (lambda t: _b64(t[::-1].encode()), "base64(reversed(text))"),
    "reversed base64 of the text": (lambda t: _b64(t.encode())[::-1], "reversed(base64(text))"),
    "base64 of the reversed raw bytes": (
        lambda t: _b64(bytes.fromhex(t)[::-1]),
        "base64(reversed(raw bytes))",
    ),
    "upper-case hex of the base64": (
        lambda t: _b64(t.encode()).encode().hex().upper(),
        "upper-case hex(base64(text))",
    ),
    "hex of the base64": (lambda t: _b64(t.encode()).encode().hex(), "hex(base64(text))"),
    "base64 of the base64": (lambda t: _b64(_b64(t.encode()).encode()), "base64(base64(text))"),
    "base64 of a sentence": (
        lambda t: _b64(f"export AGENT_TOKEN={t}\n".encode()),
        "base64(text)",
    ),
}
