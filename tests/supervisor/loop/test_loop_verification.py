"""Verifying reviews in the live loop, end to end: a second real coordinator as the staging
coordinator, real bwrap (nested for the candidate sandbox), the launch's relay, and a
``command:`` reviewer whose candidate command reaches staging with the session the loop made.
The loop runs as an unprivileged account, as a personal-mode operator does."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.client.kit import issue_token, write_credentials
from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.supervisor.loop.host_kit import HostLoop
from tests.supervisor.loop.kit import LoopKit
from tests.supervisor.loop.review_kit import (
    PASSING_TEST,
    make_review_kit,
    mirror_branches,
    review_activity,
    spend,
    submit,
    workflow,
)

pytestmark = pytest.mark.root

# Candidate code run through $AGENTC_CANDIDATE_SHELL: it reads the session the loop handed over,
# asks the staging coordinator who it is with the cookie (through the launch's relay), and
# tries the login file (argv[1]) and a write to the session file.
PROBE = r"""
import json, os, sys, urllib.request
info = json.load(open(os.environ["AGENTC_VERIFICATION"]))
session = json.load(open(info["session_file"]))
cookie = session["cookie"]
request = urllib.request.Request(
    session["url"] + "/api/v1/me", headers={"Cookie": cookie["name"] + "=" + cookie["value"]}
)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
me = json.load(opener.open(request, timeout=20))["data"]["actor"]["name"]
try:
    open(sys.argv[1]).read()
    login = "readable"
except OSError as exc:
    login = "hidden (" + exc.strerror + ")"
try:
    open(info["session_file"], "a")
    write = "writable"
except OSError as exc:
    write = "read-only (" + exc.strerror + ")"
chrome = os.environ.get("CHROME_BIN", "-") + "/" + str(info["browser"])
print("me=" + me, "login=" + login, "session=" + write, "chrome=" + chrome,
      "cookie=" + cookie["value"])
"""
REVIEWER = """#!/usr/bin/python3
import json, os, subprocess, sys

PROBE = @PROBE@
LOGIN = @LOGIN@
prompt = sys.stdin.read()
print(json.dumps({"type": "reviewer", "step": "start"}), flush=True)
data = json.loads(prompt.split("<review-data>")[1].split("</review-data>")[0])
probe = subprocess.run(
    [os.environ["AGENTC_CANDIDATE_SHELL"], "/usr/bin/python3", "-c", PROBE, LOGIN],
    stdin=subprocess.DEVNULL, capture_output=True, text=True,
)
try:
    open(LOGIN).read()
    own = "readable"
except OSError as exc:
    own = "hidden (" + exc.strerror + ")"
evidence = (
    f"probe exited {probe.returncode}: {probe.stdout.strip()} {probe.stderr.strip()[-800:]}"
    f"; reviewer login={own}"
)
verdict = {
    "decision": "approve" if probe.returncode == 0 else "request_changes",
    "summary": evidence,
    "findings": [] if probe.returncode == 0 else ["probe failed: " + evidence[:500]],
    "criteria_evidence": [{"criterion": c, "evidence": evidence}
                          for c in data["acceptance_criteria"]],
    "amendment_decision": None,
}
print(json.dumps(verdict), flush=True)
"""


@pytest.fixture(scope="module")
def staging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The staging coordinator: a second real coordinator (SQLite) with a person to sign in."""
    root = tmp_path_factory.mktemp("staging")
    with live_server(str(root / "staging.sqlite3"), root) as live:
        admin = live.admin_client()
        body = {"name": "verifier", "role": "operator", "password": ADMIN_PASSWORD}
        resp = admin.post(
            "/api/v1/admin/people", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
        )
        assert resp.status_code == 201, resp.text
        admin.close()
        yield live


@pytest.fixture
def login_dir(account: str) -> Iterator[Path]:
    """The login's directory, of the loop's account, outside every tree a launch always masks
    (/tmp, the state root, the account's home): only the verifying reviewer's own tmpfs hides it."""
    folder = Path(tempfile.mkdtemp(prefix="agentc-login-", dir="/run"))
    shutil.chown(folder, account, account)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def review_loop(server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str) -> LoopKit:
    """A reviewer loop kit, run as the test account, with no gateway mode."""
    return make_review_kit(short_tmp, server, admin, account, mode=None)


def _login(folder: Path, account: str, password: str = ADMIN_PASSWORD) -> Path:
    path = folder / "login.json"
    path.write_text(json.dumps({"username": "verifier", "password": password}))
    os.chmod(path, 0o600)
    shutil.chown(path, account, account)
    return path


