"""``agentc up``: the whole system on one machine for one user, in one command.

It creates a state directory (a SQLite coordinator, an admin, agent credentials for the
implementer, reviewer and integrator roles, a project bound to a git repository with a local
bare remote), then runs the coordinator, the supervisor loop in personal mode and the
integrator as one process tree (docs/getting-started.md). It reaches the coordinator over HTTP
like every other program; the only host-side step is creating the first admin with the
server's own ``init-admin`` command.
"""
