"""The web console: server-rendered pages over the same reads, writes and rules as the API.

Pages read through the service's views and store queries; every write runs as an API
mutation (`agentc.service.api.mutation`) with the same cookie, Origin, CSRF and
Idempotency-Key rules; the CSRF token and key travel as hidden form fields.
"""

from agentc.service.console import backups, change, forms, pages, policy, reports
from agentc.service.console.render import router

__all__ = ["backups", "change", "forms", "pages", "policy", "reports", "router"]
