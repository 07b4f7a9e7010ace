"""Launch overhead: ``true`` through the full supervised launch vs bare bwrap vs ``srt``.

Run as root (or any user bwrap works for): ``uv run python bench/launch_overhead.py``.
Three ways to run ``true`` are timed side by side, interleaved round by round so load changes
hit all three alike:

- ``bwrap``: ``bwrap --ro-bind / / true``, the floor;
- ``launch``: ``agentc-supervisor launch`` (a fresh personal-mode run directory per call,
  harness ``/bin/true``, no relays), the whole CLI process: config, plan, the launch
  preflight (the descriptor fence, bwrap protection, mount roots, writable trees; bwrap's
  version and the kernel probe come from the per-boot probe cache the first launch fills),
  run markers, sealed prompt, sandbox, reaping;
- ``srt``: ``srt -s <settings> true``, the Anthropic sandbox runtime from
  ``tools/harnesses`` (it needs ``socat`` and ``rg`` on the host; without them it exits
  with "Sandbox dependencies not available", which is reported instead of a time).

Prints the median and p90 wall time of each in milliseconds and the ratios against bare bwrap.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.supervisor.kit import make_kit, write_config  # noqa: E402

SRT = REPO / "tools/harnesses/node_modules/.bin/srt"
SRT_SETTINGS: dict[str, dict[str, list[str]]] = {
    "network": {"allowedDomains": [], "deniedDomains": []},
    "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []},
}


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
    return (time.perf_counter() - start) * 1000, result.returncode, result.stderr.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        print("launch_overhead: bwrap is not installed", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="agentc-bench-"))
    try:
        kit = make_kit(root / "kit", harness_paths={"claude": "/bin/true"})
        write_config(kit)
        # All three start in the same empty directory: srt scans its working directory with
        # rg for files to protect (from / that alone took ~11 s here).
        cwd = root / "cwd"
        cwd.mkdir()
        settings = root / "srt-settings.json"
        settings.write_text(json.dumps(SRT_SETTINGS))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        env["HOME"] = os.environ.get("HOME", "/root")
        times: dict[str, list[float]] = {"bwrap": [], "launch": [], "srt": []}
        srt_problem: str | None = None
        if not SRT.exists():
            srt_problem = f"{SRT} is missing (run scripts/setup --dev)"
        # One launch before timing: it fills the per-boot kernel-probe cache, as any earlier
        # launch on the host would have.
        run, clone = kit.new_run("")
        _ms, code, err = timed(kit.argv(run, clone), env, cwd)
        if code != 0:
            print(f"launch_overhead: the launch failed: {err}", file=sys.stderr)
            return 1
        for _ in range(args.rounds):
            ms, code, err = timed([bwrap, "--ro-bind", "/", "/", "true"], env, cwd)
            assert code == 0, err
            times["bwrap"].append(ms)
            run, clone = kit.new_run("")
            ms, code, err = timed(kit.argv(run, clone), env, cwd)
            assert code == 0, err
            times["launch"].append(ms)
            if srt_problem is None:
                ms, code, err = timed([str(SRT), "-s", str(settings), "true"], env, cwd)
                if code != 0:
                    srt_problem = f"srt exited {code}: {err.splitlines()[-1] if err else ''}"
                else:
                    times["srt"].append(ms)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    base = statistics.median(times["bwrap"])
    print(f"rounds: {args.rounds}; wall milliseconds; ratios against bare bwrap")
    print(f"{'runner':<8} {'median':>8} {'p90':>8} {'ratio':>7} {'added':>8}")
    for name, values in times.items():
        if not values:
            continue
        median = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        print(f"{name:<8} {median:8.1f} {p90:8.1f} {median / base:7.1f} {median - base:+8.1f}")
    launch = statistics.median(times["launch"])
    print(f"launch added over bare bwrap: {launch - base:+.1f} ms (target: at most +60 ms)")
    if times["srt"]:
        srt = statistics.median(times["srt"])
        print(f"srt / launch: {srt / launch:.1f}x (target: at least 10x)")
    else:
        print(f"srt: not measured: {srt_problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
