"""``agentc-host``: a supervised host from one command (``setup``), its containment suite
(``check``) and a verified updater that rolls back on its own (``update``); docs/host.md."""
