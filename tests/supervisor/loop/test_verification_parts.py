"""The verifying reviewer's parts without a loop: the ``[verification.<project>]`` table, the
start checks, the staging sign-in and sign-out over a scripted HTTP answer (httpx's mock
transport: no socket), and what a verifying reviewer's launch plan adds. The whole review, with
a real staging coordinator, relay and bwrap, is tests/supervisor/loop/test_loop_verification.py."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agentc.client.transport import Transport
from agentc.core.errors import ConfigError, SupervisorError
from agentc.supervisor.config import SupervisorConfig, load_config
from agentc.supervisor.launch.plan import plan
from agentc.supervisor.launch.request import LaunchRequest, VerificationAccess
from agentc.supervisor.loop import verification
from tests.supervisor.kit import make_kit

ORIGIN = "http://127.0.0.1:18443"
COOKIE = "c" * 64
CSRF = "f" * 64
PASSWORD = "s3cret-pass"


def _write(tmp_path: Path, table: str, top: str = "") -> Path:
    path = tmp_path / "supervisor.toml"
    head = f'mode = "personal"\nstate_dir = "{tmp_path / "state"}"\n{top}'
    path.write_text(head + "[verification.p1]\n" + table)
    return path


def _login(folder: Path, data: object = None, mode: int = 0o600) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "login.json"
    login = data if data is not None else {"username": "v", "password": PASSWORD}
    path.write_text(json.dumps(login))
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('url = "https://s.example"\nlogin_file = "/l.json"\nuser = "x"\n',
         "verification.p1.user: unknown setting"),
        ('login_file = "/l.json"\n', "verification.p1.url: required, but missing"),
        ('url = "https://s.example"\n', "verification.p1.login_file: required, but missing"),
        ('url = "http://10.0.0.1:8080"\nlogin_file = "/l.json"\n',
         "verification.p1.url: plain http is refused for 10.0.0.1"),
        ('url = "http://127.0.0.1:443"\nlogin_file = "/l.json"\n',
         "verification.p1.url: the staging coordinator: port 443 is privileged"),
        ('url = "http://localhost"\nlogin_file = "/l.json"\n',
         "verification.p1.url: the staging coordinator: 'http://localhost' is loopback on a "
         "default port"),
        ('url = "http://v:pw@127.0.0.1:8080"\nlogin_file = "/l.json"\n',
         "verification.p1.url: the staging coordinator: 'http://v:pw@127.0.0.1:8080' has an '@'"),
        ('url = "http://[::1]:8080"\nlogin_file = "/l.json"\n',
         "verification.p1.url: the staging coordinator: 'http://[::1]:8080' names an IPv6 host"),
        ('url = "http://127.1:8080"\nlogin_file = "/l.json"\n',
         "verification.p1.url: the staging coordinator: 'http://127.1:8080' writes an IPv4 "
         "address in a short or non-decimal form"),
        ('url = "https://s.example/dashboard"\nlogin_file = "/l.json"\n',
         "verification.p1.url: 'https://s.example/dashboard' must be an origin only"),
        ('url = "https://s.example"\nlogin_file = "l.json"\n', "verification.p1.login_file: "),
        ('url = "https://s.example"\nlogin_file = "/l.json"\nbrowser = "chromium"\n',
         "verification.p1.browser: "),
    ],
)  # fmt: skip
def test_a_bad_table_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, table: str, message: str
) -> None:
    path = _write(tmp_path, table)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: "), caught.value
    assert message in str(caught.value)


def test_a_project_id_that_is_not_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text('[verification."a b"]\nurl = "https://s.example"\nlogin_file = "/l.json"\n')
    with pytest.raises(ConfigError, match="verification: 'a b' is not a project id"):
        load_config(path)


def _checked(tmp_path: Path, table: str, top: str = "") -> str:
    with pytest.raises(ConfigError) as caught:
        verification.check(load_config(_write(tmp_path, table, top)))
    return str(caught.value)


def test_the_start_checks_name_each_key_and_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "login.json"
    text = _checked(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{missing}"\n')
    assert text == f"verification.p1.login_file: {missing}: missing"
    loose = _login(tmp_path / "loose", mode=0o644)
    text = _checked(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{loose}"\n')
    assert text == (
        f"verification.p1.login_file: {loose}: must be yours with no group or other access "
        "(mode 0644)"
    )
    odd = _login(tmp_path / "odd", {"username": "v", "password": PASSWORD, "totp": "1"})
    text = _checked(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{odd}"\n')
    assert text.startswith(f"verification.p1.login_file: {odd}: must hold exactly")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "login.json").write_text("password=hunter2")
    os.chmod(broken / "login.json", 0o600)
    text = _checked(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{broken / "login.json"}"\n')
    assert text.endswith("not a JSON object") and "hunter2" not in text
    # Its directory is hidden from the launch: never the one holding the state root.
    beside = _login(tmp_path)
    text = _checked(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{beside}"\n')
    assert f"verification.p1.login_file: {beside}: its directory {tmp_path} is hidden" in text
    good = _login(tmp_path / "good")
    text = _checked(
        tmp_path,
        f'url = "http://127.0.0.1:3128"\nlogin_file = "{good}"\nbrowser = "{tmp_path}"\n',
        'egress_listen = "127.0.0.1:3128"\n',
    )
    assert text == (
        f"verification.p1.browser: {tmp_path} is not an executable file; "
        "verification.p1.url: 127.0.0.1:3128 is egress_listen's address; use another port"
    )
    verification.check(load_config(_write(tmp_path, f'url = "{ORIGIN}"\nlogin_file = "{good}"\n')))


# -- sign-in and sign-out over a scripted answer ---------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def _answer(
    status: int = 200, cookies: list[str] | None = None, data: object = None
) -> httpx.Response:
    body = {"data": data if data is not None else {"csrf_token": CSRF, "actor": {"name": "v"}}}
    if status >= 400:
        wrong = {"code": "authentication_required", "message": "wrong username or password"}
        body = {"error": wrong}
    headers = [("set-cookie", c) for c in (cookies if cookies is not None else [])]
    return httpx.Response(status, json=body, headers=headers)


SESSION_COOKIE = f"coordinator_local={COOKIE}; HttpOnly; Max-Age=43200; Path=/; SameSite=strict"


class Staging:
    """A scripted staging coordinator: every request kept; ``answer`` answers the login."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/api/v1/auth/logout":
            return httpx.Response(200, json={"data": {"signed_out": True}})
        return self.answer


