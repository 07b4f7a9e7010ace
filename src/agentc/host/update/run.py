"""One updater run: verify, install, drain, switch, check, restart, canary; promote or roll back.

Exit status: 0 current, installed, promoted, deferred (a launch still ran at the drain
timeout), or nothing newer; 1 the release was rolled back (and is remembered as rejected); 2
not attempted (a refused release, a setting, the owner's kill switch, the loop not running) or
the rollback itself failed ("ROLLBACK FAILED": the host needs its owner).

The checks after the switch are the new release's own programs: ``agentc-supervisor preflight``
(which runs every configured harness in a real launch as each role's account),
``agentc-host check`` (the containment suite), and, once the loop runs again, ``agentc-attention
canary`` for each canary harness ("the end-to-end canary when it exists": ``[update]
canary_harnesses``, else ``attention.toml``'s ``[canary] harnesses`` when that file exists).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import AgentcError, ConfigError
from agentc.files import locks
from agentc.files.procs import run_check, system_env
from agentc.host.servicectl import Manager
from agentc.host.settings import HostSettings
from agentc.host.update import harness, install, release, state
from agentc.host.update.drain import Drain
from agentc.supervisor.config import SupervisorConfig

EXIT_OK, EXIT_ROLLED_BACK, EXIT_NOT_ATTEMPTED = 0, 1, 2
STEP_SECONDS = {"preflight": 1800.0, "check": 1800.0, "canary": 4 * 3600.0, "setup": 600.0}
ENV = system_env()


class StepFailed(AgentcError):
    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"{step} failed: {detail}")
        self.step = step


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+-]", version))


def newer(candidate: str, live: str | None) -> bool:
    return live is None or version_key(candidate) > version_key(live)


@contextlib.contextmanager
def locked(settings: HostSettings) -> Iterator[bool]:
    """``<state>/update.lock``, not waited for: False when another run holds it."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with locks.holding(settings.state_dir / "update.lock") as held:
        yield held


