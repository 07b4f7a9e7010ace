"""Quiet hours: the local-time window in which a host may claim new work (decision U6 of the
specification: a host supervises in its owner's quiet hours, so the window is when work is
allowed). Outside it the loop claims nothing new; a running launch finishes.

A window is ``HH:MM-HH:MM`` (24-hour clock, local time), start included, end excluded; a start
after the end wraps past midnight (``22:00-07:00``). Pure: the caller reads the clock.
"""

from __future__ import annotations

import re
from datetime import datetime

_WINDOW = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])-([01][0-9]|2[0-3]):([0-5][0-9])$")


def parse_window(text: str) -> tuple[int, int]:
    """The window's start and end in minutes after midnight; ValueError naming the problem."""
    found = _WINDOW.match(text.strip())
    if found is None:
        raise ValueError(f"must be a window HH:MM-HH:MM such as 22:00-07:00, got {text!r}")
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end:
        raise ValueError(f"the window {text!r} is empty (its start is its end)")
    return start, end


def inside(window: tuple[int, int], at: datetime) -> bool:
    """Whether the local time ``at`` falls in the window."""
    start, end = window
    minute = at.hour * 60 + at.minute
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


def outside_reason(text: str | None, at: datetime) -> str | None:
    """Why no new work may be claimed at ``at`` (None: inside the window, or no window)."""
    if text is None:
        return None
    if inside(parse_window(text), at):
        return None
    return f"outside quiet hours ({text} local time): no new claims until the window opens"
