"""The candidate push helper's wire protocol and its client (the standard library and
:mod:`agentc.files.sockets` only).

One request per connection to the helper's Unix socket (docs/push.md):

1. the client sends one header line, a JSON object with exactly ``op`` (``"candidate"`` or
   ``"wip"``) and ``revision`` (a full 40 or 64 hex commit id), then a git bundle carrying the
   revision, then shuts its sending side down (end of input marks the end of the bundle);
2. the helper answers with one JSON line, ``{"ok": true, "ref": ..., "revision": ...}`` or
   ``{"ok": false, "error": "..."}``, and closes. It may answer before it has read the bundle
   (a refusal, or a revision it has already published).

The helper derives the ref itself; a request cannot name one. :func:`publish` is the client
the agent CLI calls: it bundles the revision from a checkout and sends it.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files.git import run_git
from agentc.files.sockets import sun_path

OPS = ("candidate", "wip")
FIELDS = frozenset({"op", "revision"})
MAX_HEADER_BYTES = 4096
MAX_BUNDLE_BYTES = 512 * 1024 * 1024
# A launch's WIP quota (``agentc-push serve --wip-max-refs/--wip-max-mib``, ``[push_helper]``).
WIP_MAX_REFS = 50
WIP_MAX_MIB = 256
MAX_ANSWER_BYTES = 64 * 1024
DEFAULT_TIMEOUT = 900.0
NOT_LAUNCH = "connection is not from this helper's launch"
# The start of the refusal for a bundle whose prerequisite commits the helper cannot find on the
# remote; the client then sends a full bundle.
MISSING_BASE = "the bundle needs commits that are not on the remote"
_REVISION = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CHUNK = 1024 * 1024


class ProtocolError(AgentcError, ValueError):
    """A request or an answer that does not follow the protocol; the message says how."""


class PushError(AgentcError):
    """Publishing through the helper failed; the message is safe to show."""


class HelperUnavailable(PushError):
    """No helper is serving the socket."""


class HelperTimeout(PushError):
    """The helper did not answer in time."""


class Refused(PushError):
    """The helper answered with a refusal."""


@dataclass(frozen=True)
class Request:
    op: str
    revision: str


def check_request(op: object, revision: object) -> Request:
    """The request, or :class:`ProtocolError` naming what is wrong."""
    if not isinstance(op, str) or op not in OPS:
        raise ProtocolError("op must be 'candidate' or 'wip'")
    if not isinstance(revision, str) or not _REVISION.fullmatch(revision):
        raise ProtocolError("revision must be a full commit id: 40 or 64 lowercase hex digits")
    return Request(op, revision)


def encode_request(request: Request) -> bytes:
    return json.dumps({"op": request.op, "revision": request.revision}).encode() + b"\n"


def parse_request(line: bytes) -> Request:
    """The request a header line carries; only ``op`` and ``revision``, both valid."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("malformed request header: not a JSON line") from None
    if not isinstance(record, dict):
        raise ProtocolError("malformed request header: not a JSON object")
    extra = sorted(set(record) - FIELDS)
    if extra:
        raise ProtocolError(
            f"unknown request field(s) {', '.join(map(repr, extra))}: a request names only op "
            "and revision, and the helper derives the ref"
        )
    missing = sorted(FIELDS - set(record))
    if missing:
        raise ProtocolError(f"request lacks {' and '.join(missing)}")
    return check_request(record["op"], record["revision"])


def ok_answer(ref: str, revision: str) -> dict[str, object]:
    return {"ok": True, "ref": ref, "revision": revision}


def refusal(error: str) -> dict[str, object]:
    return {"ok": False, "error": error}


def encode_answer(answer: dict[str, object]) -> bytes:
    return json.dumps(answer).encode() + b"\n"


