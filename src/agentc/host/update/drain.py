"""Holding the loop still for a switch: the kill switch, the heartbeat, the loop's service.

The updater's kill switch holds the text ``update``; any other switch is the owner's, which the
updater never removes (and a run refuses to start while one is set). Draining sets the switch
(the loop claims nothing more) and waits until the loop's heartbeat, written after the switch,
has shown no launch for ``settle_seconds``; a launch is never cut off: past
``drain_timeout_minutes`` the run is deferred, changing nothing. A rollback drains the same way
but then stops the loop whatever runs (its service manager's stop: SIGTERM, the loop drains its
launch and releases the attempt, SIGKILL after the manager's timeout).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from agentc.files import write_atomic
from agentc.host.servicectl import Manager
from agentc.host.settings import HostSettings
from agentc.supervisor.config import SupervisorConfig

OURS = b"update\n"


class Drain:
    def __init__(self, settings: HostSettings, config: SupervisorConfig, manager: Manager):
        self.settings = settings
        self.manager = manager
        state = config.resolved_state_dir()
        self.switch = config.health.kill_switch or state / "kill-switch"
        self.heartbeat = state / "loop" / "heartbeat.json"

    def owner_switch(self) -> str | None:
        """The owner's kill switch, if one is set (anything at the path that is not ours)."""
        try:
            fd = os.open(self.switch, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{self.switch} ({exc.strerror})"
        with os.fdopen(fd, "rb") as handle:
            return None if handle.read(64) == OURS else str(self.switch)

    def hold(self) -> None:
        write_atomic(self.switch, OURS, mode=0o644)

    def release(self) -> None:
        """Remove the switch if it is still ours."""
        if self.owner_switch() is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.switch)

    def beat(self) -> tuple[float, dict[str, Any]] | None:
        try:
            info = os.stat(self.heartbeat)
            data = json.loads(Path(self.heartbeat).read_bytes())
        except (OSError, ValueError):
            return None
        return (info.st_mtime, data) if isinstance(data, dict) else None

    def wait_quiet(self) -> bool:
        """Hold, then wait until a heartbeat written since shows no launch for the settle
        time; False (the switch removed again) past the drain timeout."""
        self.hold()
        update = self.settings.update
        start = time.time()
        deadline = time.monotonic() + update.drain_timeout_minutes * 60
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            beat = self.beat()
            if beat is not None and beat[0] >= start and "launch" not in beat[1]:
                quiet_since = quiet_since if quiet_since is not None else time.monotonic()
                if time.monotonic() - quiet_since >= update.settle_seconds:
                    return True
            else:
                quiet_since = None
            time.sleep(min(update.poll_seconds, max(0.0, deadline - time.monotonic())))
        self.release()
        return False

    def stop_loop(self, force: bool = False) -> None:
        """Stop the loop's service (held first); ``force``: past the drain timeout whatever
        runs (a rollback must not wait for the next day)."""
        if force:
            self.hold()
        timeout = self.settings.update.drain_timeout_minutes * 60 if not force else 300.0
        if self.manager.is_active("loop"):
            self.manager.stop("loop", timeout)
