"""The composition rules: which pairs are refused, where (Trainer constructor, recipe check), and that reading them
imports no torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from composer.algorithms import ALGORITHM_CLASS_NAMES, ALGORITHMS, EMA, SWA, MixUp
from composer.algorithms.composition import REFUSED_PAIRS, check_composition, composition_problems
from composer.core import Callback
from composer.trainer import Trainer
from tests.common import SimpleModel, make_dataloader


def test_class_names_match_the_registry():
    assert {name: cls.__name__ for name, cls in ALGORITHMS.items()} == ALGORITHM_CLASS_NAMES
    for pair in REFUSED_PAIRS:
        assert pair <= set(ALGORITHM_CLASS_NAMES.values()), f"{sorted(pair)} are not registered class names"


def test_reading_the_rules_imports_no_torch():
    code = (
        "import sys\n"
        "from composer.algorithms.composition import composition_problems\n"
        "problems = composition_problems(['swa', 'label_smoothing', 'ema'])\n"
        "print(len(problems), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "False"]


@pytest.mark.parametrize("names", [["ema", "swa"], ["swa", "ema"], ["EMA", "mixup", "SWA"]])
def test_refused_pair_is_named_with_the_reason(names):
    (problem,) = composition_problems(names)
    assert problem.startswith("EMA and SWA do not compose: both average the weights")


def test_a_composing_list_has_no_problems():
    assert composition_problems(list(ALGORITHM_CLASS_NAMES)[:10]) == []
    assert composition_problems(["label_smoothing", "mixup", "cutmix"]) == []


def test_a_subclass_counts_as_its_registered_method():
    class MyEMA(EMA):
        pass

    with pytest.raises(ValueError, match=r"algorithms=\[MyEMA, SWA\]: EMA and SWA do not compose"):
        check_composition([MyEMA(half_life="2ba"), SWA()])
    check_composition([MyEMA(half_life="2ba"), MixUp(alpha=0.2)])


class _InitRecorder(Callback):
    def __init__(self) -> None:
        self.inits = 0

    def init(self, state, logger) -> None:
        self.inits += 1


@pytest.mark.parametrize("order", [(EMA, SWA), (SWA, EMA)])
def test_trainer_refuses_before_anything_starts(order):
    recorder = _InitRecorder()
    algorithms = [cls(half_life="2ba") if cls is EMA else cls() for cls in order]
    with pytest.raises(ValueError, match="EMA and SWA do not compose") as info:
        Trainer(
            model=SimpleModel(),
            train_dataloader=make_dataloader(num_samples=8, seed=0),
            max_duration="2ba",
            algorithms=algorithms,
            callbacks=[recorder],
            progress_bar=False,
        )
    assert f"algorithms=[{order[0].__name__}, {order[1].__name__}]" in str(info.value)
    assert recorder.inits == 0  # refused in the constructor's checks, before INIT
