"""composer.config.register: your own classes join a kind's registry, with errors that name the kind, the class and the
fix; the registry view (``composer list``, the first recipe check) shows them."""

from __future__ import annotations

import pytest

from composer.config import REGISTRIES, ConfigError, load_recipe, register
from composer.config.manifest import load_manifest
from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.hparams import Hparams, hparams
from tests.cli.recipes import write_recipe

pytestmark = pytest.mark.usefixtures("registries_restored")


class Louder(Algorithm):
    """Turns it up.

    Args:
        gain: How much, in decibels.
        label: What to call it.
    """

    def __init__(self, gain: float, label: str = "loud"):
        self.gain, self.label = gain, label

    def match(self, event, state):
        return False

    def apply(self, event, state, logger):
        pass


@hparams
class QuietHparams(Hparams):
    """A callback's config, written out."""

    level: int = 1

    def initialize_object(self) -> Callback:
        return Callback()


def test_a_class_is_registered_with_a_config_derived_from_its_constructor(tmp_path):
    config = register("algorithms", "louder", Louder)
    assert REGISTRIES["algorithms"]["louder"] is config and register("algorithms", "louder", Louder) is config
    built = config.from_dict({"gain": 2}).initialize_object()
    assert isinstance(built, Louder) and (built.gain, built.label) == (2.0, "loud")
    entry = load_manifest()["algorithms"]["louder"]
    assert (entry["class"], entry["config"], entry["origin"], entry["summary"]) == (
        "Louder",
        "LouderHparams",
        "registered",
        "Turns it up.",
    )
    assert entry["fields"] == {
        "gain": {"required": True, "type": "float", "default": None, "doc": "How much, in decibels."},
        "label": {"required": False, "type": "str", "default": "'loud'", "doc": "What to call it."},
    }
    recipe = write_recipe(tmp_path, extra="algorithms: {louder: {gain: 3}}\n")
    assert load_recipe(recipe).algorithms["louder"].gain == 3.0
    with pytest.raises(ConfigError, match=r"algorithms.louder: LouderHparams got unknown key\(s\) \['gian'\]"):
        load_recipe(recipe, ["algorithms.louder.gian=1"])
    with pytest.raises(ConfigError, match="algorithms.loudr: unknown algorithm 'loudr'. Did you mean 'louder'?"):
        load_recipe(recipe, ["algorithms.loudr.gain=1"])


def test_a_config_class_is_registered_as_it_is():
    assert register("callbacks", "quiet", QuietHparams) is QuietHparams
    assert load_manifest()["callbacks"]["quiet"]["fields"]["level"]["default"] == "1"


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (("algorithm", "x", Louder), ValueError, "register: unknown kind 'algorithm'. Did you mean 'algorithms'?"),
        (("algorithms", "my-method", Louder), ValueError, "a name is letters, digits and underscores"),
        (("algorithms", "mixup", Louder), ValueError, "'mixup' already names a built-in algorithm (MixUpHparams)"),
        (
            ("callbacks", "louder", Louder),
            TypeError,
            "register('callbacks', 'louder', Louder): a registered callback must be a subclass of "
            "composer.core.callback.Callback or a subclass of composer.core.hparams.Hparams (its config); Louder is "
            "not. Subclass Callback and register that class.",
        ),
        (("models", "louder", Louder), TypeError, "a registered model must be a subclass of composer.config.models"),
    ],
)
def test_a_wrong_registration_says_what_to_do(arguments, error, message):
    with pytest.raises(error) as raised:
        register(*arguments)
    assert message in str(raised.value)
