"""Harness adapters: what the supervisor knows about each agent harness it launches.

:mod:`.events` reads the machine-readable event stream a harness writes (Claude Code's
``stream-json``, Codex's ``exec --json``, Pi's ``--mode json``) into one :class:`RunSummary`:
token usage, dollars (exact when the harness reports them, else priced from :mod:`.prices` and
marked estimated), the outcome, the final message and any rate-limit reset. Pure: no I/O, so the
loop, ``report-costs`` and the tests share it.
"""

from agentc.supervisor.harness.events import RunSummary, StreamReader, Usage, summarize
from agentc.supervisor.harness.prices import DEFAULT_PRICES, Price, price_usage

__all__ = [
    "DEFAULT_PRICES",
    "Price",
    "RunSummary",
    "StreamReader",
    "Usage",
    "price_usage",
    "summarize",
]
