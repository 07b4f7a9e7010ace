"""The change page's diff reader (pure): the page's highlighting budget keeps a large diff fast,
and a file past it is shown escaped, uncoloured, while the files that fit are still coloured."""

from __future__ import annotations

from typing import Any

from agentc.service.console import diff
from tests.kit.changes import HOSTILE


def _added(path: str, lines: list[str]) -> tuple[dict[str, Any], str]:
    entry: dict[str, Any] = {
        "path": path,
        "old_path": None,
        "status": "added",
        "added": len(lines),
        "removed": 0,
    }
    body = "".join(f"+{line}\n" for line in lines)
    section = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
    return entry, section


def test_a_file_past_the_pages_highlighting_budget_is_shown_plain_and_escaped() -> None:
    line = f"value = compute(1)  # {HOSTILE}"
    big = [line] * (diff.HIGHLIGHT_CHARS // len(line) + 1)
    made = [
        _added("small.py", ["def a():", "    return 1"]),
        _added("big.py", big),
        _added("after.py", ["def b():", "    return 2"]),
    ]
    files, patch = [entry for entry, _ in made], "".join(section for _, section in made)
    small, large, after = diff.parse(files, patch)[0]
    assert not small.plain and '<span class="k">def</span>' in small.hunks[0].lines[0].html
    assert large.plain and large.size == len(big)
    shown = large.hunks[0].lines[0].html
    assert HOSTILE not in shown and "&lt;script&gt;" in shown and "<span" not in shown
    assert not after.plain and '<span class="k">def</span>' in after.hunks[0].lines[0].html
