"""The digits and text recipes take the four monitors of issue 21 by their registry names."""

from pathlib import Path

import pytest

from composer.config import load_recipe
from composer.loggers import InMemoryLogger
from tests.recipes.test_recipes import _PORTABLE, _two_batches

pytest.importorskip("psutil", reason="the loggers extra is not installed (pip install -e '.[loggers]')")

MONITORS = [
    "callbacks.optimizer_monitor.log_interval=1ba",
    "callbacks.activation_monitor.interval=1ba",
    "callbacks.activation_monitor.module_types=[Linear]",
    "callbacks.runtime_estimator.skip_batches=0",
    "callbacks.system_metrics_monitor.log_interval=1ba",
]


# The GPT's two batches take seconds on a CPU: the text recipe runs with the slow tests.
@pytest.mark.parametrize("recipe", ["digits_baseline", pytest.param("gpt_baseline", marks=pytest.mark.slow)])
def test_a_recipe_runs_with_the_monitors(recipe):
    path = Path(__file__).parents[2] / "recipes" / f"{recipe}.yaml"
    config = _two_batches(load_recipe(path, [*_PORTABLE, *MONITORS]))
    trainer = config.initialize_object()
    memory = InMemoryLogger()
    trainer.logger.destinations.append(memory)
    trainer.fit()
    trainer.close()
    assert memory.steps("l2_norm/update/global") == [1, 2]
    assert memory.steps("time/eta") == [0, 1]
    assert memory.steps("system/memory_percent") == [1, 2]
    activations = [key for key in memory.data if key.startswith("activations/max/")]
    assert activations and all(memory.steps(key) == [0, 1] for key in activations)
