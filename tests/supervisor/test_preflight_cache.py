"""The per-boot probe cache: a launch skips ``bwrap --version`` and the kernel probe only when
a private cache file of this user's holds exactly the current key; ``preflight`` never does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentc.sandbox import preflight as sandbox_preflight
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bwrap is not installed")


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each program-running check instead of running it; the cache is under tmp."""
    ran: list[str] = []
    cache_dir = tmp_path / "cache"
    monkeypatch.setattr(sandbox_preflight, "probe_cache", lambda: cache_dir / "probe-ok")

    def version(_bwrap: Path) -> list[str]:
        ran.append("v")
        return []

    def kernel(_bwrap: Path, _key: str) -> tuple[str, ...]:
        ran.append("k")
        return ()

    monkeypatch.setattr(sandbox_preflight, "bwrap_version_problems", version)
    monkeypatch.setattr(preflight, "kernel_problems", kernel)
    return ran


def config() -> SupervisorConfig:
    return SupervisorConfig(mode="personal", bubblewrap=Path(os.path.realpath(str(BWRAP))))


def test_a_passed_probe_is_reused_by_launches_only(probes: list[str]) -> None:
    assert preflight.sandbox_problems(config(), cached=True) == []
    assert probes == ["v", "k"]
    cache = sandbox_preflight.probe_cache()
    assert cache is not None and cache.read_bytes().startswith(b"v1 boot=")
    assert (os.stat(cache).st_mode & 0o777, os.stat(cache.parent).st_mode & 0o777) == (
        0o600,
        0o700,
    )
    assert preflight.sandbox_problems(config(), cached=True) == []
    assert probes == ["v", "k"]  # the launch skipped both
    assert preflight.sandbox_problems(config()) == []
    assert probes == ["v", "k", "v", "k"]  # preflight always probes


@pytest.mark.parametrize("tamper", ["key", "mode", "symlink", "dir-mode"])
def test_a_cache_that_is_not_exactly_ours_is_ignored(probes: list[str], tamper: str) -> None:
    preflight.sandbox_problems(config(), cached=True)
    cache = sandbox_preflight.probe_cache()
    assert cache is not None
    key = cache.read_bytes()
    if tamper == "key":
        cache.write_bytes(key.replace(b"boot=", b"boot=0"))
    elif tamper == "mode":
        os.chmod(cache, 0o644)
    elif tamper == "symlink":
        (cache.parent / "elsewhere").write_bytes(key)
        os.chmod(cache.parent / "elsewhere", 0o600)
        cache.unlink()
        cache.symlink_to(cache.parent / "elsewhere")
    else:
        os.chmod(cache.parent, 0o755)  # noqa: S103 - the hostile state under test
    probes.clear()
    preflight.sandbox_problems(config(), cached=True)
    assert probes == ["v", "k"]


def test_a_failed_probe_is_never_cached(probes: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "kernel_problems", lambda _b, _k: ("kernel: no",))
    assert preflight.sandbox_problems(config(), cached=True) == ["kernel: no"]
    cache = sandbox_preflight.probe_cache()
    assert cache is not None and not cache.exists()
