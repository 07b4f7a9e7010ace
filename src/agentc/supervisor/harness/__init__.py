"""Harness adapters: what the supervisor knows about each agent harness it launches.

Nothing is imported here: a launch loads only the modules it uses (tests/supervisor/
test_launch_lean.py).

:mod:`.events` reads the machine-readable event stream a harness writes (Claude Code's
``stream-json``, Codex's ``exec --json``, Pi's ``--mode json``) into one :class:`RunSummary`:
token usage, dollars (exact when the harness reports them, else priced with the gateway's table,
:mod:`agentc.gateway.prices`, and marked estimated), the outcome, the final message
and any rate-limit reset. Pure: no I/O, so the loop, ``report-costs`` and the tests share it.
"""