@dataclass
class Updater:
    settings: HostSettings
    settings_path: Path | None
    config: SupervisorConfig
    manager: Manager
    say: Callable[[str], None]

    @property
    def drain(self) -> Drain:
        return Drain(self.settings, self.config, self.manager)

    # -- the programs of the live release ---------------------------------------------------

    def program(self, name: str, *args: str, step: str) -> str:
        """Run ``<bin>/<name> args`` as root; its output, or raise :class:`StepFailed`."""
        argv = [str(self.settings.bin_dir / name), *args]
        try:
            done = run_check(argv, env=ENV, timeout=STEP_SECONDS.get(step.split()[0], 1800.0))
        except (OSError, subprocess.SubprocessError) as exc:
            raise StepFailed(step, f"{name} could not run: {exc}") from None
        if done.returncode != 0:
            raise StepFailed(step, _summary(name, done.stdout, done.stderr))
        return done.stdout

    def _host_args(self) -> list[str]:
        return ["--config", str(self.settings_path)] if self.settings_path else []

    def canaries(self) -> list[str]:
        if self.settings.update.canary_harnesses is not None:
            return list(self.settings.update.canary_harnesses)
        path = self.settings.etc_dir / "attention.toml"
        if not path.exists():
            return []
        from agentc.attention.config import AttentionConfig

        return list(AttentionConfig.load(path, what="attention configuration").canary.harnesses)

    def preflight(self) -> None:
        """``agentc-supervisor preflight`` of the live release and configuration."""
        sup = str(self.settings.supervisor_toml)
        self.program("agentc-supervisor", "--config", sup, "preflight", step="preflight")

    def checks(self, *, canary: bool) -> None:
        """After a switch: preflight, the containment suite, the restart, the canaries."""
        self.preflight()
        self.say("preflight passed")
        self.program("agentc-host", *self._host_args(), "check", "--json", step="check")
        self.say("the containment suite passed")
        self.restart()
        if canary:
            attention = str(self.settings.etc_dir / "attention.toml")
            for harness in self.canaries():
                self.program("agentc-attention", "--config", attention, "canary",
                              "--harness", harness, step=f"canary {harness}")  # fmt: skip
                self.say(f"the canary passed for {harness}")

    def restart(self) -> None:
        self.drain.release()
        try:
            self.manager.start("loop")
        except AgentcError as exc:
            raise StepFailed("restart", str(exc)) from None
        self.say("the loop runs again")

    def back_by_hand(self, restore: Callable[[], None], what: str) -> bool:
        """A rollback by hand: the loop stopped, ``restore`` puts back what ran before, then
        preflight and the restart; when they fail, a page (``what`` names the rollback) and
        False."""
        self.drain.stop_loop(force=True)
        restore()
        try:
            self.preflight()
            self.restart()
        except StepFailed as exc:
            self.page("ROLLBACK FAILED", f"{what}: {exc}")
            return False
        return True

    # -- one run ----------------------------------------------------------------------------

    def run(self, check_only: bool = False, retry: bool = False) -> int:
        known = state.load(self.settings)
        if retry and (known.rejected or known.harness_rejected):
            self.say(f"cleared the rejected releases {known.rejected + known.harness_rejected}")
            known.rejected, known.harness_rejected = [], []
            state.save(self.settings, known)
        index = release.Index(self.settings)
        work = install.incoming(self.settings)
        try:
            version = release.latest(index)
            live = install.current_version(self.settings)
            if not newer(version, live) or version in known.rejected:
                if version in known.rejected:
                    self.say(f"nothing to do: {version} was rejected (--retry tries it again)")
                else:
                    self.say(f"nothing to do: {live} is live (the index's latest: {version})")
                state.log(self.settings, "current", version=version, live=live)
                return self.harness_only(live, check_only)
            try:
                found = release.fetch(self.settings, index, version, work)
            except release.Refused as exc:
                return self.refused(version, str(exc))
            self.say(f"release {version} verified (signature, checksums, wheel hashes)")
            if check_only:
                self.say(f"would update {live or 'nothing'} -> {version}")
                state.log(self.settings, "would-update", version=version, live=live)
                return EXIT_OK
            if live is None:
                return self.first(found)
            problem = self.preconditions()
            if problem is not None:
                state.log(self.settings, "not-attempted", version=version, detail=problem)
                self.say(f"not attempted: {problem}")
                return EXIT_NOT_ATTEMPTED
            try:
                install.install(
                    self.settings, version, found.files, found.wheel, found.wheel_sha256
                )
            except install.InstallError as exc:
                return self.rejected_before_switch(known, version, str(exc))
        finally:
            shutil.rmtree(work, ignore_errors=True)
            index.close()
        return self.update(known, live, version)

    def preconditions(self) -> str | None:
        owner = self.drain.owner_switch()
        if owner is not None:
            return f"the owner's kill switch is set ({owner})"
        if not self.manager.is_active("loop"):
            return "the loop is not running (an update switches a running host)"
        return None

    def refused(self, version: str, why: str) -> int:
        self.say(f"release {version} refused, nothing changed: {why}")
        state.log(self.settings, "refused", version=version, detail=why)
        self.page(f"agentc update to {version} refused", why)
        return EXIT_NOT_ATTEMPTED

    def rejected_before_switch(self, known: state.UpdateState, version: str, why: str) -> int:
        known.rejected.append(version)
        state.save(self.settings, known)
        state.log(self.settings, "rejected", version=version, detail=why)
        self.page(f"agentc update to {version} failed to install", why)
        self.say(f"release {version} did not install and is rejected: {why}")
        return EXIT_ROLLED_BACK

    def first(self, found: release.Release) -> int:
        """No release yet: install and switch (nothing runs from one to drain or check), then
        the new release's setup enables what is configured."""
        install.install(self.settings, found.version, found.files, found.wheel, found.wheel_sha256)
        install.switch(self.settings, found.version)
        state.save(self.settings, state.UpdateState(core={"version": found.version}))
        state.log(self.settings, "installed", version=found.version)
        self.say(f"installed {found.version} (the first release)")
        out = self.program("agentc-host", *self._host_args(), "setup", step="setup")
        for line in out.splitlines():
            self.say(f"setup: {line}")
        return EXIT_OK

    def update(self, known: state.UpdateState, live: str | None, version: str) -> int:
        assert live is not None
        self.say(f"draining the loop for {live} -> {version}")
        if not self.drain.wait_quiet():
            minutes = self.settings.update.drain_timeout_minutes
            self.say(f"deferred: a launch still ran after {minutes:g} minutes; nothing changed")
            state.log(self.settings, "deferred", version=version, live=live)
            return EXIT_OK
        try:
            self.drain.stop_loop()
            install.switch(self.settings, version)
            self.say(f"switched to {version}")
            self.checks(canary=True)
        except StepFailed as exc:
            return self.roll_back(known, live, version, str(exc))
        except Exception as exc:  # anything unforeseen after the drain: back to what ran
            return self.roll_back(known, live, version, f"{type(exc).__name__}: {exc}")
        known.core = {"version": version, "previous": live}
        state.save(self.settings, known)
        removed = install.prune(self.settings, self.settings.update.keep, {live})
        state.log(self.settings, "promoted", version=version, previous=live, pruned=removed)
        self.say(f"promoted {version}" + (f"; removed {', '.join(removed)}" if removed else ""))
        return harness.step(self, version)

    def harness_only(self, live: str | None, check_only: bool) -> int:
        """The live release's harness step, when its harnesses differ from the live ones."""
        if live is None or check_only or not harness.changed(self, live):
            return EXIT_OK
        problem = self.preconditions()
        if problem is not None:
            self.say(f"harness step not attempted: {problem}")
            return EXIT_NOT_ATTEMPTED
        return harness.step(self, live)

    def roll_back(self, known: state.UpdateState, live: str, version: str, why: str) -> int:
        self.say(f"{why}; rolling back to {live}")
        try:
            self.drain.stop_loop(force=True)
            install.switch(self.settings, live)
            self.restart()
        except (AgentcError, OSError) as exc:
            detail = f"update to {version} failed ({why}) and the rollback to {live} failed: {exc}"
            state.log(self.settings, "rollback-failed", version=version, detail=detail)
            self.page("ROLLBACK FAILED", detail)
            self.say(f"ROLLBACK FAILED: {exc}")
            return EXIT_NOT_ATTEMPTED
        known.rejected.append(version)
        state.save(self.settings, known)
        shutil.rmtree(install.release_dir(self.settings, version), ignore_errors=True)
        state.log(self.settings, "rolled-back", version=version, live=live, detail=why)
        self.page(f"agentc update to {version} rolled back", f"{why}; {live} runs again")
        return EXIT_ROLLED_BACK

    # -- by hand ----------------------------------------------------------------------------

    def rollback_core(self) -> int:
        known = state.load(self.settings)
        live, previous = install.current_version(self.settings), known.core.get("previous")
        if not previous or not install.installed(self.settings, str(previous)):
            raise ConfigError("no previous release to roll back to (update-state.json)")
        previous = str(previous)
        self.say(f"rolling back {live} -> {previous}")
        if not self.back_by_hand(
            lambda: install.switch(self.settings, previous), f"rollback to {previous}"
        ):
            return EXIT_NOT_ATTEMPTED
        if live:
            known.rejected.append(live)
        known.core = {"version": previous}
        state.save(self.settings, known)
        state.log(self.settings, "rolled-back", version=live, live=previous, detail="by hand")
        return EXIT_OK

    def page(self, title: str, message: str) -> None:
        for problem in state.page(self.settings, title, message):
            self.say(problem)


def _summary(name: str, stdout: str, stderr: str) -> str:
    """What a failed program said: preflight's problems, the suite's failed checks, else the
    last lines."""
    with contextlib.suppress(ValueError, AttributeError, TypeError, IndexError, KeyError):
        data = json.loads(stdout.strip().splitlines()[-1])
        if "problems" in data:
            return "; ".join(str(p) for p in data["problems"])[:600]
        if "checks" in data:
            failed = [f"{c['name']}: {c['detail']}" for c in data["checks"] if not c["pass"]]
            return "; ".join(failed)[:600]
    lines = (stderr.strip() or stdout.strip()).splitlines()
    return f"{name}: " + (" / ".join(lines[-3:])[:600] if lines else "no output")
