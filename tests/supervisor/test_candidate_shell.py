"""``candidate-shell``: the working-directory protocol, the time limit, the stuck refusal and
what a candidate command cannot see, with real Bubblewrap.

The commands run as a throwaway unprivileged account, as the reviewer account does in
production. Under a root launcher the nested sandbox cannot start at all (the outer launch
maps root to 65534, and the inner bwrap then fails with "Can't mount proc"), and root run
directly would take bwrap's privileged path, not the one a reviewer takes; so these tests
(and the candidate rows in tests/containment) use an unprivileged user.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentc.supervisor.launch import candidate_shell
from tests.supervisor.kit import PORTABLE_PYTHON, create_user, delete_user

pytestmark = pytest.mark.root

SECRETS = {name: f"secret-{name.lower()}-{secrets.token_hex(4)}" for name in candidate_shell.UNSET}


@dataclass
class Shell:
    uid: int
    gid: int
    state: Path
    run: Path
    clone: Path

    @property
    def cwd_file(self) -> Path:
        return self.run / "tmp/cwd"

    def ending(self) -> str:
        return f" && pwd -P >| {self.cwd_file}"

    def __call__(
        self,
        command: str,
        timeout: float | None = None,
        cwd: Path | None = None,
        script: bool = False,
        extra: tuple[str, ...] = (),
        plain: tuple[str, ...] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """One call: ``command`` (Claude Code's protocol), or with ``plain`` a command:
        reviewer's call of candidate-run with these arguments."""
        if script:
            name = "candidate-shell" if plain is None else "candidate-run"
            argv = [str(self.run / name), *([command] if plain is None else plain)]
        elif plain is not None:
            argv = [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli", "candidate-shell",
                    "--plain", "--run", str(self.run), "--clone", str(self.clone), "--bwrap",
                    "/usr/bin/bwrap", "--state-dir", str(self.state), "--", *plain]  # fmt: skip
        else:
            argv = [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli", "candidate-shell",
                    "--run", str(self.run), "--clone", str(self.clone), "--bwrap",
                    "/usr/bin/bwrap", "--state-dir", str(self.state), *extra]  # fmt: skip
            if timeout is not None:
                argv += ["--timeout-seconds", str(timeout)]
            argv += ["--", command]
        as_user = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **SECRETS}
        env["HOME"] = str(self.run / "state/home")
        result = subprocess.run(
            [*as_user, *argv],
            env=env,
            cwd=cwd or self.clone,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result


@pytest.fixture(scope="module")
def account() -> Iterator[str]:
    name = create_user("agentc-cs-")
    try:
        yield name
    finally:
        delete_user(name)


@pytest.fixture
def shell(account: str) -> Iterator[Shell]:
    entry = pwd.getpwnam(account)
    base = Path(entry.pw_dir) / f"t-{secrets.token_hex(3)}"
    state = base / "state"
    run = state / "rev/runs/r1"
    clone = state / "rev/clones/r1"
    subs = ["tmp", "candidate-tmp", "target", "state/cargo", "state/home", "candidate-home"]
    for path in [run / s for s in subs] + [clone / "sub"]:
        path.mkdir(mode=0o700, parents=True)
    (state / "rev/claude-token").write_text("token-stand-in\n")
    (state / "rev/coordinator.toml").write_text("coordinator stand-in\n")
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(base)], check=True)
    try:
        yield Shell(entry.pw_uid, entry.pw_gid, state, run, clone)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _user_file(shell: Shell, path: Path, text: str) -> None:
    path.write_text(text)
    os.chown(path, shell.uid, shell.gid)


# -- working-directory protocol ---------------------------------------------------------


def test_a_command_runs_where_the_harness_is_and_cd_never_persists(shell: Shell) -> None:
    target = shell.run / "target"
    command = f"pwd > {target}/start && cd / && pwd > {target}/end" + shell.ending()
    result = shell(command, cwd=shell.clone / "sub")
    assert result.returncode == 0, result.stderr
    assert (target / "start").read_text() == f"{shell.clone / 'sub'}\n"
    assert (target / "end").read_text() == "/\n"
    # The command's own pwd -P went to a throwaway tmpfs; the harness's file names the clone.
    assert shell.cwd_file.read_text() == f"{shell.clone}\n"


