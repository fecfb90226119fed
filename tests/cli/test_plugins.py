"""Your own classes in recipes, for real: an installed plugin's entry points and ``composer --import`` in a fresh
``composer`` process; a recipe alone never imports a module.

The plugin is a package in a temporary folder with a ``*.dist-info/entry_points.txt`` beside it, put on PYTHONPATH
(what ``pip install`` leaves in site-packages, without installing anything).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.recipes import write_recipe

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
"""A plugin with one algorithm."""

from composer.core.algorithm import Algorithm
from composer.core.event import Event


class Shout(Algorithm):
    """Counts the batches it sees, loudly.

    Args:
        volume: How loud, from 1 up.
    """

    def __init__(self, volume: int = 3):
        if volume < 1:
            raise ValueError(f"Shout(volume={volume!r}): volume must be >= 1; pass 1 for a whisper.")
        self.volume = volume
        self.batches = 0

    def match(self, event, state):
        return event == Event.AFTER_DATALOADER

    def apply(self, event, state, logger):
        self.batches += 1
        print(f"shout {self.volume} at batch {self.batches}")
'''

MODULE = '''
"""A module of the user's, which registers a callback when imported (composer --import my_callbacks)."""

from composer.config import register
from composer.core.callback import Callback


class Bell(Callback):
    """Rings at the end of fit.

    Args:
        sound: What it says.
    """

    def __init__(self, sound: str = "ding"):
        self.sound = sound

    def fit_end(self, state, logger):
        print(f"bell: {self.sound}")


register("callbacks", "bell", Bell)
'''

# A module whose import would show: a recipe naming it must not import it.
TRAP = 'from pathlib import Path\nPath(__file__).with_name("imported").write_text("yes")\n\ndef run():\n    pass\n'


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with the plugin installed as pip would leave it, the user's module and the trap."""
    site = tmp_path / "site"
    (site / "tiny_plugin").mkdir(parents=True)
    (site / "tiny_plugin" / "__init__.py").write_text(PLUGIN)
    info = site / "tiny_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[opencomposer.algorithms]\nshout = tiny_plugin:Shout\n")
    (tmp_path / "my_callbacks.py").write_text(MODULE)  # in the working directory, as --import finds it
    (site / "trap.py").write_text(TRAP)
    return site


def _composer(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "XDG_CACHE_HOME": str(site.parent / "cache"),
    }
    command = [sys.executable, "-m", "composer.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, cwd=site.parent, env=env)


def test_an_installed_plugin_and_an_imported_module_are_named_by_a_recipe(site):
    listed = _composer(site, "list", "algorithms", "shout")
    assert listed.returncode == 0, listed.stderr
    assert "algorithms.shout: Shout (config ShoutHparams, tiny_plugin)" in listed.stdout
    assert "volume  int   3        How loud, from 1 up." in listed.stdout
    recipe = write_recipe(site.parent, extra="algorithms: {shout: {volume: 5}}\ncallbacks: {bell: {sound: dong}}\n")
    trained = _composer(site, "--import", "my_callbacks", "train", "-f", str(recipe))
    assert trained.returncode == 0, trained.stderr
    assert "shout 5 at batch 2" in trained.stdout and "bell: dong" in trained.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "algorithms.shout.volum=5",
            "algorithms.shout: ShoutHparams got unknown key(s) ['volum']; the valid keys are ",
        ),
        ("algorithms.shoot.volume=5", "algorithms.shoot: unknown algorithm 'shoot'. Did you mean 'shout'?"),
        ("algorithms.shout.volume=loud", "algorithms.shout: Invalid ShoutHparams: field 'volume' received 'loud'"),
        ("algorithms.shout.volume=0", "algorithms.shout: Invalid ShoutHparams: Shout(volume=0): volume must be >= 1;"),
    ],
)
def test_a_plugin_entry_is_checked_as_a_built_in_is(site, override, message):
    recipe = write_recipe(site.parent)
    done = _composer(site, "train", "-f", str(recipe), override)
    assert done.returncode == 2 and done.stderr.startswith(f"composer train: error: {message}"), done.stderr


@pytest.mark.parametrize(
    "override",
    ["algorithms.os:system={}", "model=trap:run", "callbacks.trap:run={}", "algorithms.no_such_module:Thing={}"],
)
def test_a_recipe_never_imports_a_module(site, override):
    done = _composer(site, "train", "-f", str(write_recipe(site.parent)), override)
    assert done.returncode == 2 and "unknown" in done.stderr, done.stderr
    assert not (site / "imported").exists()


def test_an_import_that_is_not_there_is_refused(site):
    done = _composer(site, "--import", "my_calbacks", "list")
    assert done.returncode == 2
    assert done.stderr.startswith("composer list: error: --import my_calbacks: no module named 'my_calbacks'")


def test_a_plugin_that_is_no_algorithm_is_refused_naming_its_entry_point(site):
    info = site / "tiny_plugin-0.1.dist-info" / "entry_points.txt"
    info.write_text(textwrap.dedent("[opencomposer.algorithms]\nshout = tiny_plugin:Shout\nloud = os:getcwd\n"))
    done = _composer(site, "train", "-f", str(write_recipe(site.parent)))
    assert done.returncode == 2
    assert "entry point loud = os:getcwd (tiny-plugin): register('algorithms', 'loud', " in done.stderr
    assert "must be a subclass of composer.core.algorithm.Algorithm" in done.stderr
