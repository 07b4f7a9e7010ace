"""The session-id precedence ladder.

1. mock (file, then ``AGENTNS_SESSION_ID_OVERRIDE``)           -> ``mock``
2. ``--no-unshare``                                             -> ``no-unshare``
3. no ``/proc/self/agent_session`` (stock kernel, fast path)    -> ``synth-fallback`` + warning
4. ``assay agentns --json`` not ``Live``                        -> ``synth-fallback`` + warning
5. ``prctl(PR_SET_AGENT_NS)`` ok, intent set, id read back      -> ``prctl``
6. create fails ENOSYS/EINVAL                                   -> ``synth-fallback`` + warning
7. create fails EPERM                                           -> fatal (CAP_SYS_ADMIN)
8. any other create error, or a bad read-back                   -> fatal

Where the original code and its README disagree, the README (the seed) wins: a stock kernel
without ``--no-unshare`` synthesizes and warns instead of refusing.

:func:`establish` is the in-process form, and the only one: ``agentns-claude`` calls it before
it execs its command, and a supervisor calls it in its own process instead of exec'ing itself
under the launcher. Either way a kernel session (``prctl``) is made for the calling process
and inherited by every child it starts afterwards.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import agentc.agentns.kernel as kernel
from agentc.agentns.errors import KernelError, PermissionDenied, UsageError
from agentc.agentns.launch import (
    DEFAULT_MOCK_FILE,
    ENV_MOCK_FILE,
    ENV_SESSION_ID_OVERRIDE,
    MODE_MOCK,
    MODE_NO_UNSHARE,
    MODE_PRCTL,
    MODE_SYNTH_FALLBACK,
    PREFIX,
    SessionRecord,
)

Say = Callable[[str], None]

EPERM_MESSAGE = (
    "prctl(PR_SET_AGENT_NS) requires CAP_SYS_ADMIN in the user namespace. Re-run as root or "
    "with a privileged user namespace, or use --no-unshare."
)
MSG_NO_UNSHARE = "no-unshare: stock kernel, session_id synthesized"
MSG_STOCK = "WARNING: kernel does not support agent namespaces; synthesizing session id"
MSG_ASSAY = "WARN: assay agentns not Live; agentns unavailable, synthesizing session id"
MSG_UNSUPPORTED = (
    "WARNING: agent_session present but prctl(PR_SET_AGENT_NS) returned EINVAL/ENOSYS; "
    "falling back to synthesized id"
)


@dataclass(frozen=True)
class Resolution:
    """The resolved session: its id and how it was obtained (``AGENTNS_MODE``)."""

    session_id: str
    mode: str


def mock_session_id(env: Mapping[str, str]) -> str | None:
    """The mock id: the mock file's trimmed content wins over the override variable."""
    path = env.get(ENV_MOCK_FILE) or DEFAULT_MOCK_FILE
    try:
        # Only a regular file counts: a directory or fifo at that path is not a deliberate mock.
        if stat.S_ISREG(os.stat(path).st_mode):
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                content = f.read().strip()
            if content:
                if "\0" in content:
                    raise UsageError(f"mock session id in {path} contains a NUL byte")
                return content
    except OSError:
        pass  # absent or unreadable: fall through to the variable
    override = env.get(ENV_SESSION_ID_OVERRIDE)
    return override or None


def resolve_session(
    intent: str, *, no_unshare: bool, env: Mapping[str, str], say: Say
) -> Resolution:
    """Walk the ladder; ``say`` receives each stderr line (without the prefix)."""
    mock = mock_session_id(env)
    if mock is not None:
        say(f"MOCK MODE: session_id={mock}")
        return Resolution(mock, MODE_MOCK)
    if no_unshare:
        sid = kernel.synthesize_session_id()
        say(MSG_NO_UNSHARE)
        return Resolution(sid, MODE_NO_UNSHARE)
    path = kernel.session_path(env)
    if not os.path.exists(path):
        # Stock kernel: no procfs entry, so neither assay nor the prctl can succeed.
        say(MSG_STOCK)
        return Resolution(kernel.synthesize_session_id(), MODE_SYNTH_FALLBACK)
    if kernel.assay_verdict(env) != "Live":
        # A booted-but-broken kernel is caught here rather than half-way through the syscall.
        say(MSG_ASSAY)
        return Resolution(kernel.synthesize_session_id(), MODE_SYNTH_FALLBACK)
    err = kernel.create_agent_ns(env)
    if err in (errno.ENOSYS, errno.EINVAL):
        say(MSG_UNSUPPORTED)
        return Resolution(kernel.synthesize_session_id(), MODE_SYNTH_FALLBACK)
    if err == errno.EPERM:
        raise PermissionDenied(EPERM_MESSAGE)
    if err:
        raise KernelError(f"prctl(PR_SET_AGENT_NS) failed: {os.strerror(err)} (os error {err})")
    ierr = kernel.set_intent(intent, env)
    if ierr:
        # Best effort, as in the original: the namespace exists, only its label is missing.
        say(f"WARNING: prctl(PR_SET_AGENT_INTENT_TAG) failed: {os.strerror(ierr)}; continuing")
    # A zero or malformed id after a successful create is fatal: never ship a fake-looking id.
    return Resolution(kernel.read_session_id(path), MODE_PRCTL)


def validate_intent(intent: str) -> str:
    """``intent`` if it is a usable tag; :class:`UsageError` for an empty or blank one."""
    if not intent.strip():
        raise UsageError("--intent must be a non-empty tag")
    return intent


def say_stderr(line: str) -> None:
    """The launcher's stderr voice: ``[agentns-claude] <line>``."""
    sys.stderr.write(PREFIX + line + "\n")
    sys.stderr.flush()


def establish(
    intent: str,
    *,
    no_unshare: bool = False,
    verbose: bool = False,
    env: Mapping[str, str] | None = None,
    say: Say | None = None,
) -> SessionRecord:
    """Put the calling process into an agent session for ``intent``; return its record.

    The ladder ``agentns-claude`` runs (module docstring), here and now: the mock file or
    override, ``no_unshare``, the stock-kernel and assay checks, then ``prctl`` with its errno
    handling; a stock kernel gets a synthesized id and one warning line. ``env`` (default
    ``os.environ``) holds the mock inputs and test seams; ``say`` (default: stderr, with the
    launcher's prefix) receives the warnings and, with ``verbose``, the resolved session.
    Sets no variables: exporting ``AGENTNS_*`` to children is the caller's choice. Raises
    :class:`~agentc.agentns.errors.AgentnsError` (``PermissionDenied`` on EPERM); a failed
    prctl leaves the process as it was.
    """
    validate_intent(intent)
    out = say_stderr if say is None else say
    res = resolve_session(
        intent, no_unshare=no_unshare, env=os.environ if env is None else env, say=out
    )
    if verbose:
        out(f"mode={res.mode} session_id={res.session_id} intent={intent}")
    return SessionRecord(session_id=res.session_id, mode=res.mode, intent=intent, pid=os.getpid())
