"""``candidate-shell``: each reviewer Bash command in a nested sandbox without secrets.

Claude Code runs every Bash command of a reviewer through ``CLAUDE_CODE_SHELL_PREFIX`` =
``$RUN/candidate-shell`` (generated, mode 0500, read-only in the launch), which execs this
module with the whole command as one argument. The command runs in a second Bubblewrap where
the state root is an empty tmpfs (token, coordinator state, other runs and the run's own
markers hidden) and only the clone (read-only), the candidate's home and temp, the build and
Cargo dirs and a verifying reviewer's ``verification.json`` and ``verification-session.json``
(read-only; supervisor/loop/verification.py) come back; credential variables are unset.
Working-directory protocol: the command must end with Claude Code's ``pwd -P >| <file>``
naming a plain file directly in the harness's ``$RUN/tmp`` (else exit 126, nothing run);
afterwards the clone's path is written to that file, so ``cd`` never persists. A command past
45 minutes is stopped with exit 252; after two stopped commands in a row every further command
is refused (126).

Plain mode (``--plain``) is the same sandbox for a ``command:`` reviewer, which runs candidate
code through ``$AGENTC_CANDIDATE_SHELL`` = ``$RUN/candidate-run`` (generated like
``candidate-shell``): one command per call, given as ``-c '<shell command>'`` or as a program
and its arguments (quoted, never re-split), always in the clone, with no working-directory
protocol. Its stdin, stdout and stderr are the caller's: a reviewer captures them.

Each command runs alone: its PID namespace ends with it, so a background process it started (a
dev server, a watcher) is stopped when the command returns. The command's own shell lists
what is still running at that moment and candidate-shell names it on stderr
(``candidate-shell: 2 background processes outlived the command and were stopped: 7 sleep,
9 node``), so the reviewer learns why the next command cannot reach it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

from agentc.sandbox import reaper, seccomp

SCRIPT = "candidate-shell"  # $RUN/candidate-shell: Claude Code's CLAUDE_CODE_SHELL_PREFIX
PLAIN_SCRIPT = "candidate-run"  # $RUN/candidate-run: a command: reviewer's AGENTC_CANDIDATE_SHELL
TIMEOUT_SECONDS = 45 * 60
EXIT_REFUSED = 126
EXIT_STOPPED = 252
STUCK_LIMIT = 2
UNSET = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_SHELL_PREFIX",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "TYPESAFE_API_KEY",
)
# Runs the command, then lists the namespace's processes still alive besides pid 1 (bwrap) and
# itself, with shell builtins only (a fork would list itself), and keeps the command's status.
OUTLIVED = r"""/bin/bash -c "$1"
status=$?
count=0
names=
for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    if [ "$pid" != 1 ] && [ "$pid" != $$ ] && read -r name < "$dir/comm"; then
        count=$((count + 1))
        names="$names, $pid $name"
    fi
done 2>/dev/null
if [ "$count" -gt 0 ]; then
    echo "candidate-shell: $count background process(es) outlived the command and were" \
        "stopped: ${names#, }" >&2
