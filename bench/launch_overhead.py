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

What the syscall filter and the resource limits cost is measured by building each
separately, as a launch does, around the same bare bwrap (no configuration switch turns
them off):

- ``bwrap+filter``: bare bwrap with ``--seccomp FD``, the implementer's filter built
  (libseccomp) and sealed in a memfd first, both inside the timing;
- ``bwrap+limits``: bare bwrap in a fresh per-launch cgroup (``LaunchLimits``: create, join
  with the rlimits in the child, read the counters, remove), all inside the timing, against
  ``bwrap+preexec`` (the same fork with an empty ``preexec_fn``, as every launch forks);
- ``syscalls``/``syscalls+filter``: 200 000 ``stat`` calls in one process under bare bwrap,
  without and with the filter: the filter's cost per system call.

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

from agentc.sandbox import seccomp  # noqa: E402
from agentc.sandbox.limits import LaunchLimits, Limits, detect_backend  # noqa: E402

SYSCALLS = "import os\nfor _ in range(200000):\n    os.stat('/')\n"

SRT = REPO / "tools/harnesses/node_modules/.bin/srt"
SRT_SETTINGS: dict[str, dict[str, list[str]]] = {
    "network": {"allowedDomains": [], "deniedDomains": []},
    "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []},
}


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
    return (time.perf_counter() - start) * 1000, result.returncode, result.stderr.strip()


def with_filter(argv: list[str]) -> tuple[float, int, str]:
    """``argv`` (a bwrap command line) with the implementer's filter, built inside the timing."""
    start = time.perf_counter()
    fd = seccomp.program_fd(seccomp.build_filter("implementer"))
    try:
        full = [argv[0], "--seccomp", str(fd), *argv[1:]]
        result = subprocess.run(full, capture_output=True, text=True, pass_fds=(fd,))
    finally:
        os.close(fd)
    return (time.perf_counter() - start) * 1000, result.returncode, result.stderr.strip()


def _nothing() -> None:
    """A ``preexec_fn`` that does nothing: the fork path every launch takes anyway."""


def with_preexec(argv: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, preexec_fn=_nothing)
    return (time.perf_counter() - start) * 1000, result.returncode, result.stderr.strip()


def with_limits(argv: list[str], round_: int) -> tuple[float, int, str]:
    """``argv`` in a fresh per-launch cgroup, created and removed inside the timing."""
    start = time.perf_counter()
    limits = LaunchLimits(Limits(), f"agentc-bench-{os.getpid()}-{round_}")
    limits.create()
    try:
        result = subprocess.run(argv, capture_output=True, text=True, preexec_fn=limits.enter)
        limits.hit()
    finally:
        limits.remove()
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
        names = ["bwrap", "bwrap+filter", "bwrap+preexec", "bwrap+limits", "syscalls"]
        names.append("syscalls+filter")
        times: dict[str, list[float]] = {name: [] for name in [*names, "launch", "srt"]}
        bare = [bwrap, "--ro-bind", "/", "/", "true"]
        stat_loop = [bwrap, "--ro-bind", "/", "/", sys.executable, "-c", SYSCALLS]
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
        for round_ in range(args.rounds):
            for name, (ms, code, err) in (
                ("bwrap", timed(bare, env, cwd)),
                ("bwrap+filter", with_filter(bare)),
                ("bwrap+preexec", with_preexec(bare)),
                ("bwrap+limits", with_limits(bare, round_)),
                ("syscalls", timed(stat_loop, env, cwd)),
                ("syscalls+filter", with_filter(stat_loop)),
            ):
                assert code == 0, err
                times[name].append(ms)
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
    print(f"limits backend: {detect_backend()}")
    print(f"{'runner':<16} {'median':>8} {'p90':>8} {'ratio':>7} {'added':>8}")
    for name, values in times.items():
        if not values:
            continue
        median = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        print(f"{name:<16} {median:8.1f} {p90:8.1f} {median / base:7.1f} {median - base:+8.1f}")
    filtered = statistics.median(times["bwrap+filter"]) - base
    print(f"filter (build, seal, load) over bwrap: {filtered:+.1f} ms")
    forked = statistics.median(times["bwrap+preexec"])
    limited = statistics.median(times["bwrap+limits"]) - forked
    # A launch forks with a preexec_fn anyway (reaper.child_setup): compare like with like.
    print(f"limits (cgroup create, join, read, remove) over bwrap+preexec: {limited:+.1f} ms")
    loop = statistics.median(times["syscalls"])
    per_call = (statistics.median(times["syscalls+filter"]) - loop) * 1e6 / 200000
    print(f"filter per system call: {per_call:+.0f} ns (over 200 000 stat calls)")
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