@pytest.fixture
def short() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agc-ver-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _sign_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, staging: Staging
) -> tuple[Path, verification.Staging | None]:
    mock = httpx.MockTransport(staging)
    monkeypatch.setattr(verification, "Transport", functools.partial(Transport, transport=mock))
    login = _login(tmp_path / "login")
    config = load_config(_write(tmp_path, f'url = "{ORIGIN}/"\nlogin_file = "{login}"\n'))
    run = tmp_path / "run"
    run.mkdir()
    return run, verification.sign_in(config, "p1", run)


def test_sign_in_writes_the_session_and_sign_out_ends_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    staging = Staging(_answer(cookies=[SESSION_COOKIE]))
    run, signed = _sign_in(monkeypatch, tmp_path, staging)
    assert signed is not None
    [login] = staging.requests
    assert login.headers["origin"] == ORIGIN and "cookie" not in login.headers
    assert json.loads(login.content) == {"username": "v", "password": PASSWORD}
    session = run / "verification-session.json"
    assert json.loads(session.read_text()) == {
        "url": ORIGIN,
        "cookie": {"name": "coordinator_local", "value": COOKIE},
    }
    assert json.loads((run / "verification.json").read_text()) == {
        "project_id": "p1",
        "url": ORIGIN,
        "session_file": str(session),
        "browser": None,
    }
    for name in ("verification.json", "verification-session.json"):
        assert (run / name).stat().st_mode & 0o777 == 0o600
    names = sorted(p.name for p in run.iterdir())
    assert names == ["verification-session.json", "verification.json"]
    assert PASSWORD not in (run / "verification.json").read_text()
    assert COOKIE not in repr(signed)
    assert signed.access() == VerificationAccess("127.0.0.1:18443", tmp_path / "login", None)
    assert verification.sign_out(signed) is None
    logout = staging.requests[-1]
    assert logout.url.path == "/api/v1/auth/logout" and json.loads(logout.content) == {}
    assert logout.headers["cookie"] == f"coordinator_local={COOKIE}"
    assert logout.headers["x-csrf-token"] == CSRF and logout.headers["origin"] == ORIGIN
    uuid.UUID(logout.headers["idempotency-key"])


