"""Text planted for the agents that will read it later (pure): hidden characters and lines that
address an AI agent.

A change that lands is read by every later agent working in the repository, so it can carry
instructions to them: in a comment or a document ("Note to AI agents: ..."), or hidden from
the person who reviews it (bidirectional controls that reorder what is shown, tag characters
that render as nothing but spell ASCII, zero-width characters). The integrator looks for both
in what a change adds before it lands (docs/integrator.md, "The pre-landing scan").

- :func:`hidden_characters`: every character of :data:`HIDDEN_RANGES` (a terminal escape, C1
  controls, bidirectional controls, tag characters, zero-width and filler characters, variation
  selectors), and every other format character (Unicode category ``Cf``) but the two joiners
  that scripts and emoji need (U+200C, U+200D); a byte order mark is allowed as a file's first
  character, U+FE0F after a pictograph (an emoji's presentation form).
- :func:`addressed_to_agents`: the first of :data:`RULES` a line matches, after NFKC
  normalization (so look-alike letters match) with every run of whitespace made one space.
  Each rule names an AI agent, or a chat template's role marker, so ordinary prose about agents
  or instructions does not match; a project whose own files address agents (prompt templates)
  holds such findings for a person instead (docs/integrator.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

HIDDEN_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x001B, 0x001B, "a terminal escape"),
    (0x0080, 0x009F, "a C1 control"),
    (0x00AD, 0x00AD, "a soft hyphen"),
    (0x061C, 0x061C, "a bidirectional control"),
    (0x115F, 0x1160, "a Hangul filler"),
    (0x180E, 0x180E, "an invisible separator"),
    (0x200B, 0x200B, "a zero-width space"),
    (0x200E, 0x200F, "a bidirectional control"),
    (0x202A, 0x202E, "a bidirectional control"),
    (0x2060, 0x2064, "an invisible operator"),
    (0x2066, 0x2069, "a bidirectional control"),
    (0x3164, 0x3164, "a Hangul filler"),
    (0xFE00, 0xFE0F, "a variation selector"),
    (0xFEFF, 0xFEFF, "a zero-width no-break space"),
    (0xFFA0, 0xFFA0, "a Hangul filler"),
    (0xE0000, 0xE007F, "a tag character"),
    (0xE0100, 0xE01EF, "a variation selector"),
)
JOINERS = frozenset("\u200c\u200d")
BOM = "\ufeff"
_EMOJI_PRESENTATION = "\ufe0f"  # after a pictograph, legitimate (the emoji form)

_AGENT = (
    r"(?:ai|a\.i\.|llms?|large language models?|language models?|(?:ai |coding |autonomous )?"
    r"agents?|(?:ai |coding )?assistants?|copilot|claude|codex|chatgpt|gpt(?:-?\d[\w.]*)?|"
    r"gemini|cursor|devin)"
)
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "an instruction to ignore earlier instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}\b(?:previous|prior|above|"
            r"earlier|all|any|your|system|original)\b.{0,30}\b(?:instructions?|prompts?|rules|"
            r"guidelines|directions|directives)\b"
        ),
    ),
    (
        "a note addressed to AI agents",
        re.compile(
            r"\b(?:note|notes|message|instructions?|attention|reminder|directive|warning|"
            r"important|hint)\s*(?:to|for)\s+(?:the |any |all |every |future |other )*"
            + _AGENT
            + r"\b"
        ),
    ),
    (
        "a greeting to an AI agent",
        re.compile(r"\b(?:dear|hey|hello|hi|attention)\s*,?\s+" + _AGENT + r"\b"),
    ),
    (
        "a condition on being an AI agent",
        re.compile(r"\bif (?:you are|you're) (?:an? |the )?" + _AGENT + r"\b"),
    ),
    (
        "an order to AI agents",
        re.compile(
            r"\b(?:ai|llm|language model|coding)s? (?:agents?|assistants?|models?)(?: reading "
            r"this| that reads? this| working (?:on|in) this)?,? (?:must|should|shall|need to|"
            r"are (?:required|instructed|told)|will|always|never|do not|don't)\b"
        ),
    ),
    (
        "a chat template's role marker",
        re.compile(
            r"<\|(?:im_start|im_end|system|endoftext)\|>|\[/?inst\]|<</?sys>>|"
            r"</?(?:system|system-prompt|instructions)>"
        ),
    ),
)


_UNUSUAL = re.compile(r"[^\t\n\r\x20-\x7e]")


def _hidden_kind(ch: str) -> str | None:
    point = ord(ch)
    for low, high, kind in HIDDEN_RANGES:
        if low <= point <= high:
            return kind
    if ch not in JOINERS and unicodedata.category(ch) == "Cf":
        return "a format character"
    return None


def hidden_characters(text: str, *, file_start: bool = False) -> Iterator[tuple[int, str]]:
    """``(index, description)`` of each hidden character of ``text``, described as
    ``U+202E RIGHT-TO-LEFT OVERRIDE (a bidirectional control)``. ``file_start``: ``text``
    starts a file, where a byte order mark is allowed. U+FE0F after a pictograph (an emoji's
    presentation form) is allowed."""
    for found in _UNUSUAL.finditer(text):  # printable ASCII hides nothing: skipped at C speed
        index, ch = found.start(), found.group()
        kind = _hidden_kind(ch)
        if kind is None or (ch == BOM and file_start and index == 0):
            continue
        if ch == _EMOJI_PRESENTATION and index and unicodedata.category(text[index - 1]) == "So":
            continue
        name = unicodedata.name(ch, "UNNAMED")
        yield index, f"U+{ord(ch):04X} {name} ({kind})"


def normalized(line: str) -> str:
    """What the rules read: NFKC (look-alikes folded), lower case, whitespace runs as one
    space, hidden characters removed (so none can split a word)."""
    folded = unicodedata.normalize("NFKC", line).casefold()
    visible = "".join(ch for ch in folded if _hidden_kind(ch) is None)
    return " ".join(visible.split())


def addressed_to_agents(line: str) -> str | None:
    """The rule ``line`` matches (what it looks like), or None."""
    text = normalized(line)
    if len(text) < 4:
        return None
    for name, pattern in RULES:
        if pattern.search(text):
            return name
    return None
