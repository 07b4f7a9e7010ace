"""libfaketime for a host command run by a test: its wall clock started at a given time, or
moved back, while the test's own clock stays the host's (scripts/setup --dev installs it)."""

from __future__ import annotations

import glob
import os

LIBRARY = "faketime/libfaketime.so.1"


def faketime_env(spec: str) -> dict[str, str]:
    """The environment of a command whose clock libfaketime sets by ``spec`` (its ``FAKETIME``:
    ``@2027-01-15 08:00:00`` starts the clock there and lets it run, ``-3h`` runs it 3 hours
    behind), in UTC."""
    found = glob.glob(f"/usr/lib/*/{LIBRARY}")
    assert found, f"no /usr/lib/*/{LIBRARY}: run scripts/setup --dev (libfaketime)"
    return {**os.environ, "LD_PRELOAD": found[0], "FAKETIME": spec, "TZ": "UTC"}