def test_another_project_is_not_verifying(tmp_path: Path) -> None:
    assert verification.sign_in(SupervisorConfig(), "p2", tmp_path) is None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_answer(401), "authentication_required: wrong username or password"),
        (httpx.Response(302, headers={"location": "http://127.0.0.1:9/login",
                                      "set-cookie": SESSION_COOKIE}),
         "answered with a redirect (302) to http://127.0.0.1:9/login; redirects are never "
         "followed"),
        (_answer(), "no single well-formed coordinator_local cookie (0 Set-Cookie header(s))"),
        (_answer(cookies=[SESSION_COOKIE, "other=1"]), "(2 Set-Cookie header(s))"),
        (_answer(cookies=[f"__Host-coordinator={COOKIE}; Path=/"]),
         "no single well-formed coordinator_local cookie"),
        (_answer(cookies=["coordinator_local=short"]), "no single well-formed"),
        (_answer(cookies=['coordinator_local=' + "a" * 40 + '"}},"x']), "no single well-formed"),
        (_answer(cookies=[SESSION_COOKIE], data={"actor": {}}), "no well-formed csrf_token"),
    ],
)  # fmt: skip
def test_a_failed_sign_in_writes_nothing_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answer: httpx.Response, reason: str
) -> None:
    staging = Staging(answer)
    with pytest.raises(SupervisorError) as caught:
        _sign_in(monkeypatch, tmp_path, staging)
    text = str(caught.value)
    assert text.startswith(f"signing in to the staging coordinator {ORIGIN} as 'v' failed (")
    assert reason in text and text.endswith("a verifying review never runs unverified")
    assert PASSWORD not in text and COOKIE not in text
    assert list((tmp_path / "run").iterdir()) == []
    assert len(staging.requests) == 1  # a redirect is never followed


def test_a_refused_sign_out_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    staging = Staging(_answer(cookies=[SESSION_COOKIE]))
    _run, signed = _sign_in(monkeypatch, tmp_path, staging)
    assert signed is not None

    def gone(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    mock = httpx.MockTransport(gone)
    monkeypatch.setattr(verification, "Transport", functools.partial(Transport, transport=mock))
    problem = verification.sign_out(signed)
    assert problem is not None and problem.startswith(
        f"signing out of the staging coordinator {ORIGIN} failed (transport: "
    )
    assert problem.endswith("the session ends with its 12-hour lifetime")


# -- the launch plan ---------------------------------------------------------------------------


@pytest.mark.root  # the kit's tree is root's
def test_a_verifying_reviewers_plan_relays_staging_hides_the_login_and_sets_the_env(
    short: Path,
) -> None:
    kit = make_kit(short / "kit")
    hidden = short / "secret"
    hidden.mkdir()
    browser = Path("/bin/true")
    access = VerificationAccess("127.0.0.1:18443", hidden, browser)
    run, clone = kit.new_run("exit 0\n", role="reviewer")
    base = LaunchRequest(
        role="reviewer",
        harness="claude",
        run=run,
        clone=clone,
        launch_id=str(uuid.uuid4()),
    )
    verifying = plan(load_config(kit.config), dataclasses.replace(base, verification=access))
    assert verifying.env["AGENTC_VERIFICATION"] == str(run / "verification.json")
    assert verifying.env["CHROME_BIN"] == "/bin/true"
    [relay] = [r for r in verifying.description.relays if r.name == "staging"]
    assert (relay.address, str(relay.socket)) == ("127.0.0.1:18443", str(run / "net/staging.sock"))
    i = verifying.argv.index("netns-relay")
    assert verifying.argv[i + 1 : i + 3] == ["--relay", f"127.0.0.1:18443={run}/net/staging.sock"]
    assert str(hidden) in {str(m) for m in verifying.description.masks}
    t = verifying.argv.index(str(hidden)) - 1
    assert verifying.argv[t] == "--tmpfs"
    run2, clone2 = kit.new_run("exit 0\n", role="reviewer")
    plain = plan(load_config(kit.config), dataclasses.replace(base, run=run2, clone=clone2))
    assert "AGENTC_VERIFICATION" not in plain.env and "CHROME_BIN" not in plain.env
    assert not any(r.name == "staging" for r in plain.description.relays)
    assert str(hidden) not in plain.argv
