"""The supervisor's network plumbing: how a launch, alone in its network namespace, reaches the
few host services it may use.

:mod:`~agentc.supervisor.net.addresses` holds the pure address rules (loopback `a.b.c.d:port`,
`unix:/path` targets, service URLs) that ``supervisor.toml``, the relay and the egress proxy all
apply; :mod:`~agentc.supervisor.net.host_relay` and :mod:`~agentc.supervisor.net.netns_relay` are
the relay's two halves; :mod:`~agentc.supervisor.net.egress` is the allowlisting CONNECT proxy;
:mod:`~agentc.supervisor.net.pipe` is the byte pump they share. Only ``addresses`` is on the
launch's lean import path (no asyncio, no click); import each module directly.
"""
