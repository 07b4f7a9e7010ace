"""``agentc-push``: the candidate push helper of one implementer launch (docs/push.md).

A sandboxed implementer holds no push credential. It hands its commit, as a git bundle, to this
helper over a Unix socket; the helper serves only processes of its own launch, derives the ref
itself, refuses content carrying a known token or a private key, and pushes create-only to the
remote with a credential only it holds.

Modules: :mod:`~agentc.push.protocol` (wire shapes and the client, the standard library only
but for :mod:`agentc.files.sockets`),
:mod:`~agentc.push.peer` (who is connecting), :mod:`~agentc.push.refs`, :mod:`~agentc.push.scan`,
:mod:`~agentc.push.repo` (git), :mod:`~agentc.push.publisher` (one request's decision),
:mod:`~agentc.push.server` (the socket), :mod:`~agentc.push.cli` and
:mod:`~agentc.push.helper` (starting one launch's helper: its directory, its process, its
record of pushes; the supervisor's loop and ``agentc-host check`` start it so). The package
imports only :mod:`agentc.core` and :mod:`agentc.files` of the rest of agentc.
"""
