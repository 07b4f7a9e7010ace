"""Service time that never goes backwards: the high-water mark and the reconciliation pause.

Every transaction reads its time here (through :class:`agentc.store.tx.Executor`). The mark
is the latest time the service has used; it is kept in ``service_state['clock_high_water']``
(written at most every :data:`PERSIST_EVERY_MS` with a write, so a restart, another worker or
a restored database starts from it). A wall clock a little behind the mark (up to
:data:`TOLERANCE_MS`, a step of time synchronisation) reads as the mark: time stands still
until the wall clock passes it. Further behind, every write is refused with
``clock_reconciliation_required`` (503, retryable) until the wall clock catches up or an
operator confirms the wall clock with `agent-coordinator-server recover-clock`, which sets the
mark to the wall clock's time and changes ``clock_confirmed``; a paused service reads both
again on each refused write. Reads never pause: they use the mark. `/healthz` says why while
the service is paused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.store.service_state import get_state, set_state

TOLERANCE_MS = 5_000
PERSIST_EVERY_MS = 10_000
MARK, CONFIRMED = "clock_high_water", "clock_confirmed"


class HighWater:
    """The service's time over a wall clock (``wall``: ms since the epoch)."""

    def __init__(self, wall: Callable[[], int]) -> None:
        self.wall = wall
        self.mark: int | None = None  # read from the database at the first write
        self.persisted = 0
        self.confirmed: str | None = None
        self.behind_ms = 0  # how far the wall clock was behind at the last refused write
        self._lock = threading.Lock()

    def read_now(self) -> int:
        return max(self.wall(), self.mark or 0)

    def write_now(self, conn: Connection) -> int:
        """The time of a write in conn's transaction; refused while the clock is behind."""
        with self._lock:
            if self.mark is None:
                self._load(conn)
            assert self.mark is not None
            wall = self.wall()
            if self.mark - wall > TOLERANCE_MS:
                self._load(conn, only_if_confirmed=True)
            if self.mark - wall > TOLERANCE_MS:
                self.behind_ms = self.mark - wall
                raise paused(self.behind_ms)
            self.behind_ms = 0
            self.mark = max(self.mark, wall)
            if self.mark - self.persisted >= PERSIST_EVERY_MS:
                set_state(conn, MARK, str(self.mark))
                self.persisted = self.mark
            return self.mark

    def _load(self, conn: Connection, *, only_if_confirmed: bool = False) -> None:
        confirmed = get_state(conn, CONFIRMED)
        if only_if_confirmed and confirmed == self.confirmed:
            return
        stored = int(get_state(conn, MARK) or 0)
        self.mark = stored if only_if_confirmed else max(stored, self.mark or 0)
        self.persisted, self.confirmed = stored, confirmed

    def reason(self) -> str | None:
        """Why writes are paused (None: they are not)."""
        if self.mark is None or self.mark - self.wall() <= TOLERANCE_MS:
            return None
        return paused(self.mark - self.wall()).message


def paused(behind_ms: int) -> CoordinatorError:
    return CoordinatorError(
        "clock_reconciliation_required",
        f"the server's clock is {behind_ms / 1000:.1f} s behind the latest time the service "
        "has used; writes wait until it catches up or an operator runs "
        "`agent-coordinator-server recover-clock` (docs/operator-guide.md, 'The clock')",
        status=503,
        retryable=True,
        details={"behind_ms": behind_ms},
    )


def confirm(conn: Connection, wall_ms: int, token: str) -> int | None:
    """recover-clock: the wall clock is right; returns the mark it replaces."""
    before = get_state(conn, MARK)
    set_state(conn, MARK, str(wall_ms))
    set_state(conn, CONFIRMED, token)
    return int(before) if before is not None else None
