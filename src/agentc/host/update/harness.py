"""The staged harness step: a release's harness binaries, after its core, checked before they count.

A release may pin harness binaries (``release.json`` ``harnesses``: the file, verified with the
rest, and the version it must report). When one differs from the live ``<bin>/<name>`` (by
content) and the release's harness step was not rejected, the step runs after the core is
promoted, or alone when the core is already live. While drained: the previous binaries and
``supervisor.toml`` are saved (``<opt>/harness-saved/<time>/``); each new binary is copied
beside the live one and must report its declared version when run as the implementer's account;
then each is renamed into place and ``supervisor.toml``'s ``[pinned]`` entries are rewritten,
nothing else in the file (:func:`rewrite_pinned`). Preflight, the containment suite, the restart
and the canary must pass; otherwise the saved binaries and file come back, the loop restarts, the
release's harness step is remembered as rejected and paged (exit 1), and the core stays.
``--rollback harness`` restores the last saved set by hand.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentc.core.errors import AgentcError, ConfigError
from agentc.files import write_atomic
from agentc.files.accounts import become
from agentc.files.procs import run_check
from agentc.files.toml import toml_key, toml_string
from agentc.host.settings import HostSettings
from agentc.host.update import install, state
from agentc.host.update.drain import Drain
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import root as launch_root


class Updater(Protocol):
    """What the step uses of :class:`agentc.host.update.run.Updater`."""

    settings: HostSettings
    config: SupervisorConfig

    @property
    def drain(self) -> Drain: ...
    def say(self, line: str) -> None: ...
    def page(self, title: str, message: str) -> None: ...
    def program(self, name: str, *args: str, step: str) -> str: ...
    def checks(self, *, canary: bool) -> None: ...
    def restart(self) -> None: ...
    def back_by_hand(self, restore: Callable[[], None], what: str) -> bool: ...


_HEADER = re.compile(r"^\s*\[\s*pinned\s*\]\s*(#.*)?$")
_TABLE = re.compile(r"^\s*\[")
VERSION_SECONDS = 60.0


def rewrite_pinned(text: str, pins: dict[str, str]) -> str:
    """``text`` with ``[pinned]``'s entries for ``pins`` set, every other line as it was; a
    file whose pins are not a plain ``[pinned]`` table is refused (edit it by hand)."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"supervisor.toml does not parse ({exc}); not rewritten") from None
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        if "pinned" in before:
            raise ConfigError("supervisor.toml's pins are not a [pinned] table; edit them by hand")
        lines += ["", "[pinned]"]
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    for name, version in pins.items():
        line = f"{toml_key(name)} = {toml_string(version)}"
        key = re.compile(rf"^\s*{re.escape(toml_key(name))}\s*=")
        found = next((i for i in range(start + 1, end) if key.match(lines[i])), None)
        if found is None:
            lines.insert(end, line)
            end += 1
        else:
            lines[found] = line
    result = "\n".join(lines) + "\n"
    after = tomllib.loads(result)
    wanted = {**before, "pinned": {**before.get("pinned", {}), **pins}}
    if after != wanted:
        raise ConfigError("rewriting [pinned] would change more than the pins; edit it by hand")
    return result


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def changed(updater: Updater, version: str) -> dict[str, tuple[str, Path]]:
    """The release's harnesses whose binary differs from the live one: name -> (version, file)."""
    from agentc.host.update.release import MANIFEST, read_manifest

    files = install.release_dir(updater.settings, version) / install.FILES
    sums = {p.relative_to(files).as_posix(): "" for p in files.rglob("*") if p.is_file()}
    release = read_manifest(files / MANIFEST, version, sums)
    found: dict[str, tuple[str, Path]] = {}
    for name, harness in release.harnesses.items():
        live = updater.config.harness_program(name)
        if live != updater.settings.bin_dir / name:
            updater.say(f"harness {name}: harness_paths names {live}; not updated")
            continue
        if _sha256(files / harness.file) != _sha256(live):
            found[name] = (harness.version, files / harness.file)
    return found


