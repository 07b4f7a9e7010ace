"""A real git repository holding a change with every kind of file the console's diff shows:
a modified source file (quoting hostile markup), a rename, a binary file, a large file, an
addition and a deletion."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

HOSTILE = '<script>alert("x")</script>'
LARGE_LINES = 600


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@dataclass(frozen=True)
class Change:
    repo: Path
    base: str
    candidate: str


def make_change(repo: Path, large_lines: int = LARGE_LINES) -> Change:
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "app.py").write_text("def main():\n    return 1\n\n\nprint(main())\n")
    (repo / "old_name.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    (repo / "gone.txt").write_text("bye\n")
    (repo / "large.txt").write_text("".join(f"row {i}\n" for i in range(large_lines)))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "app.py").write_text(
        f'def main():\n    return 2  # {HOSTILE}\n\n\nprint(main(), "{HOSTILE}")\n'
    )
    git(repo, "mv", "old_name.txt", "new_name.txt")
    (repo / "logo.png").write_bytes(bytes(range(256)) * 4)
    (repo / "gone.txt").unlink()
    (repo / "large.txt").write_text("".join(f"ROW {i}\n" for i in range(large_lines)))
    (repo / "added.md").write_text("# hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "candidate")
    return Change(repo, base, git(repo, "rev-parse", "HEAD"))


AMENDED = "return 3  # amended"


def amend_change(change: Change) -> Change:
    """The change's next version (a new candidate on the same base, as an implementer sent
    back makes it): app.py's line changed again with new hostile markup, added.md no longer
    added, the binary file's bytes changed (its patch text stays "Binary files differ"), a
    new file; the rest as reviewed."""
    repo = change.repo
    app = (repo / "app.py").read_text().replace("return 2", f"{AMENDED} </table><b>")
    (repo / "app.py").write_text(app)
    (repo / "added.md").unlink()
    (repo / "logo.png").write_bytes(bytes(range(255, -1, -1)) * 4)
    (repo / "notes.txt").write_text("why it changed\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "amended")
    return Change(repo, change.base, git(repo, "rev-parse", "HEAD"))
