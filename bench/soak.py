"""The whole-system soak (issue 27), the long run: ``agentc up --harness claude`` with the
scripted provider, for at least 15 simulated hours, with its faults injected into the real
programs (the supervisor killed mid-launch, the coordinator killed and restarted, a 429 burst,
a red check on the target, the digest left unread) and a person's paging configuration
watching it (tests/up/soak.py says how; tests/up/test_up_soak.py runs a short version in the
suite).

Run as root: ``uv run python bench/soak.py [--tick 5] [--hours 16] [--extra 3] [--json FILE]``.
Prints the summary (faults injected, pages sent by check, tasks landed, simulated hours, real
time) and exits 1 when a fault did not page exactly once and recover exactly once, a task did
not land, or something else paged; docs/benchmarks.md keeps the latest figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.up.soak import Pace, Soak, problems  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tick", type=float, default=5.0, help="real seconds per 10 simulated minutes"
    )
    parser.add_argument("--hours", type=float, default=16.0, help="simulated hours, at least")
    parser.add_argument("--extra", type=int, default=3, help="extra tasks filed per fault")
    parser.add_argument("--burst", type=float, default=30.0, help="the 429 burst, real seconds")
    parser.add_argument("--json", type=Path, default=None, help="write the summary here too")
    parser.add_argument("--keep", type=Path, default=None, help="run in this new folder, kept")
    args = parser.parse_args()
    pace = Pace(tick=args.tick, hours=args.hours, extra=args.extra, burst=args.burst, timeout=3600)
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        summary = Soak(args.keep.resolve(), pace).run()
    else:
        with tempfile.TemporaryDirectory(prefix="agentc-soak-") as work:
            summary = Soak(Path(work), pace).run()
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    found = problems(summary)
    for line in found:
        print(f"soak: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
