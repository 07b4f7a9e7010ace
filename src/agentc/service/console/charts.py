"""Charts as server-drawn SVG: the geometry here, the markup in templates/charts.html.

No script and no style attribute (the page's Content-Security-Policy allows neither inline):
shapes carry classes that console.css colours. Every chart has a title, a description that
states what it shows in words, and the same numbers as a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

WIDTH = 720
COLUMNS_HEIGHT = 240
PLOT_LEFT = 64  # room for the value axis
PLOT_RIGHT = WIDTH - 12
PLOT_TOP = 12
PLOT_BOTTOM = COLUMNS_HEIGHT - 28  # room for the day labels
ROW_HEIGHT = 26
LABEL_WIDTH = 240  # horizontal bars: room for the names
LABEL_CHARS = 34


@dataclass(frozen=True)
class Shape:
    x: float
    y: float
    width: float
    height: float
    css: str
    tip: str


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    css: str
    anchor: str = "start"


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass
class Chart:
    """One chart: the drawing and its table (header and rows)."""

    key: str
    title: str
    desc: str
    height: int
    header: list[str]
    rows: list[list[str]]
    shapes: list[Shape] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    width: int = WIDTH
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, name)


def _top(value: float) -> float:
    """A round upper bound of the value axis (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def columns(
    key: str,
    title: str,
    desc: str,
    days: list[str],
    series: list[tuple[str, str, list[float]]],
    fmt: str,
) -> Chart:
    """Stacked columns per day: series are (name, css class, one value per day)."""
    totals = [sum(s[2][i] for s in series) for i in range(len(days))]
    top = _top(max(totals, default=0))
    chart = Chart(key, title, desc, COLUMNS_HEIGHT, ["Day", *[s[0] for s in series]], [])
    chart.legend = [(css, name) for name, css, _ in series] if len(series) > 1 else []
    span = PLOT_BOTTOM - PLOT_TOP
    for frac in (0.0, 0.5, 1.0):
        y = PLOT_BOTTOM - frac * span
        chart.lines.append(Line(PLOT_LEFT, y, PLOT_RIGHT, y))
        chart.texts.append(Text(PLOT_LEFT - 6, y + 4, fmt.format(top * frac), "tick", "end"))
    slot = (PLOT_RIGHT - PLOT_LEFT) / max(len(days), 1)
    for i, day in enumerate(days):
        x = PLOT_LEFT + i * slot + slot * 0.15
        base: float = PLOT_BOTTOM
        for name, css, values in series:
            value = values[i]
            if value > 0:
                height = value / top * span
                base -= height
                tip = f"{day}: {fmt.format(value)}" + (f" {name}" if chart.legend else "")
                chart.shapes.append(Shape(x, base, slot * 0.7, height, css, tip))
        if (len(days) - 1 - i) % 7 == 0:  # weekly labels, ending today
            chart.texts.append(Text(x + slot * 0.35, COLUMNS_HEIGHT - 8, day[5:], "tick", "middle"))
        chart.rows.append([day, *[fmt.format(s[2][i]) for s in series]])
    return chart


def bars(
    key: str,
    title: str,
    desc: str,
    items: list[tuple[str, float, str]],
    fmt: str,
    name: str,
    columns: tuple[str, str] = ("Dollars", "Rows"),
) -> Chart:
    """Horizontal bars, one per item: (label, value, more for the table)."""
    top = _top(max((v for _l, v, _m in items), default=0))
    height = PLOT_TOP + ROW_HEIGHT * max(len(items), 1) + 8
    chart = Chart(key, title, desc, height, [name, *columns], [])
    room = PLOT_RIGHT - 70 - LABEL_WIDTH
    if not items:
        chart.texts.append(Text(LABEL_WIDTH, PLOT_TOP + 16, "No rows in this window.", "label"))
    for i, (label, value, more) in enumerate(items):
        y = PLOT_TOP + i * ROW_HEIGHT
        short = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        chart.texts.append(Text(LABEL_WIDTH - 8, y + 16, short, "label", "end"))
        width = value / top * room
        chart.shapes.append(Shape(LABEL_WIDTH, y + 4, width, ROW_HEIGHT - 8, "bar", label))
        chart.texts.append(Text(LABEL_WIDTH + width + 6, y + 16, fmt.format(value), "value"))
        chart.rows.append([label, fmt.format(value), more])
    return chart
