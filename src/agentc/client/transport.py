"""One HTTP exchange with the coordinator, and the one place its answers are classified.

The client never follows redirects, never reads proxy or netrc settings from the environment,
and only ever sends `/api/v1/*` and `/healthz`. An answer is either *definitive* (2xx, or a 4xx
refusal other than 429), which resolves a journaled mutation, or *uncertain* (no answer, a
redirect, 429 or 5xx), which leaves it pending for `retry`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

import httpx

from agentc import __version__
from agentc.client.errors import TransportFailure
from agentc.core.addresses import is_localhost_name
from agentc.core.browser import cookie_name, is_secret
from agentc.core.errors import ConfigError, CoordinatorError

_PATH = re.compile(
    r"^/api/v1/[A-Za-z0-9_.~:@!$&'()*+,;=%/-]*(\?[A-Za-z0-9_.~:@!$&'()*+,;=%/?-]*)?$"
)
METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")
TIMEOUT = httpx.Timeout(30.0, connect=10.0)


def check_path(path: str) -> str:
    """Only the coordinator API (or `/healthz`), as a path, with no dot segments."""
    if path == "/healthz":
        return path
    if not _PATH.match(path):
        raise ConfigError(f"path {path!r}: only /api/v1/... paths (and /healthz) may be called")
    segments = path.split("?", 1)[0].split("/")
    if any(s in (".", "..") for s in segments) or "//" in path.split("?", 1)[0]:
        raise ConfigError(f"path {path!r}: dot segments and empty segments are refused")
    return path


@dataclass(frozen=True)
class Answer:
    """A definitive answer: the envelope's data, the status, and whether it was a replay."""

    status: int
    data: Any
    replayed: bool


@dataclass(frozen=True)
class BrowserSession:
    """A person's browser session: its cookie and the CSRF token its writes carry."""

    cookie_name: str
    cookie: str = field(repr=False)
    csrf_token: str = field(repr=False)