def test_the_commands_status_is_kept_and_the_cwd_file_still_reset(shell: Shell) -> None:
    _user_file(shell, shell.cwd_file, "/somewhere/else\n")
    result = shell("(exit 7)" + shell.ending())
    assert result.returncode == 7
    assert shell.cwd_file.read_text() == f"{shell.clone}\n"


def test_background_processes_that_outlive_a_command_are_named(shell: Shell) -> None:
    marker = shell.run / "target/late"
    command = f"sleep 30 & sleep 31 & (sleep 2; touch {marker}) & echo out" + shell.ending()
    result = shell(command)
    assert result.returncode == 0 and result.stdout == "out\n", result.stderr
    [line] = [x for x in result.stderr.splitlines() if "outlived" in x]
    head, _, listed = line.partition(" outlived the command and were stopped: ")
    items = [item.split(" ") for item in listed.split(", ")]
    # Three jobs, and the subshell's own sleep if it has started (a job not yet past its exec
    # still shows as bash): each named with its pid.
    assert head == f"candidate-shell: {len(items)} background process(es)", line
    assert len(items) in (3, 4) and all(pid.isdigit() for pid, _ in items), line
    assert {name for _, name in items} <= {"sleep", "bash"}, line
    # They were stopped: the late one never ran its touch, however long the test waits.
    assert shell("sleep 3" + shell.ending()).returncode == 0
    assert not marker.exists()


def test_a_command_that_leaves_nothing_behind_names_nothing(shell: Shell) -> None:
    result = shell("sleep 0.1 & wait; (exit 3)" + shell.ending())
    assert result.returncode == 3
    assert "outlived" not in result.stderr, result.stderr


def test_the_generated_script_runs_candidate_shell(shell: Shell) -> None:
    text = candidate_shell.script_text(
        list(PORTABLE_PYTHON) + ["-m", "agentc.supervisor.cli"],
        shell.run,
        shell.clone,
        Path("/usr/bin/bwrap"),
        shell.state,
    )
    script = shell.run / "candidate-shell"
    _user_file(shell, script, text)
    os.chmod(script, 0o500)
    result = shell(f"echo ok > {shell.run}/target/via-script" + shell.ending(), script=True)
    assert result.returncode == 0, result.stderr
    assert (shell.run / "target/via-script").read_text() == "ok\n"


# -- plain mode: a command: reviewer's $AGENTC_CANDIDATE_SHELL ---------------------------


def test_plain_mode_runs_one_shell_command_in_the_clone(shell: Shell) -> None:
    secrets_seen = " ".join(f"${{{name}:-}}" for name in SECRETS)
    command = f'pwd; echo "[{secrets_seen}]"; cat {shell.state}/rev/claude-token; exit 5'
    result = shell("", cwd=shell.clone / "sub", plain=("-c", command))
    assert result.returncode == 5, result.stderr
    assert result.stdout.splitlines()[:2] == [
        str(shell.clone),
        "[" + " " * (len(SECRETS) - 1) + "]",
    ]
    assert "token-stand-in" not in result.stdout and "No such file" in result.stderr
    assert not shell.cwd_file.exists()  # no working-directory protocol


