"""The supervisor loop (``agentc-supervisor run``): polls, claims, launches, renews, settles.

:mod:`.gates` holds its pure decisions (whether a running launch's lease is renewed or the launch
drained, the renewal back-off, whether this host may claim now and through which vendor), so
they are written once and tested without a coordinator or a sandbox.
"""