class Closing:
    """Something to close, usable in a ``with`` block that closes it at the end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class Transport(Closing):
    """A synchronous coordinator client for one origin and one bearer token."""

    def __init__(
        self,
        origin: str,
        token: str | None,
        transport: httpx.BaseTransport | None = None,
        *,
        timeout: httpx.Timeout = TIMEOUT,
    ) -> None:
        headers = {"User-Agent": f"agent-coordinator/{__version__}", "Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.origin = origin
        base = origin
        parts = urlsplit(origin)
        if parts.scheme == "http" and is_localhost_name(parts.hostname or ""):
            # A name under .localhost is loopback (RFC 6761), as browsers take it: connect to
            # 127.0.0.1 and say the name in Host, without asking a resolver that may not know.
            base = f"http://127.0.0.1:{parts.port or 80}"
            headers["Host"] = parts.netloc
        self._client = httpx.Client(
            base_url=base,
            headers=headers,
            follow_redirects=False,
            trust_env=False,
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        session: tuple[str, str] | None = None,
        lone_proof: str | None = None,
    ) -> Answer:
        """Send one request; a definitive answer or CoordinatorError / TransportFailure.

        `session` sends the session id and its proof; `lone_proof` sends only a proof (opening
        a session with a client-made proof)."""
        method = method.upper()
        if method not in METHODS:
            raise ConfigError(f"method {method!r}: use one of {', '.join(METHODS)}")
        check_path(path)
        headers: dict[str, str] = {}
        if key is not None:
            headers["Idempotency-Key"] = key
        if session is not None:
            headers["X-Coordinator-Session"] = session[0]
            headers["X-Coordinator-Session-Proof"] = session[1]
        elif lone_proof is not None:
            headers["X-Coordinator-Session-Proof"] = lone_proof
        return classify(method, path, self._exchange(method, path, body, headers))

    def _exchange(
        self, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> httpx.Response:
        content = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
            headers["Content-Type"] = "application/json"
        try:
            return self._client.request(method, path, content=content, headers=headers)
        except httpx.TimeoutException as exc:
            raise TransportFailure(
                f"{method} {path}: timed out waiting for the coordinator"
            ) from exc
        except httpx.TransportError as exc:
            raise TransportFailure(
                f"{method} {path}: no answer from {self.origin} ({type(exc).__name__}: {exc})"
            ) from exc

    def sign_in(self, username: str, password: str) -> None:
        """Sign in as a person (the console's way): later requests carry the session cookie,
        the Origin and the CSRF token that person writes need."""
        self._client.headers["Origin"] = self.origin
        answer = self.send(
            "POST", "/api/v1/auth/login", {"username": username, "password": password}
        )
        self._client.headers["X-CSRF-Token"] = str(answer.data["csrf_token"])

    def open_browser_session(self, username: str, password: str) -> BrowserSession:
        """Sign in as a person for someone else and keep nothing: the new session's cookie and
        CSRF token, checked (one session cookie of the origin's name, well-formed secrets),
        for the caller to hand over; :meth:`close_browser_session` signs it out."""
        path = "/api/v1/auth/login"
        body = {"username": username, "password": password}
        resp = self._exchange("POST", path, body, {"Origin": self.origin})
        self._client.cookies.clear()  # the session is the caller's, never this client's
        answer = classify("POST", path, resp)
        expected = cookie_name(self.origin.lower().startswith("https:"))
        set_cookies = resp.headers.get_list("set-cookie")
        pairs = [c.split(";", 1)[0].strip().partition("=") for c in set_cookies]
        values = [value.strip() for name, eq, value in pairs if eq and name.strip() == expected]
        csrf = answer.data.get("csrf_token") if isinstance(answer.data, dict) else None
        if len(set_cookies) != 1 or len(values) != 1 or not is_secret(values[0]):
            raise TransportFailure(
                f"POST {path}: the answer carries no single well-formed {expected} cookie "
                f"({len(set_cookies)} Set-Cookie header(s))"
            )
        if not isinstance(csrf, str) or not is_secret(csrf):
            raise TransportFailure(f"POST {path}: the answer carries no well-formed csrf_token")
        return BrowserSession(expected, values[0], csrf)

    def close_browser_session(self, session: BrowserSession, key: str) -> None:
        """Sign the session out (its cookie, the CSRF token, an Idempotency-Key, body ``{}``)."""
        headers = {
            "Origin": self.origin,
            "Cookie": f"{session.cookie_name}={session.cookie}",
            "X-CSRF-Token": session.csrf_token,
            "Idempotency-Key": key,
        }
        path = "/api/v1/auth/logout"
        classify("POST", path, self._exchange("POST", path, {}, headers))


def classify(method: str, path: str, resp: httpx.Response) -> Answer:
    status = resp.status_code
    if 300 <= status < 400:
        raise TransportFailure(
            f"{method} {path}: the coordinator answered with a redirect ({status}) to "
            f"{resp.headers.get('location', '?')}; redirects are never followed"
        )
    try:
        payload = resp.json()
    except ValueError:
        payload = None
    if status < 300:
        if not isinstance(payload, dict):
            if path == "/healthz" or status == 204:
                return Answer(status, payload, False)
            raise TransportFailure(f"{method} {path}: the answer ({status}) is not JSON")
        data = payload.get("data", payload) if path != "/healthz" else payload
        replayed = resp.headers.get("idempotency-replayed", "").lower() == "true"
        return Answer(status, data, replayed)
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        if status == 429 or status >= 500:
            raise TransportFailure(f"{method} {path}: the coordinator answered {status}")
        raise CoordinatorError(
            "invalid_response",
            f"{method} {path}: the coordinator answered {status} without an error envelope",
            status=status,
        )
    error = CoordinatorError(
        str(err.get("code", "unknown_error")),
        str(err.get("message", "")),
        status=status,
        details=err.get("details") if isinstance(err.get("details"), dict) else None,
        retryable=bool(err.get("retryable", False)),
    )
    if status == 429 or status >= 500:
        # Uncertain: the mutation may still be pending on the service side.
        raise TransportFailure(f"{method} {path}: {error.code}: {error.message}") from error
    raise error
