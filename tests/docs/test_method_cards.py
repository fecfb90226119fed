"""The method cards (composer/algorithms/*/README.md) speak the reader's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ALGORITHMS = Path(__file__).resolve().parents[2] / "composer" / "algorithms"

# "the seed" meant the original Composer API's documentation, a word users do not know; a random seed is still
# called so ("the seed noise", "seed-to-seed", "the layer's random seed").
_SEED_AS_API = re.compile(r"\bthe seed\b(?!(?: noise|-to-seed))|\bseed (?:API|pages?)\b", re.I)


def test_no_card_calls_the_original_composer_api_the_seed():
    cards = sorted(ALGORITHMS.glob("*/README.md"))
    assert len(cards) > 20
    found = [
        f"{card.parent.name}/README.md:{number}: {line.strip()}"
        for card in cards
        for number, line in enumerate(card.read_text().splitlines(), 1)
        if _SEED_AS_API.search(line)
    ]
    assert not found, "say 'the original Composer API' or 'this signature' instead:\n" + "\n".join(found)


# Every card's sections, in this order: the layout the speed-up guide promises (guides/speedup-methods.md). A card's
# own topics are `###` subsections of one of these.
SECTIONS = ["TL;DR", "How to use", "Implementation details", "When it helps", "Measured cost and effect", "Reference"]
# A command that measures something: a benchmark script, or the main job (scripts/train, composer compare).
_COMMAND = re.compile(
    r"`(?:\.venv/bin/python )?((?:benchmarks|scripts)/[\w/]+\.py|bash scripts/\w+|composer \w+)[^`]*`"
)


def _sections(text: str) -> dict[str, str]:
    """The card's `##` sections (outside code blocks), heading -> body, in order."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    fenced = False
    for line in text.splitlines()[1:]:
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        else:
            current.append(line)
    return {heading: "\n".join(body).strip() for heading, body in sections.items()}


@pytest.mark.parametrize("card", sorted(ALGORITHMS.glob("*/README.md")), ids=lambda card: card.parent.name)
def test_every_card_has_the_one_layout(card):
    text = card.read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith("Tags: "), "a title, then a 'Tags: ...' line"
    sections = _sections(text)
    assert list(sections) == SECTIONS, f"sections {list(sections)}, expected {SECTIONS}"
    assert all(sections.values()), [heading for heading, body in sections.items() if not body]
    # The measurement names the command that measured it, and that command exists.
    commands = _COMMAND.findall(sections["Measured cost and effect"])
    assert commands, "'Measured cost and effect' quotes no command (`.venv/bin/python benchmarks/...`)"
    for command in commands:
        path = command.split()[-1] if command.startswith("bash") else command
        assert command.startswith("composer") or (ALGORITHMS.parents[1] / path).is_file(), command