def test_plain_mode_runs_a_program_with_its_arguments_as_given(shell: Shell) -> None:
    args = ("printf", "%s|", "a b", "it's", "$HOME", "*", "-c")
    result = shell("", plain=args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "a b|it's|$HOME|*|-c|"


@pytest.mark.parametrize("args", [(), ("-c",), ("-c", "  "), ("-c", "true", "extra")])
def test_plain_mode_without_one_command_is_refused(shell: Shell, args: tuple[str, ...]) -> None:
    result = shell("", plain=args)
    assert result.returncode == candidate_shell.EXIT_REFUSED
    assert "usage: $AGENTC_CANDIDATE_SHELL -c '<command>'" in result.stderr


def test_the_generated_plain_script_is_candidate_run(shell: Shell) -> None:
    text = candidate_shell.script_text(
        list(PORTABLE_PYTHON) + ["-m", "agentc.supervisor.cli"],
        shell.run,
        shell.clone,
        Path("/usr/bin/bwrap"),
        shell.state,
        plain=True,
    )
    script = shell.run / "candidate-run"
    _user_file(shell, script, text)
    os.chmod(script, 0o500)
    result = shell("", script=True, plain=("-c", f"echo ok > {shell.run}/target/via-run"))
    assert result.returncode == 0, result.stderr
    assert (shell.run / "target/via-run").read_text() == "ok\n"


@pytest.mark.parametrize(
    "ending",
    [
        "",  # no cwd step at all
        " && pwd >| {run}/tmp/cwd",  # not pwd -P
        " && pwd -P > {run}/tmp/cwd",  # not >|
        " && pwd -P >| /tmp/cwd",  # outside $RUN/tmp
        " && pwd -P >| {run}/target/cwd",
        " && pwd -P >| {run}/tmp/sub/cwd",  # not directly in $RUN/tmp
        " && pwd -P >| {run}/tmp/..",
        " && pwd -P >| {run}/tmp/.",
        " && pwd -P >| '{run}/tmp/a b'",
        " && pwd -P >| {run}/tmp/cwd; touch {run}/target/after",  # something after it
        " && pwd -P >| $RUN/tmp/cwd",  # not a literal path
    ],
)
def test_a_command_without_a_harness_cwd_file_is_refused_unrun(shell: Shell, ending: str) -> None:
    marker = shell.run / "target/ran"
    result = shell(f"touch {marker}" + ending.format(run=shell.run))
    assert result.returncode == candidate_shell.EXIT_REFUSED == 126
    assert "no harness cwd file in the command; refused" in result.stderr
    assert not marker.exists() and not (shell.run / "target/after").exists()


def test_a_quoted_cwd_file_is_accepted(shell: Shell) -> None:
    result = shell(f"true && pwd -P >| '{shell.cwd_file}'")
    assert result.returncode == 0, result.stderr
    assert shell.cwd_file.read_text() == f"{shell.clone}\n"


def test_a_symlinked_cwd_file_is_refused_and_not_followed(shell: Shell) -> None:
    victim = shell.run / "target/victim"
    _user_file(shell, victim, "untouched\n")
    os.symlink(victim, shell.cwd_file)
    result = shell("true" + shell.ending())
    assert result.returncode == 126
    assert f"cannot write {shell.cwd_file}" in result.stderr
    assert victim.read_text() == "untouched\n"


@pytest.mark.parametrize("kind", ["directory", "fifo", "hard link"])
def test_a_cwd_file_that_is_not_a_plain_file_is_refused(shell: Shell, kind: str) -> None:
    if kind == "directory":
        shell.cwd_file.mkdir()
    elif kind == "fifo":
        os.mkfifo(shell.cwd_file)
    else:
        _user_file(shell, shell.run / "target/other", "other\n")
        os.link(shell.run / "target/other", shell.cwd_file)
    os.chown(shell.cwd_file, shell.uid, shell.gid)
    result = shell("true" + shell.ending())
    assert result.returncode == 126, result.stderr
    assert f"cannot write {shell.cwd_file}" in result.stderr
    if kind == "hard link":
        assert (shell.run / "target/other").read_text() == "other\n"


# -- time limit and stuck commands --------------------------------------------------------


def _alive(tag: str) -> str:
    return subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout


def test_a_command_past_the_limit_is_stopped_with_252(shell: Shell) -> None:
    tag = f"60.{secrets.randbelow(10**6)}"
    result = shell(f"sleep {tag}" + shell.ending(), timeout=1)
    assert result.returncode == candidate_shell.EXIT_STOPPED == 252
    assert "candidate-shell: the command ran past 1 seconds and was stopped" in result.stderr
    assert _alive(f"sleep {tag}") == ""  # the whole PID namespace went with it
    assert (shell.run / "tmp/candidate-stuck").read_text() == "1\n"
    assert shell.cwd_file.read_text() == f"{shell.clone}\n"


def test_two_stopped_commands_in_a_row_refuse_every_further_command(shell: Shell) -> None:
    for expected in (1, 2):
        assert shell("sleep 60" + shell.ending(), timeout=0.5).returncode == 252
        assert (shell.run / "tmp/candidate-stuck").read_text() == f"{expected}\n"
    marker = shell.run / "target/ran"
    for _ in range(2):
        result = shell(f"touch {marker}" + shell.ending(), timeout=0.5)
        assert result.returncode == 126
        assert "Return your verdict now." in result.stderr
        assert "2 commands in a row ran past 0.5 seconds" in result.stderr
    assert not marker.exists()


def test_a_command_ending_in_time_resets_the_stuck_count(shell: Shell) -> None:
    assert shell("sleep 60" + shell.ending(), timeout=0.5).returncode == 252
    assert shell("true" + shell.ending(), timeout=30).returncode == 0
    assert (shell.run / "tmp/candidate-stuck").read_text() == "0\n"
    assert shell("sleep 60" + shell.ending(), timeout=0.5).returncode == 252
    # One stopped command after a reset is not two in a row.
    assert shell("true" + shell.ending(), timeout=30).returncode == 0


def test_a_planted_stuck_count_of_two_refuses(shell: Shell) -> None:
    _user_file(shell, shell.run / "tmp/candidate-stuck", "2\n")
    assert shell("true" + shell.ending()).returncode == 126


@pytest.mark.parametrize("value", ["0", "-1", "abc", "86401"])
def test_a_bad_timeout_is_a_clear_error(shell: Shell, value: str) -> None:
    result = shell("true" + shell.ending(), extra=("--timeout-seconds", value))
    assert result.returncode == 2
    assert "--timeout-seconds" in result.stderr


def test_the_default_limit_is_45_minutes() -> None:
    assert candidate_shell.TIMEOUT_SECONDS == 45 * 60
    assert candidate_shell._duration(candidate_shell.TIMEOUT_SECONDS) == "45 minutes"


# -- what a candidate command cannot see --------------------------------------------------


def test_a_candidate_command_sees_no_state_no_token_no_credential_variables(
    shell: Shell,
) -> None:
    out = shell.run / "target"
    command = (
        f"env > {out}/env; ls -A {shell.state} > {out}/state; "
        f"(cat {shell.state}/rev/claude-token > {out}/token 2>&1 || true); "
        f"(touch {shell.clone}/written 2>/dev/null && echo yes > {out}/clone-writable || true); "
        f"ls -A {shell.run}/tmp > {out}/harness-tmp; echo $TMPDIR > {out}/tmpdir; "
        f"ls {shell.clone} > {out}/clone" + shell.ending()
    )
    result = shell(command)
    assert result.returncode == 0, result.stderr
    env = (out / "env").read_text()
    assert "PATH=" in env  # the listing is real
    for name, value in SECRETS.items():
        assert value not in env and f"{name}=" not in env, name
    # The state root is an empty tmpfs with only the clone and this run's dirs bound back.
    assert (out / "state").read_text().split() == ["rev"]
    assert "token-stand-in" not in (out / "token").read_text()
    assert not (out / "clone-writable").exists() and not (shell.clone / "written").exists()
    assert (out / "clone").read_text().split() == ["sub"]
    assert (out / "harness-tmp").read_text() == ""
    assert (out / "tmpdir").read_text().strip() == str(shell.run / "candidate-tmp")


# -- pure functions -----------------------------------------------------------------------


RUN = Path("/s/rev/runs/r1")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("x && pwd -P >| /s/rev/runs/r1/tmp/cwd", "/s/rev/runs/r1/tmp/cwd"),
        (
            "x && pwd -P >| '/s/rev/runs/r1/tmp/claude-1a2b-cwd'",
            "/s/rev/runs/r1/tmp/claude-1a2b-cwd",
        ),
        ("pwd -P >| /a && pwd -P >| /s/rev/runs/r1/tmp/c.d_e-f", "/s/rev/runs/r1/tmp/c.d_e-f"),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/cwd  ", "/s/rev/runs/r1/tmp/cwd"),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/cwd && pwd -P >| /tmp/x", None),
        ("x && pwd -P >| /s/rev/runs/r2/tmp/cwd", None),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/", None),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/a$b", None),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/cwd x", None),
        ("x && pwd -P >|/s/rev/runs/r1/tmp/cwd", None),
        ("pwd -P >| /s/rev/runs/r1/tmp/cwd", "/s/rev/runs/r1/tmp/cwd"),  # marker at index 0
        ("x && pwd -P >| /s/rev/runs/r1/tmp/..", None),
        ("x && pwd -P >| /s/rev/runs/r1/tmp/../tmp/cwd", None),
        ("x", None),
        ("", None),
    ],
)
def test_cwd_file_parsing(command: str, expected: str | None) -> None:
    found = candidate_shell.cwd_file(command, RUN)
    assert (str(found) if found else None) == expected


