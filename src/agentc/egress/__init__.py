"""The relays and the egress proxy: how a launch, alone in its network namespace, reaches the
few host services it may use.

:mod:`~agentc.egress.addresses` holds the pure address rules (loopback `a.b.c.d:port`,
`unix:/path` targets, service URLs) that ``supervisor.toml``, the relay and the egress proxy all
apply; :mod:`~agentc.egress.host_relay` and :mod:`~agentc.egress.netns_relay` are
the relay's two halves; :mod:`~agentc.egress.egress` is the allowlisting CONNECT proxy;
:mod:`~agentc.egress.pipe` is the byte pump they share. Only ``addresses`` is on the
launch's lean import path (no asyncio, no click); import each module directly.
"""
