"""Errors of the model gateway (all under SupervisorError: one exception tree)."""

from __future__ import annotations

from agentc.core.errors import SupervisorError


class GatewayError(SupervisorError):
    """A gateway configuration or host-state problem."""


class CredentialError(GatewayError):
    """A role credential file is missing, unsafe or unreadable; names the file, never its bytes."""


class SentinelRefused(GatewayError):
    """A request carried no sentinel, an unknown one, or one that was revoked or superseded."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"sentinel refused: {reason}")
        self.reason = reason