fi
exit $status
"""
_CWD_FILE = re.compile(r"'?([^'\s]+)'?\s*")
_PLAIN = re.compile(r"[A-Za-z0-9._-]+")


def quote(arg: str) -> str:
    """POSIX single quoting for the generated script."""
    if "\0" in arg:
        raise ValueError("NUL in a shell argument")
    return "'" + arg.replace("'", "'\\''") + "'"


def script_text(
    prefix: list[str], run: Path, clone: Path, bwrap: Path, state: Path, *, plain: bool = False
) -> str:
    args = [*prefix, "candidate-shell", *(["--plain"] if plain else [])]
    args += ["--run", str(run), "--clone", str(clone)]
    args += ["--bwrap", str(bwrap), "--state-dir", str(state), "--"]
    return "#!/bin/sh\nexec " + " ".join(quote(a) for a in args) + ' "$@"\n'


def plain_command(args: list[str]) -> str | None:
    """Plain mode's one command: ``-c <string>``, else the arguments quoted into a command line
    (so a program and its arguments run as given); None when empty or not UTF-8."""
    try:
        for arg in args:
            arg.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if len(args) == 2 and args[0] == "-c":
        return args[1] if args[1].strip() else None
    if not args or args[0] == "-c":
        return None
    return " ".join(quote(a) for a in args)


def cwd_file(command: str, run: Path) -> Path | None:
    """The file named after the last ``pwd -P >| `` if it lies directly in ``$RUN/tmp``."""
    marker = "pwd -P >| "
    at = command.rfind(marker)
    if at < 0:
        return None
    found = _CWD_FILE.fullmatch(command[at + len(marker) :])
    if not found:
        return None
    path = Path(found[1])
    if path.parent != run / "tmp" or not _PLAIN.fullmatch(path.name) or path.name in {".", ".."}:
        return None
    return path


def inner_argv(
    bwrap: Path,
    state: Path,
    run: Path,
    clone: Path,
    cwd: str,
    command: str,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The nested sandbox: state root hidden, only the candidate's own dirs back; the
    implementer's syscall filter (read from ``seccomp_fd``) stacked on the reviewer's."""
    argv = [str(bwrap), "--unshare-user", "--disable-userns", "--assert-userns-disabled"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
    argv += ["--die-with-parent", "--cap-drop", "ALL"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--bind", "/", "/"]
    argv += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    argv += ["--tmpfs", str(state), "--ro-bind", str(clone), str(clone)]
    argv += ["--tmpfs", str(run / "tmp")]
    for sub in ("candidate-tmp", "target", "state/cargo"):
        argv += ["--bind", str(run / sub), str(run / sub)]
    argv += ["--bind", str(run / "candidate-home"), str(run / "state/home")]
    for name in ("verification.json", "verification-session.json"):
        argv += ["--ro-bind-try", str(run / name), str(run / name)]
    for name in UNSET:
        argv += ["--unsetenv", name]
    argv += ["--setenv", "TMPDIR", str(run / "candidate-tmp"), "--chdir", cwd]
    return [*argv, "--", "/bin/bash", "-c", OUTLIVED, "candidate-shell", command]


def _stuck_count(path: Path) -> int:
    try:
        return int(_read_small(path).strip() or "0")
    except (OSError, ValueError):
        return 0


def _read_small(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.read(fd, 64).decode("ascii", "replace")
    finally:
        os.close(fd)


def write_plain(path: Path, text: str) -> None:
    """Replace the contents of a plain file in ``$RUN/tmp``; never through a symlink, never
    into a FIFO, device or directory (each raises OSError)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise OSError(errno.EINVAL, "not a plain single-link file")
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def main(
    run: Path,
    clone: Path,
    bwrap: Path,
    state: Path,
    args: list[str],
    timeout: float | None = None,
    *,
    plain: bool = False,
) -> int:
    limit = TIMEOUT_SECONDS if timeout is None else timeout

    def say(message: str) -> None:
        print(f"candidate-shell: {message}", file=sys.stderr, flush=True)

    target: Path | None = None
    if plain:
        found = plain_command(args)
        if found is None:
            say(
                "usage: $AGENTC_CANDIDATE_SHELL -c '<command>' | <program> [<argument>...]; refused"
            )
            return EXIT_REFUSED
        command, cwd = found, str(clone)
    else:
        command = args[-1] if args else ""
        target = cwd_file(command, run)
        if target is None:
            say("no harness cwd file in the command; refused")
            return EXIT_REFUSED
        cwd = os.getcwd()
    stuck_file = run / "tmp/candidate-stuck"
    if _stuck_count(stuck_file) >= STUCK_LIMIT:
        say(
            f"{STUCK_LIMIT} commands in a row ran past {_duration(limit)} and were stopped; "
            "refused. Return your verdict now."
        )
        return EXIT_REFUSED
    try:
        filter_fd = seccomp.program_fd(seccomp.build_filter("implementer"))
    except seccomp.SeccompError as exc:
        say(f"cannot build the candidate's syscall filter ({exc}); refused")
        return EXIT_REFUSED

    def child() -> None:
        reaper.child_setup()
        os.set_inheritable(filter_fd, True)  # the nested bwrap reads its filter from it

    try:
        proc = subprocess.Popen(
            inner_argv(bwrap, state, run, clone, cwd, command, filter_fd),
            preexec_fn=child,
            start_new_session=True,
            close_fds=True,
            pass_fds=(filter_fd,),
        )
    finally:
        os.close(filter_fd)
    try:
        status = proc.wait(timeout=limit)
        stuck = 0
    except subprocess.TimeoutExpired:
        # The outer bwrap's death SIGKILLs the sandbox's pid 1 (--die-with-parent), which
        # tears the command's PID namespace down with everything in it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        stuck = _stuck_count(stuck_file) + 1
        say(f"the command ran past {_duration(limit)} and was stopped")
        status = EXIT_STOPPED
    if status < 0:
        status = 128 - status
    writes = [(stuck_file, f"{stuck}\n")] + ([(target, f"{clone}\n")] if target else [])
    for path, text in writes:
        try:
            write_plain(path, text)
        except OSError as exc:
            say(f"cannot write {path} ({exc.strerror}); refused")
            return EXIT_REFUSED
    return status


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:g} seconds"
