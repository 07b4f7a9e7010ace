"""agentc-attention check: each failing check pages once (ntfy and webhook, real HTTP on
loopback), stays quiet while it fails, sends one recovery note; an undelivered page exits 2 and
is delivered by the next run, never twice to a destination that took it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.attention.kit import Receiver, Setup, attention, private, receiver


def _config(
    setup: Setup, ntfy: Receiver, hook: Receiver, heartbeat: Path, **checks: object
) -> Path:
    return setup.config(
        ntfy={"url": ntfy.url, "topic": "agentc-test"},
        webhook={"url": hook.url + "/hook"},
        checks={"heartbeat": str(heartbeat), "neglect_days": 0, **checks},
    )


def test_a_failing_check_pages_once_then_recovers_once(
    setup: Setup, ntfy: Receiver, hook: Receiver, tmp_path: Path
) -> None:
    beat = tmp_path / "heartbeat.json"
    config = _config(setup, ntfy, hook, beat)
    first = attention(config, "check")
    assert first.returncode == 1, first.stderr
    assert "heartbeat: supervisor heartbeat unreadable (FileNotFoundError)" in first.stdout
    assert [r.path for r in ntfy.got] == ["/agentc-test"]
    page = ntfy.got[0]
    assert page.headers["Title"] == f"agentc {setup.project_id}: heartbeat failing"
    assert page.headers["Priority"] == "4" and page.headers["Tags"] == "rotating_light"
    assert b"FileNotFoundError" in page.body
    sent = hook.got[0].json()
    assert hook.got[0].path == "/hook"
    assert sent["check"] == "heartbeat" and sent["state"] == "failing"
    assert sent["project_id"] == setup.project_id and "FileNotFoundError" in sent["text"]

    again = attention(config, "check")
    assert again.returncode == 1 and len(ntfy.got) == 1 and len(hook.got) == 1

    setup.beat(beat)
    healthy = attention(config, "check")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert len(ntfy.got) == 2 and len(hook.got) == 2
    assert ntfy.got[1].headers["Title"] == f"agentc {setup.project_id}: heartbeat recovered"
    assert ntfy.got[1].headers["Priority"] == "2"
    assert hook.got[1].json()["state"] == "recovered"
    assert attention(config, "check").returncode == 0
    assert len(ntfy.got) == 2 and len(hook.got) == 2


def test_an_undelivered_page_exits_2_and_is_sent_next_run_once_per_destination(
    setup: Setup, ntfy: Receiver, hook: Receiver, tmp_path: Path
) -> None:
    config = _config(setup, ntfy, hook, tmp_path / "missing.json")
    ntfy.status = 503
    first = attention(config, "check")
    assert first.returncode == 7
    assert "not delivered to ntfy" in first.stderr and "503" in first.stderr
    assert not ntfy.got and len(hook.got) == 1  # the webhook took it
    ntfy.status = 200
    second = attention(config, "check")
    assert second.returncode == 1, second.stderr
    assert len(ntfy.got) == 1 and len(hook.got) == 1  # ntfy now; the webhook not again
    state = json.loads((setup.root / "state" / "state.json").read_text())
    assert state["outbox"] == [] and list(state["failing"]) == ["heartbeat"]
    assert (setup.root / "state" / "state.json").stat().st_mode & 0o777 == 0o600


def test_an_unreachable_destination_exits_7(setup: Setup, tmp_path: Path) -> None:
    with receiver() as gone:
        url = gone.url
    config = setup.config(
        ntfy={"url": url, "topic": "t"}, checks={"heartbeat": str(tmp_path / "none")}
    )
    out = attention(config, "check")
    assert out.returncode == 7 and "no answer" in out.stderr
    # The destination is named by kind and host: a topic or a webhook's path may be the secret.
    assert "ntfy at 127.0.0.1: no answer" in out.stderr and f"{url}/t" not in out.stderr


def test_the_coordinator_stopped_pages_and_leaves_its_checks_alone(
    lone_setup: Setup, ntfy: Receiver, hook: Receiver, tmp_path: Path
) -> None:
    setup = lone_setup
    beat = setup.beat(tmp_path / "heartbeat.json")
    config = _config(setup, ntfy, hook, beat, neglect_days=3)
    assert attention(config, "check").returncode == 0
    setup.server.stop()
    setup.beat(beat)
    down = attention(config, "check")
    assert down.returncode == 1
    assert "coordinator: the coordinator at" in down.stdout
    assert ntfy.titles() == [f"agentc {setup.project_id}: coordinator failing"]


def test_a_token_file_others_can_read_is_refused(
    setup: Setup, ntfy: Receiver, hook: Receiver
) -> None:
    setup.token_file.chmod(0o644)
    out = attention(_config(setup, ntfy, hook, setup.beat()), "check")
    assert out.returncode == 2
    assert "token_file:" in out.stderr and "Traceback" not in out.stderr
    assert not ntfy.got


def test_no_page_destination_is_a_config_error(setup: Setup) -> None:
    out = attention(setup.config(checks={"heartbeat": str(setup.beat())}), "check")
    assert out.returncode == 2
    assert "no page destination" in out.stderr


@pytest.mark.parametrize(
    "url",
    ["http://ntfy.example.org", "ftp://127.0.0.1", "https://user:pw@ntfy.sh", "not a url"],
)
def test_a_page_url_that_would_leak_is_refused(setup: Setup, url: str) -> None:
    out = attention(setup.config(ntfy={"url": url, "topic": "t"}), "check")
    assert out.returncode == 2
    assert "ntfy.url:" in out.stderr and "Traceback" not in out.stderr


def test_the_ntfy_token_is_sent_as_a_bearer(setup: Setup, ntfy: Receiver, tmp_path: Path) -> None:
    token = private(tmp_path / "ntfy-token", "tk_secret\n")
    config = setup.config(
        ntfy={"url": ntfy.url, "topic": "t", "token_file": str(token)},
        checks={"heartbeat": str(tmp_path / "none"), "neglect_days": 0},
    )
    assert attention(config, "check").returncode == 1
    assert ntfy.got[0].headers["Authorization"] == "Bearer tk_secret"


def test_a_stale_heartbeat_names_the_launch(
    setup: Setup, ntfy: Receiver, hook: Receiver, tmp_path: Path
) -> None:
    beat = setup.beat(tmp_path / "hb.json", launch={"role": "implementer", "task": "T1"})
    data = json.loads(beat.read_text())
    data["at_ms"] -= 3600_000
    beat.write_text(json.dumps(data))
    out = attention(_config(setup, ntfy, hook, beat), "check")
    assert out.returncode == 1
    assert "last seen during the implementer's launch of task T1" in out.stdout
    assert "s old (limit 300)" in out.stdout


def test_a_hand_test_uses_its_own_state(
    setup: Setup, ntfy: Receiver, hook: Receiver, tmp_path: Path
) -> None:
    config = _config(setup, ntfy, hook, setup.beat())
    assert attention(config, "check").returncode == 0
    own = tmp_path / "hand"
    out = attention(config, "check", "--state-dir", str(own), "--heartbeat", "/nonexistent")
    assert out.returncode == 1 and (own / "state.json").exists()
    timer_state = json.loads((setup.root / "state" / "state.json").read_text())
    assert timer_state["failing"] == {}  # the timer's own paged set is untouched
