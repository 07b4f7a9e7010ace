"""The one exception tree of agentc.

    AgentcError                      every error agentc raises on purpose (its message is safe
    │                                to show a user; tests/core/test_error_tree.py keeps it so)
    ├── CoordinatorError             a refusal of the coordinator API: code, HTTP status, details
    │                                (the service renders it as the error envelope; the client
    │                                rebuilds it from one)
    ├── ConfigError                  a settings or configuration file is missing or wrong
    │   └── SettingsError            (files.settings) every problem of one settings table
    ├── SupervisorError              a launch, sandbox or host problem (agentc.supervisor)
    │   └── GatewayError, RelayAddressError, ...
    └── the programs' own refusals, each beside its rule: UnsafeFile (files.private),
        SeccompError and ToolPathError (sandbox), BodyTooLarge (core.body, the one body
        reader), BodyRefused (the service's strict JSON), PushError and ProtocolError (push),
        VerdictError, ContractError, RawDiffError, HelloError, ScanLimit, DeliveryFailed,
        BadLink, ...

The command-line programs render any of them the same way and pick the exit status from one
table (:mod:`agentc.files.exits`). agentns-claude stands alone and has its own small errors.
"""

from __future__ import annotations

from typing import Any


class AgentcError(Exception):
    """Base of every error agentc raises on purpose; its message is safe to show a user."""


class ConfigError(AgentcError):
    """A setting, a configuration file or a command-line value is missing or invalid."""


class SupervisorError(AgentcError):
    """A launch, sandbox, relay or host-state problem in the supervisor."""


class CoordinatorError(AgentcError):
    """A refusal with a stable machine code, an HTTP status and structured details.

    The status is required: a refusal says whether it is a conflict (409), a denial (403), bad
    input (422), ..., never by default."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int,
        details: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details = details or {}
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"CoordinatorError({self.code!r}, {self.message!r}, status={self.status})"
