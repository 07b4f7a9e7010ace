"""The staged harness step (priority 5; not built yet)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentc.core.errors import ConfigError

if TYPE_CHECKING:
    from agentc.host.update.run import Updater


def rollback_harness(updater: Updater) -> int:
    raise ConfigError("--rollback harness: no harness update has been made")