def step(updater: Updater, version: str) -> int:
    """Run the harness step of the live ``version``; the exit status it adds."""
    known = state.load(updater.settings)
    if not updater.settings.update.harness or version in known.harness_rejected:
        return 0
    todo = changed(updater, version)
    if not todo:
        return 0
    names = ", ".join(f"{n} {v}" for n, (v, _) in sorted(todo.items()))
    updater.say(f"harness step: {names}")
    if not updater.drain.wait_quiet():
        updater.say("harness step deferred: a launch still ran; nothing changed")
        state.log(updater.settings, "harness-deferred", version=version)
        return 0
    updater.drain.stop_loop()
    saved = save(updater)
    known.harness = {"release": version, "saved": str(saved), "names": sorted(todo)}
    state.save(updater.settings, known)
    try:
        staged = {name: stage(updater, name, pin, source) for name, (pin, source) in todo.items()}
        for name, path in staged.items():
            os.replace(path, updater.settings.bin_dir / name)
        toml = updater.settings.supervisor_toml
        pins = {name: pin for name, (pin, _) in todo.items()}
        write_atomic(toml, rewrite_pinned(toml.read_text(), pins).encode(), mode=0o644)
        updater.say(f"harness step: renamed into place, [pinned] {pins}")
        updater.checks(canary=True)
    except Exception as exc:
        return roll_back(updater, known, version, saved, str(exc))
    state.log(updater.settings, "harness-promoted", version=version, harnesses=sorted(todo))
    updater.say(f"harness step promoted: {names}")
    return 0


def stage(updater: Updater, name: str, pin: str, source: Path) -> Path:
    """The new binary beside the live one; it must report ``pin`` as the implementer."""
    staged = updater.settings.bin_dir / f".{name}.new-{os.urandom(4).hex()}"
    shutil.copyfile(source, staged)
    os.chmod(staged, 0o755)  # noqa: S103 - every launch runs it
    account = launch_root.role_account(updater.config, "implementer")
    try:
        done = run_check([str(staged), "--version"], env={"PATH": "/usr/bin:/bin"},
                         timeout=VERSION_SECONDS,
                         preexec_fn=lambda: become(account))  # fmt: skip
        said = (done.stdout + done.stderr).strip()
    except OSError as exc:
        said = f"could not run ({exc})"
    if pin not in said:
        staged.unlink(missing_ok=True)
        raise AgentcError(f"harness {name} --version said {said[-200:]!r}, not {pin!r}")
    return staged


def save(updater: Updater) -> Path:
    folder = updater.settings.opt_dir / "harness-saved" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(mode=0o700, parents=True)
    for harness in ("claude", "codex", "pi"):
        live = updater.settings.bin_dir / harness
        if live.is_file() and not live.is_symlink():
            shutil.copy2(live, folder / harness)
    shutil.copy2(updater.settings.supervisor_toml, folder / "supervisor.toml")
    return folder


def restore(updater: Updater, saved: Path) -> None:
    """The saved binaries and supervisor.toml back, each by an atomic rename."""
    for item in saved.iterdir():
        target = (
            updater.settings.supervisor_toml
            if item.name == "supervisor.toml"
            else updater.settings.bin_dir / item.name
        )
        temp = target.with_name(f".{target.name}.restore-{os.urandom(4).hex()}")
        shutil.copy2(item, temp)
        os.replace(temp, target)


def roll_back(
    updater: Updater, known: state.UpdateState, version: str, saved: Path, why: str
) -> int:
    updater.say(f"harness step failed: {why}; restoring the previous harnesses")
    try:
        updater.drain.stop_loop(force=True)
        restore(updater, saved)
        updater.restart()
    except (AgentcError, OSError) as exc:
        detail = f"harness step of {version} failed ({why}); restoring failed: {exc}"
        state.log(updater.settings, "rollback-failed", version=version, detail=detail)
        updater.page("ROLLBACK FAILED", detail)
        return 2
    known.harness_rejected.append(version)
    known.harness = {}
    state.save(updater.settings, known)
    state.log(updater.settings, "harness-rolled-back", version=version, detail=why)
    updater.page(f"agentc harness update of {version} rolled back", f"{why}; the core stays")
    return 1


def rollback_harness(updater: Updater) -> int:
    """``--rollback harness``: the binaries and supervisor.toml the last step saved."""
    known = state.load(updater.settings)
    saved = Path(str(known.harness.get("saved", "")))
    if not known.harness or not saved.is_dir():
        raise ConfigError("--rollback harness: no harness update to roll back")
    updater.say(f"restoring the harnesses saved in {saved}")
    if not updater.back_by_hand(lambda: restore(updater, saved), "harness rollback"):
        return 2
    known.harness_rejected.append(str(known.harness.get("release")))
    known.harness = {}
    state.save(updater.settings, known)
    state.log(updater.settings, "harness-rolled-back", detail="by hand")
    return 0
