"""Tests of agentc up and agentc status."""
