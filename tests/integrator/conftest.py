from __future__ import annotations

from tests.kit.shared_server import admin, server

__all__ = ["admin", "server"]
