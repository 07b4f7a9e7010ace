"""The work model's operations: the rules and flow of projects, tasks, leases, submissions,
reviews, accounts and telemetry, each over one transaction's `Op`. They read and write through
`agentc.store` and answer with API objects built in `views`; refusals come from `refusals`.
"""
