"""agentc-attention: paging, the digest by mail, the end-to-end canary and their timers
(docs/attention.md). It reaches the coordinator only over HTTP through ``agentc.client``."""
