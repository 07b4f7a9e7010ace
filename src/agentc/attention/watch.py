"""One run of ``agentc-attention check``: look, page what newly fails, note what recovered.

A failing check pages once and stays quiet while it keeps failing (a check with a re-page
interval, the red target, pages again after it); when it passes again a single low-priority
"recovered" note is sent. Pages wait in the state file's outbox until every destination has
accepted them, so a page that could not be delivered is sent by the next run, and never twice
to a destination that took it. The state is written before anything is sent.

Exit status: 0 every check passes, 1 a check fails (paged or already paged), 2 a page or note
could not be delivered (it is retried by the next run) or the run could not work at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from agentc.attention import paging, state
from agentc.attention.checks import Observation, run_checks
from agentc.attention.config import AttentionConfig
from agentc.attention.paging import Send
from agentc.attention.state import Failing, Page, State
from agentc.files.exits import FAILED, OK, TRANSPORT

HEALTHY, FAILING, UNDELIVERED = OK, FAILED, TRANSPORT  # agentc.files.exits
MINUTE_MS = 60_000
HIGH, LOW = 4, 2


def _page(key: str, kind: str, title: str, text: str, now: int, to: list[str]) -> Page:
    return Page(
        id=f"{key}@{now}:{kind}:{os.urandom(4).hex()}",
        key=key,
        kind=kind,
        title=title,
        message=text,
        priority=HIGH if kind == "failing" else LOW,
        tags=["rotating_light"] if kind == "failing" else ["white_check_mark"],
        at_ms=now,
        to=list(to),
    )


def settle(st: State, seen: Observation, now: int, to: list[str], project: str) -> list[str]:
    """Update the failing set from what was seen and queue the pages it calls for; returns one
    line per check failing now (for the journal)."""
    lines = []
    for key, finding in sorted(seen.failing.items()):
        lines.append(f"{key}: {finding.text}")
        known = st.failing.get(key)
        if known is None:
            st.failing[key] = Failing(since_ms=now, text=finding.text, paged_ms=now)
            st.outbox.append(
                _page(key, "failing", f"agentc {project}: {key} failing", finding.text, now, to)
            )
            continue
        known.text = finding.text
        repage = finding.repage_minutes
        if repage is not None and now - known.paged_ms >= repage * MINUTE_MS:
            known.paged_ms = now
            title = f"agentc {project}: {key} still failing"
            st.outbox.append(_page(key, "failing", title, finding.text, now, to))
    for key in sorted(set(st.failing) - set(seen.failing)):
        if not seen.covers(key):
            continue  # its check could not look this time: neither recovered nor paged
        gone = st.failing.pop(key)
        minutes = (now - gone.since_ms) // MINUTE_MS
        text = f"recovered after {minutes} minutes (it was: {gone.text})"
        st.outbox.append(
            _page(key, "recovered", f"agentc {project}: {key} recovered", text, now, to)
        )
    return lines


def run(
    config: AttentionConfig,
    token: str,
    now_ms: Callable[[], int],
    *,
    senders: dict[str, Send] | None = None,
    out: Callable[[str], None] = print,
) -> int:
    send = senders if senders is not None else paging.senders(config)
    path = config.state_file()
    now = now_ms()
    st = state.load(path, now)
    seen = run_checks(config, token, st.first_run_ms, now)
    lines = settle(st, seen, now, sorted(send), config.project_id)
    state.save(path, st)
    problems = paging.deliver(st.outbox, send)
    state.save(path, st)
    for line in lines:
        out(f"check: {line}")
    for problem in problems:
        print(f"agentc-attention: {problem}", file=sys.stderr)
    if st.outbox:
        return UNDELIVERED
    return FAILING if seen.failing else HEALTHY