def parse_answer(line: bytes) -> dict[str, object]:
    """An answer line as a dict with a boolean ``ok`` and its fields, or :class:`ProtocolError`."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("the helper's answer is not a JSON line") from None
    if not isinstance(record, dict) or not isinstance(record.get("ok"), bool):
        raise ProtocolError("the helper's answer is not an answer object")
    if record["ok"]:
        if not isinstance(record.get("ref"), str) or not isinstance(record.get("revision"), str):
            raise ProtocolError("the helper's answer lacks ref or revision")
    elif not isinstance(record.get("error"), str):
        raise ProtocolError("the helper's refusal lacks its error")
    return record


def _git(checkout: Path, *args: str) -> str:
    """Run git in the agent's checkout, in the agent's own environment."""

    def last_line(stderr: str) -> str:
        detail = stderr.strip().splitlines()
        return f"{detail[-1] if detail else '?'} (in {checkout})"

    argv = ["git", "-C", str(checkout), *args]
    done = run_git(argv, None, None, 600, PushError, last_line, text=True)
    return done.stdout.strip()


def make_bundle(checkout: Path, revision: str, out: Path, *, thin: bool) -> None:
    """Write a bundle of ``revision`` from ``checkout`` to ``out`` without touching the checkout.

    The bundle's one head is ``refs/heads/candidate``, made in a scratch repository that borrows
    the checkout's objects (``objects/info/alternates``). A thin bundle leaves out what the
    checkout's remote-tracking refs reach; when they reach everything, the bundle is full.
    """
    if _git(checkout, "rev-parse", "--verify", "--end-of-options", f"{revision}^{{commit}}") != (
        revision
    ):
        raise PushError(f"{revision} is not a commit in {checkout}")
    fmt = _git(checkout, "rev-parse", "--show-object-format")
    common = Path(_git(checkout, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    scratch = out.parent / "scratch.git"
    if not scratch.exists():
        _git(out.parent, "init", "--quiet", "--bare", f"--object-format={fmt}", str(scratch))
        (scratch / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    _git(scratch, "update-ref", "refs/heads/candidate", revision)
    bases = _git(checkout, "for-each-ref", "--format=%(objectname)", "refs/remotes/").split()
    out.unlink(missing_ok=True)
    if thin and bases:
        done = subprocess.run(
            ["git", "-C", str(scratch), "bundle", "create", "--quiet", str(out)]
            + ["refs/heads/candidate", "--not", *sorted(set(bases))],
            capture_output=True,
            timeout=600,
            check=False,
        )
        if done.returncode == 0:
            return
        if b"empty bundle" not in done.stderr:
            last = done.stderr.decode(errors="replace").strip().splitlines()
            raise PushError(f"git bundle create failed: {last[-1] if last else '?'}")
    _git(scratch, "bundle", "create", "--quiet", str(out), "refs/heads/candidate")


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def arm(self, sock: socket.socket) -> None:
        left = self.end - time.monotonic()
        if left <= 0:
            raise HelperTimeout(
                f"no answer from the candidate push helper within {self.seconds:g} s"
            )
        sock.settimeout(left)


def _exchange(path: str, request: Request, bundle: Path, deadline: _Deadline) -> dict[str, object]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        deadline.arm(sock)
        try:
            with sun_path(path) as short:  # a long path: through its directory
                sock.connect(short)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            raise HelperUnavailable(
                f"the candidate push helper is not running at {path}: {exc.strerror}"
            ) from None
        try:
            deadline.arm(sock)
            sock.sendall(encode_request(request))
            with bundle.open("rb") as stream:
                while chunk := stream.read(_CHUNK):
                    deadline.arm(sock)
                    sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the helper answered early; its answer is waiting
        answer = b""
        while b"\n" not in answer and len(answer) <= MAX_ANSWER_BYTES:
            deadline.arm(sock)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    except TimeoutError:
        raise HelperTimeout(
            f"no answer from the candidate push helper within {deadline.seconds:g} s"
        ) from None
    except OSError as exc:
        raise PushError(f"talking to the candidate push helper at {path} failed: {exc}") from None
    finally:
        sock.close()
    if b"\n" not in answer:
        raise PushError("the candidate push helper closed the connection without an answer")
    try:
        return parse_answer(answer.split(b"\n", 1)[0])
    except ProtocolError as exc:
        raise PushError(str(exc)) from None


def _check_size(bundle: Path) -> None:
    size = bundle.stat().st_size
    if size > MAX_BUNDLE_BYTES:
        raise PushError(f"the bundle is {size} bytes, over the helper's {MAX_BUNDLE_BYTES}")


def publish(
    socket_path: str | Path,
    op: str,
    revision: str,
    checkout: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, object]:
    """Publish ``revision`` of ``checkout`` through the helper at ``socket_path``.

    Returns the helper's answer (``ok``, ``ref``, ``revision``). Raises :class:`HelperUnavailable`
    when no helper serves the socket, :class:`HelperTimeout` when it does not answer within
    ``timeout`` seconds, :class:`Refused` with the helper's reason, and :class:`PushError` for
    anything else (a bad request, a failed bundle).
    """
    try:
        request = check_request(op, revision)
    except ProtocolError as exc:
        raise PushError(str(exc)) from None
    deadline = _Deadline(timeout)
    with tempfile.TemporaryDirectory(prefix="agentc-push-") as scratch:
        bundle = Path(scratch) / "candidate.bundle"
        make_bundle(Path(checkout), revision, bundle, thin=True)
        _check_size(bundle)
        answer = _exchange(str(socket_path), request, bundle, deadline)
        if answer["ok"] is False and str(answer["error"]).startswith(MISSING_BASE):
            make_bundle(Path(checkout), revision, bundle, thin=False)
            _check_size(bundle)
            answer = _exchange(str(socket_path), request, bundle, deadline)
    if answer["ok"] is not True:
        raise Refused(f"the candidate push helper refused: {answer['error']}")
    return answer
