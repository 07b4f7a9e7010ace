"""How many launches the loop runs at once (``[run] launches``), and how many of them are kept
for reviews (``[run] review_slots``).

Without ``[run] launches`` the number is derived from the machine: one launch per CPU the loop
may run on, and no more than the memory holds at the per-launch limit (``[limits]
memory_mib``; 0: memory does not bound it); at least one. The loop prints the number and how it
was chosen when it starts. ``1`` is the loop of old: one launch at a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import ConfigError
from agentc.supervisor.config import SupervisorConfig

MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Slots:
    """``total`` launches at once, ``reviews`` of them only for reviews; ``why`` says how the
    total was chosen."""

    total: int
    reviews: int
    why: str

    @property
    def implementers(self) -> int:
        """The most implementer launches at once."""
        return self.total - self.reviews

    def line(self) -> str:
        """The line the loop prints when it starts."""
        kept = f"; {self.reviews} kept for reviews" if self.reviews else ""
        return (
            f"up to {self.total} launch{'es' if self.total != 1 else ''} at once ({self.why}{kept})"
        )


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except OSError:
        return os.cpu_count() or 1


def memory_mib(meminfo: Path = MEMINFO, key: str = "MemTotal") -> int | None:
    """A ``/proc/meminfo`` figure in MiB (None when it cannot be read)."""
    try:
        lines = meminfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name == key and fields and fields[0].isdigit():
            return int(fields[0]) // 1024
    return None


def derived(cores: int, total_mib: int | None, per_launch_mib: int) -> tuple[int, str]:
    """The machine's number of launches at once and the words saying why."""
    count, why = max(1, cores), f"{cores} CPUs"
    if per_launch_mib and total_mib is not None:
        count = max(1, min(count, total_mib // per_launch_mib))
        why += f", {total_mib} MiB of memory at [limits] memory_mib = {per_launch_mib}"
    return count, f"derived from this machine: {why}; set [run] launches to choose"


def size(config: SupervisorConfig) -> Slots:
    """The loop's slots; a review reserve that would leave implementers none is refused."""
    run = config.run
    if run.launches is not None:
        total, why = run.launches, "[run] launches"
    else:
        total, why = derived(cpus(), memory_mib(), config.limits.memory_mib)
    reviews = run.review_slots if run.reviewer else 0
    if reviews >= total:
        raise ConfigError(
            f"run.review_slots: {reviews} slots kept for reviews leave no implementer launch "
            f"of the {total} at once ({why}); keep fewer or allow more launches"
        )
    return Slots(total, reviews, why)
