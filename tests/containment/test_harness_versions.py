"""The real harness binaries (pinned in tools/harnesses) run ``--version`` inside a launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.supervisor.kit import HARNESS_BIN, cleanup, make_kit

pytestmark = pytest.mark.root  # the kit's tree is root's


@pytest.mark.parametrize("harness", ["claude", "codex", "pi"])
def test_real_harness_version_inside_a_launch(tmp_path: Path, harness: str) -> None:
    program = HARNESS_BIN / harness
    assert program.exists(), f"{program} missing: run scripts/setup --dev"
    kit = make_kit(tmp_path / "kit", harness_paths={harness: str(program)})
    try:
        run, clone = kit.new_run("")
        result = kit.launch(run, clone, f"--harness={harness}", "--", "--version", timeout=180)
        assert result.returncode == 0, (result.stderr, (run / "stderr.log").read_text())
        out = (run / "events.jsonl").read_text() + (run / "stderr.log").read_text()  # pi: stderr
        assert any(ch.isdigit() for ch in out), out
    finally:
        cleanup(tmp_path / "kit")