def _verifying(
    loop: LoopKit, url: str, login: Path, path: Path | None = None, browser: str | None = None
) -> None:
    """The loop's reviewer is the probe (at ``path``), and its project's reviews verify against
    ``url`` (with ``browser``)."""
    path = path or loop.state.parent.parent / "reviewer" / "verify.py"
    path.parent.mkdir(exist_ok=True)
    text = REVIEWER.replace("@PROBE@", json.dumps(PROBE)).replace("@LOGIN@", json.dumps(str(login)))
    path.write_text(text)
    os.chmod(path, 0o755)  # noqa: S103 - the reviewer must be executable
    loop.run.update(reviewer=True, reviewer_harness=f"command:{path}")
    loop.extra += f'[verification.{loop.project}]\nurl = "{url}"\nlogin_file = "{login}"\n'
    if browser is not None:
        loop.extra += f'browser = "{browser}"\n'
    loop.write_config()


def _signed_out(staging: LiveServer, summary: str) -> None:
    """The cookie the candidate used (its probe printed it) no longer works on staging."""
    found = re.search(r"cookie=(\S+)", summary)
    assert found is not None, summary
    cookie = {"coordinator_local": found[1]}
    me = httpx.get(staging.url + "/api/v1/me", cookies=cookie, timeout=20)
    assert me.status_code == 401, me.text


