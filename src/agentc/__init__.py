"""agentc: the Agent Coordinator."""

__version__ = "0.1.0"
