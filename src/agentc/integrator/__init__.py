"""``agentc-integrator``: lands approved code submissions (docs/integrator.md)."""
