"""The method cards (composer/algorithms/*/README.md) speak the reader's words."""

from __future__ import annotations

import re
from pathlib import Path

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
