"""``agentc-host update``: verified releases, a virtual environment per release, an atomic switch,
and a run that drains, checks, promotes or rolls back on its own (docs/host.md, "Updates")."""
