"""The docs site's griffe extension turns Sphinx roles into cross-references (docs/hooks/docstrings.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

_HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "docstrings.py"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docstring_hook", _HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            ":class:`~composer.core.Time`",
            '<autoref identifier="composer.core.Time" optional><code>Time</code></autoref>',
        ),
        (":func:`compile`", '<autoref identifier="composer.x.compile" optional><code>compile</code></autoref>'),
        (
            ":attr:`State.lists_version <composer.core.state.State.lists_version>`",
            '<autoref identifier="composer.core.state.State.lists_version" optional>'
            "<code>State.lists_version</code></autoref>",
        ),
        (
            ":meth:`fit <composer.Trainer.fit()>`",
            '<autoref identifier="composer.Trainer.fit" optional><code>fit</code></autoref>',
        ),
        (":class:`torch.nn.Module`", "`torch.nn.Module`"),
        (":math:`x^2`", "*x^2*"),
        (":math:`t \\times s`", "*t \u00d7 s*"),
        # An RST link, even across lines, is a link a reader can click, not code.
        (
            "Introduced in `RandAugment: Practical automated\n    data augmentation <https://arxiv.org/abs/1909.13719>`_ (Cubuk)",
            "Introduced in [RandAugment: Practical automated data augmentation](https://arxiv.org/abs/1909.13719) (Cubuk)",
        ),
    ],
)
def test_roles_become_references_to_the_named_object(hook: ModuleType, text: str, expected: str) -> None:
    assert hook._convert(text, "composer.x") == expected