def test_inner_argv_matches_the_reference_order() -> None:
    state, clone = Path("/s"), Path("/s/rev/clones/r1")
    argv = candidate_shell.inner_argv(Path("/usr/bin/bwrap"), state, RUN, clone, "/w", "cmd")
    unset: list[str] = []
    for name in candidate_shell.UNSET:
        unset += ["--unsetenv", name]
    assert argv == [
        "/usr/bin/bwrap", "--unshare-user", "--disable-userns", "--assert-userns-disabled",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session",
        "--die-with-parent", "--cap-drop", "ALL", "--bind", "/", "/",
        "--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev",
        "--tmpfs", "/s", "--ro-bind", str(clone), str(clone),
        "--tmpfs", f"{RUN}/tmp",
        "--bind", f"{RUN}/candidate-tmp", f"{RUN}/candidate-tmp",
        "--bind", f"{RUN}/target", f"{RUN}/target",
        "--bind", f"{RUN}/state/cargo", f"{RUN}/state/cargo",
        "--bind", f"{RUN}/candidate-home", f"{RUN}/state/home",
        "--ro-bind-try", f"{RUN}/verification.json", f"{RUN}/verification.json",
        "--ro-bind-try", f"{RUN}/verification-session.json", f"{RUN}/verification-session.json",
        *unset,
        "--setenv", "TMPDIR", f"{RUN}/candidate-tmp", "--chdir", "/w",
        "--", "/bin/bash", "-c", candidate_shell.OUTLIVED, "candidate-shell", "cmd",
    ]  # fmt: skip
    assert candidate_shell.UNSET == (
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_SHELL_PREFIX", "OPENAI_API_KEY", "CODEX_API_KEY", "GH_TOKEN",
        "GITHUB_TOKEN", "TYPESAFE_API_KEY",
    )  # fmt: skip


def test_script_text_quotes_every_argument() -> None:
    text = candidate_shell.script_text(
        ["/opt/a b/agentc-supervisor"], RUN, Path("/c'x"), Path("/usr/bin/bwrap"), Path("/s")
    )
    assert text == (
        "#!/bin/sh\nexec '/opt/a b/agentc-supervisor' 'candidate-shell' '--run' "
        "'/s/rev/runs/r1' '--clone' '/c'\\''x' '--bwrap' '/usr/bin/bwrap' '--state-dir' '/s' "
        "'--' \"$@\"\n"
    )
    with pytest.raises(ValueError, match=r"^NUL in a shell argument$"):
        candidate_shell.quote("a\0b")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(60, "1 minutes"), (120, "2 minutes"), (2700, "45 minutes"), (59, "59 seconds"),
     (90, "90 seconds"), (61, "61 seconds"), (0.5, "0.5 seconds")],
)  # fmt: skip
def test_duration_text(seconds: float, text: str) -> None:
    assert candidate_shell._duration(seconds) == text
