"""The agent side of the coordinator: the `agent-coordinator` CLI and the MCP adapter.

The client reaches the coordinator only over HTTP (`transport`); it never imports the service or
the store. `config` finds the binding, credentials and state; `state` is the session file;
`journal` sends every mutation through the journal; `ops` is the workflow both front ends share,
built from its families (`sessions`, `leases`, `submissions`, `reviews`); `errors` holds the
errors, exit codes and the one error report; `cli` and `mcp_adapter` are the front ends;
`worktree` is the local git side.
"""
