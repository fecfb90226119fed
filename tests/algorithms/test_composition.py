"""Issue 15: every ordered pair of registered methods trains together, or the Trainer refuses it and says why.

Each run (see ``composition_settings.py``) passes if either

* ``fit()`` returned after at least 2 optimizer steps, every batch's loss is finite, and the Engine's traces show that
  both methods' ``apply`` ran; or
* the Trainer's constructor raised a ValueError that names both methods, for a pair in ``EXPECTED_REFUSALS`` (today
  only EMA with SWA: both replace the weights with their average at the end).

The matrices grow with ``composer.algorithms.ALGORITHMS``. While each fits in :data:`CI_MAX_RUNS` runs (25-60 ms a run
on one CPU thread) the suite runs it whole; beyond that, a sample of that size drawn with a fixed seed, and
``scripts/composition_matrix.py`` runs the whole matrices.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import torch

from composer.algorithms import ALGORITHMS, SelectiveBackprop
from tests.algorithms.composition_settings import (
    EXCLUDED,
    EXPECTED_REFUSALS,
    IMAGE,
    LANGUAGE,
    OPTIMIZATION,
    SETTINGS,
    MethodSetting,
    Outcome,
    Run,
    image_runs,
    language_runs,
    problem,
    run_pair,
    single_threaded,
)

CI_MAX_RUNS = 1200
"""The most runs the suite makes of each matrix. Today's 1152 runs of both take 30-80 s on 2 cores (CI allows 3 min)."""

_SAMPLE_SEED = 15


def _in_budget(runs: list[Run]) -> list[Run]:
    """All of ``runs`` if they fit in :data:`CI_MAX_RUNS`, else a sample of that size drawn with a fixed seed."""
    if len(runs) <= CI_MAX_RUNS:
        return runs
    picked = torch.randperm(len(runs), generator=torch.Generator().manual_seed(_SAMPLE_SEED))[:CI_MAX_RUNS]
    return [runs[i] for i in sorted(picked.tolist())]


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    with single_threaded():
        yield


def test_every_registered_method_has_a_composition_setting():
    missing = sorted(set(ALGORITHMS) - set(SETTINGS) - set(EXCLUDED))
    assert not missing, (
        f"registered methods with no entry in tests/algorithms/composition_settings.py SETTINGS: {missing}. Add one "
        "per method (its kind and a factory whose settings make it fire within a 2-batch run), so that the "
        "composition matrices cover it."
    )
    both = sorted(set(SETTINGS) & set(EXCLUDED))
    assert not both, f"methods both in SETTINGS and EXCLUDED: {both}"
    assert all(reason.strip() for reason in EXCLUDED.values()), "each EXCLUDED method needs its reason"
    assert set(EXCLUDED) <= set(ALGORITHMS), (
        f"EXCLUDED names unregistered methods: {sorted(set(EXCLUDED) - set(ALGORITHMS))}"
    )
    unknown = sorted(set(SETTINGS) - set(ALGORITHMS))
    assert not unknown, f"composition_settings.py SETTINGS has entries for names not in ALGORITHMS: {unknown}"
    odd = {
        name: setting.kind for name, setting in SETTINGS.items() if setting.kind not in (IMAGE, OPTIMIZATION, LANGUAGE)
    }
    assert not odd, f"kinds must be IMAGE, OPTIMIZATION or LANGUAGE; got {odd}"
    for pair in EXPECTED_REFUSALS:
        assert len(pair) == 2 and pair <= set(ALGORITHMS), f"EXPECTED_REFUSALS holds {sorted(pair)}"


def test_the_checks_count_optimizer_steps_and_see_a_method_that_never_applies(monkeypatch: pytest.MonkeyPatch):
    sam = run_pair(Run("sam", "cutout", grad_accum=2))
    assert sam.status == "trained" and sam.steps == 2  # SAM's two passes and two microbatches: still one step a batch
    assert run_pair(Run("scale_schedule", "cutout", grad_accum=1)).steps == 3  # ratio 1.5 of 2 batches
    # keep=1 never matches: the run trains, but SelectiveBackprop's apply never runs, and the check says so.
    never = MethodSetting(
        IMAGE, lambda model: SelectiveBackprop(start=0.0, end=1.0, keep=1.0, scale_factor=0.5, interrupt=0)
    )
    monkeypatch.setitem(SETTINGS, "selective_backprop", never)
    outcome = run_pair(Run("cutout", "selective_backprop", grad_accum=1))
    assert outcome.status == "trained" and outcome.steps == 2
    found = problem(outcome)
    assert found is not None and "no apply of ['SelectiveBackprop']" in found


def test_the_checks_allow_only_the_expected_refusals_with_both_names():
    unexpected = Outcome(
        Run("cutout", "mixup", 1), "refused", error=ValueError("CutOut and MixUp"), where="constructor"
    )
    assert "not in EXPECTED_REFUSALS" in str(problem(unexpected))
    unnamed = Outcome(Run("ema", "swa", 1), "refused", error=ValueError("EMA cannot run here"), where="constructor")
    assert "does not name both EMA and SWA" in str(problem(unnamed))
    named = Outcome(Run("swa", "ema", 2), "refused", error=ValueError("SWA and EMA both ..."), where="constructor")
    assert problem(named) is None


def test_an_outgrown_matrix_is_sampled_with_a_fixed_seed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys.modules[__name__], "CI_MAX_RUNS", 10)
    runs = image_runs()
    sample = _in_budget(runs)
    assert len(sample) == 10 == len(set(sample)) and set(sample) <= set(runs)
    assert sample == _in_budget(runs) == sorted(sample)


def _check(run: Run) -> None:
    found = problem(run_pair(run))
    if found is not None:
        pytest.fail(f"{run.first} then {run.second}, grad_accum={run.grad_accum}: {found}", pytrace=False)


@pytest.mark.parametrize("run", _in_budget(image_runs()), ids=str)
def test_image_pair_composes(run: Run):
    _check(run)


@pytest.mark.parametrize("run", _in_budget(language_runs()), ids=str)
def test_language_pair_composes(run: Run):
    _check(run)