def _review_once(loop: LoopKit) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Submit a candidate whose gate passes and run one poll of the loop (which takes its
    review); returns the task and the poll, which ended cleanly."""
    task = submit(loop, PASSING_TEST, {"greeting.txt": "hi\n"})["task"]["id"]
    result = loop.once()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return str(task), result


def test_a_verifying_review_reaches_staging_with_the_session_only(
    review_loop: LoopKit,
    staging: LiveServer,
    account: str,
    login_dir: Path,
) -> None:
    loop = review_loop
    login = _login(login_dir, account)
    _verifying(loop, staging.url, login, browser="/usr/bin/true")
    task, result = _review_once(loop)
    assert "Reviewed {task: " in result.stderr and "'approve'" in result.stderr, result.stderr
    [decision] = workflow(loop, task)["reviews"]
    summary = decision["summary"]
    # The candidate command reached staging through the relay as the signed-in person; the
    # login stayed hidden from it and from the reviewer; the session file is read-only.
    assert "probe exited 0: me=verifier login=hidden (No such file or directory)" in summary
    assert "session=read-only (Read-only file system)" in summary
    assert "chrome=/usr/bin/true//usr/bin/true" in summary  # CHROME_BIN and verification.json
    assert "reviewer login=hidden (No such file or directory)" in summary
    assert ADMIN_PASSWORD not in summary
    # The loop signed the session out when the launch ended: the cookie no longer works.
    _signed_out(staging, summary)
    assert loop.records() == [] and loop.leftovers() == [] and mirror_branches(loop) == []


def test_host_mode_verifies_as_the_reviewer_account_with_roots_login(
    host: HostLoop, staging: LiveServer
) -> None:
    """In host mode the loop (root) signs in with its own login (root's, 0600, in a root 0700
    directory); the reviewer account's launch gets the session, and its candidate command
    reaches staging as that account."""
    loop, rev = host.loop, host.accounts["reviewer"]
    token = issue_token(loop.admin, f"rev-{uuid.uuid4().hex[:6]}", loop.project, "supervised")
    write_credentials(host.reviewer_credential.parent, loop.live.url, token)
    folder = Path(tempfile.mkdtemp(prefix="agentc-login-", dir="/run"))
    try:
        login = _login(folder, "root")
        loop.extra = f'[run.reviewer_binding]\ncredential_file = "{host.reviewer_credential}"\n'
        _verifying(loop, staging.url, login, host.root / "agent/verify.py")
        spend(loop, "impl", 1000.0)
        task, result = _review_once(loop)
        assert "'approve'" in result.stderr, result.stderr
        [decision] = workflow(loop, task)["reviews"]
        summary = decision["summary"]
        assert "probe exited 0: me=verifier login=hidden (No such file or directory)" in summary
        assert "reviewer login=hidden (No such file or directory)" in summary
        _signed_out(staging, summary)
        assert [p.name for p in (loop.state / "rev/runs").iterdir()] == ["some-review"]
        assert host.as_role("reviewer", "cat", str(login)).returncode != 0
        assert rev.uid != 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _released(loop: LoopKit, task: str) -> str:
    detail = loop.admin.get(f"/api/v1/projects/{loop.project}/tasks/{task}").json()["data"]
    [attempt] = [a for a in detail["attempts"] if a.get("activity_id")]
    assert attempt["state"] == "released"
    return str(attempt["handoff"])


def test_a_wrong_password_fails_the_launch_and_releases_the_review(
    review_loop: LoopKit,
    staging: LiveServer,
    account: str,
    login_dir: Path,
) -> None:
    loop = review_loop
    _verifying(loop, staging.url, _login(login_dir, account, "not the password"))
    task, result = _review_once(loop)
    why = (
        f"the review could not start: signing in to the staging coordinator {staging.url} as "
        "'verifier' failed (authentication_required: wrong username or password); a verifying "
        "review never runs unverified"
    )
    assert f"Review failed({task}: {why})" in result.stderr, result.stderr
    assert why in _released(loop, task)
    assert review_activity(loop, task)["state"] == "queued"
    assert workflow(loop, task)["reviews"] == []
    assert "not the password" not in result.stderr
    assert loop.records() == [] and loop.leftovers() == [] and mirror_branches(loop) == []


class Redirecting(http.server.BaseHTTPRequestHandler):
    """A staging that answers every request with a 302 (and a cookie), counting requests."""

    paths: list[str] = []

    def do_POST(self) -> None:
        self.paths.append(self.path)
        self.send_response(302)
        self.send_header("Location", "/followed")
        self.send_header("Set-Cookie", "coordinator_local=" + "r" * 64 + "; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def redirecting() -> Iterator[tuple[str, list[str]]]:
    paths: list[str] = []
    handler = type("Handler", (Redirecting,), {"paths": paths})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", paths
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_staging_answering_a_redirect_is_refused_and_not_followed(
    review_loop: LoopKit,
    account: str,
    login_dir: Path,
    redirecting: tuple[str, list[str]],
) -> None:
    url, paths = redirecting
    loop = review_loop
    _verifying(loop, url, _login(login_dir, account))
    task, result = _review_once(loop)
    assert "answered with a redirect (302) to /followed; redirects are never followed" in (
        _released(loop, task)
    )
    assert paths == ["/api/v1/auth/login"]
    assert workflow(loop, task)["reviews"] == []
    assert loop.records() == [] and loop.leftovers() == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('url = "http://127.1:@PORT@"\nlogin_file = "@LOGIN@"\n',
         "verification.@PROJECT@.url: the staging coordinator: 'http://127.1:@PORT@' writes an "
         "IPv4 address in a short or non-decimal form"),
        ('url = "http://127.0.0.1:80"\nlogin_file = "@LOGIN@"\n',
         "verification.@PROJECT@.url: the staging coordinator: port 80 is privileged"),
        ('url = "http://192.0.2.7:@PORT@"\nlogin_file = "@LOGIN@"\n',
         "verification.@PROJECT@.url: plain http is refused for 192.0.2.7"),
        ('url = "@URL@"\nlogin_file = "@LOGIN@"\npassword = "x"\n',
         "verification.@PROJECT@.password: unknown setting"),
        ('url = "@URL@"\nlogin_file = "@LOGIN@.missing"\n',
         "verification.@PROJECT@.login_file: @LOGIN@.missing: missing"),
        ('url = "@URL@"\nlogin_file = "@LOGIN@"\n',
         "verification.@PROJECT@.login_file: @LOGIN@: must be yours with no group or other "
         "access (mode 0640)"),
    ],
)  # fmt: skip
def test_a_bad_verification_table_refuses_the_loop_naming_the_key(
    server: LiveServer,
    admin: httpx.Client,
    staging: LiveServer,
    short_tmp: Path,
    account: str,
    login_dir: Path,
    table: str,
    message: str,
) -> None:
    loop = make_review_kit(short_tmp, server, admin, account)
    login = _login(login_dir, account)
    if "0640" in message:
        os.chmod(login, 0o640)
    port = staging.url.rsplit(":", 1)[1]

    def fill(text: str) -> str:
        for key, value in {"@PORT@": port, "@LOGIN@": str(login), "@URL@": staging.url}.items():
            text = text.replace(key, value)
        return text.replace("@PROJECT@", loop.project)

    loop.extra = f"[verification.{loop.project}]\n" + fill(table)
    loop.write_config()
    made = submit(loop, PASSING_TEST, {"greeting.txt": "hi\n"})
    result = loop.once()
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert fill(message) in result.stderr, result.stderr
    assert result.stderr.startswith("agentc-supervisor: ")
    if "login_file" not in message:  # a table that does not load names the file
        assert str(loop.config) in result.stderr
    # Nothing was claimed: the review waits.
    assert review_activity(loop, made["task"]["id"])["state"] == "queued"
    assert loop.records() == [] and loop.leftovers() == []
