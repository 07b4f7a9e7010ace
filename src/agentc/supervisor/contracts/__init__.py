"""The contracts a launch is given: the implementer's and the reviewer's prompt.

Each contract is a Markdown template in this package (``implementer.md``, ``reviewer.md``, at
most 1,500 words) whose ``{{placeholders}}`` are all filled; the task's text and the repository's
instruction files (``AGENTS.md``, ``CONTRIBUTING.md``) follow it as quoted data whose closing tags
are defused, so data can never close its own quote and speak as the contract.
"""

from agentc.supervisor.contracts.render import (
    INSTRUCTION_FILES,
    MAX_CONTRACT_WORDS,
    MAX_INSTRUCTION_BYTES,
    ContractError,
    implementer_prompt,
    quote_data,
    reviewer_prompt,
)

__all__ = [
    "INSTRUCTION_FILES",
    "MAX_CONTRACT_WORDS",
    "MAX_INSTRUCTION_BYTES",
    "ContractError",
    "implementer_prompt",
    "quote_data",
    "reviewer_prompt",
]
