"""A person's browser session on the coordinator, as both sides see it on the wire (pure).

The service sets the session cookie at sign-in (``POST /api/v1/auth/login``) and reads it on
every request; a client that signs in for someone (the supervisor's verifying reviewer,
:mod:`agentc.supervisor.loop.verification`) checks the cookie it got by the same rules.
"""

from __future__ import annotations

import re

HOST_COOKIE = "__Host-coordinator"
LOCAL_COOKIE = "coordinator_local"
HOST_DEVICE_COOKIE = "__Host-coordinator-device"
LOCAL_DEVICE_COOKIE = "coordinator_device"
# A session secret (the cookie's value, a CSRF token): printable ASCII without spaces.
SECRET = re.compile(r"^[\x21-\x7e]{32,512}$")


def cookie_name(https: bool) -> str:
    """The browser session cookie's name: on an https origin only the __Host- cookie counts,
    so a sibling host cannot fix a session with a plain-name cookie."""
    return HOST_COOKIE if https else LOCAL_COOKIE


def device_cookie_name(https: bool) -> str:
    """The sign-in device cookie's name (a browser that signed in to an account before), named
    like the session cookie."""
    return HOST_DEVICE_COOKIE if https else LOCAL_DEVICE_COOKIE


def is_secret(value: str) -> bool:
    """A well-formed session secret: one a cookie header or a JSON file carries unchanged."""
    return bool(SECRET.match(value)) and not any(c in value for c in ';,"\\')
