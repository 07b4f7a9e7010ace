"""The change page on a 5,000-line diff: a real server renders a submission's recorded patch.

A real git repository gets a change of `--lines` diff lines removed or added (every other line
of Python source changed: half of them removed, half added, a line of context between each),
spread over `--files` files; the supervisor's own code (`of_revisions`, through the browser
tests' kit) computes the patch from the two revisions and an agent records it with its
submission on a real `agent-coordinator-server serve` (SQLite). The admin, signed in, then
reads the change page over loopback HTTP, unified and side by side, `--rounds` times each: the
whole request (the artifact read, the diff split by its hunk headers, Pygments' highlighting
within the page's budget, the template). The first request of each view is reported apart
(cold: lexers and templates loaded).

    uv run python bench/change_page.py [--lines 5000] [--files 20] [--rounds 10]

Not a test: it asserts nothing; docs/benchmarks.md keeps the latest figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.kit.changes import Change, git  # noqa: E402
from tests.kit.live import LiveServer, live_server  # noqa: E402
from tests.service.console.change_kit import submitted_live  # noqa: E402


def source(n: int, lines: int, tag: str) -> str:
    """A Python module of `lines` lines; every other one differs between the tags."""
    out = []
    for i in range(lines):
        if i % 2:
            out.append(f"    total += compute_{n}_{i}(value, {i}, '{tag}')  # step {i} of {tag}\n")
        else:
            out.append(f"def helper_{n}_{i}(value):  # unchanged line {i}\n")
    return "".join(out)


def repository(repo: Path, files: int, changed: int) -> tuple[str, str]:
    """The two revisions: `changed` diff lines removed or added in all, over `files` files."""
    per_file = changed // files  # diff lines per file: half removed, half added
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    for n in range(files):
        (repo / f"module_{n}.py").write_text(source(n, per_file, "old"))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    for n in range(files):
        (repo / f"module_{n}.py").write_text(source(n, per_file, "new"))
    git(repo, "commit", "--quiet", "-am", "candidate")
    return base, git(repo, "rev-parse", "HEAD")


def submit(live: LiveServer, work: Path, base: str, candidate: str) -> str:
    """The change page's path (the test kit's submission, this change)."""
    change = Change(work / "repo", base, candidate)
    pid, task, sub = submitted_live(live, work, "human", change=change)
    return f"/console/projects/{pid}/tasks/{task['id']}/submissions/{sub['id']}"


def measure(live: LiveServer, page: str, rounds: int) -> None:
    client = live.admin_client()
    print("| view | first request, ms | median, ms | slowest of the rest, ms | page, KiB |")
    print("|---|---:|---:|---:|---:|")
    for view in ("unified", "split"):
        times = []
        size = 0
        for _ in range(rounds + 1):
            start = time.perf_counter()
            resp = client.get(f"{page}?view={view}")
            times.append((time.perf_counter() - start) * 1000)
            resp.raise_for_status()
            size = len(resp.content)
        first, rest = times[0], times[1:]
        print(
            f"| {view} | {first:.0f} | {statistics.median(rest):.0f} | {max(rest):.0f} "
            f"| {size / 1024:.0f} |"
        )
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000, help="diff lines removed or added")
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agentc-bench-change-"))
    base, candidate = repository(work / "repo", args.files, args.lines)
    with live_server(str(work / "c.sqlite3"), work) as live:
        page = submit(live, work, base, candidate)
        size = len(git(work / "repo", "diff", base, candidate).encode())
        print(
            f"{args.lines} lines removed or added in {args.files} files, the patch "
            f"{size / 1024:.0f} KiB; "
            f"{args.rounds} requests of each view after the first"
        )
        measure(live, page, args.rounds)


if __name__ == "__main__":
    main()
