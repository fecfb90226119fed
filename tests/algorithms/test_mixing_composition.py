"""MixUp, CutMix and LabelSmoothing compose in any order of the algorithm list.

References: on "label images" (image i is one_hot(y_i) spread over its pixels) every mixing step is linear with the
same weights for inputs and targets, so the mean of each trained image over its pixels must equal its dense mixed
target, however many mixing steps were applied; label smoothing maps a dense target t to (1 - a) t + a / C.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from composer.algorithms import CutMix, LabelSmoothing, MixUp
from composer.core import Algorithm
from composer.trainer import Trainer
from tests.algorithms.test_mixup import NUM_CLASSES, LossInputsRecorder, label_image_model, label_images


def _fit(algorithms: list[Algorithm], grad_accum: int = 1, batches: int = 2) -> tuple[Trainer, LossInputsRecorder]:
    recorder = LossInputsRecorder()
    trainer = Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(label_images(8 * batches), batch_size=8),
        max_duration=f"{batches}ba",
        algorithms=algorithms,
        callbacks=[recorder],
        grad_accum=grad_accum,
        device="cpu",
        seed=3,
        progress_bar=False,
    )
    trainer.fit()
    return trainer, recorder


def _traced(trainer: Trainer) -> set[str]:
    return {trace.name for trace in trainer.engine.traces.values()}


@pytest.mark.parametrize("mixer", [MixUp, CutMix])
@pytest.mark.parametrize("smoothing_first", [True, False])
@pytest.mark.parametrize("grad_accum", [1, 2])
def test_label_smoothing_smooths_the_mixed_targets_in_either_order(mixer, smoothing_first: bool, grad_accum: int):
    algorithms = [mixer(alpha=1.0), LabelSmoothing(alpha=0.2)]
    if smoothing_first:
        algorithms.reverse()
    trainer, recorder = _fit(algorithms, grad_accum)
    assert len(recorder.seen) == 2 * grad_accum
    mixed_any = False
    for inputs, targets, _ in recorder.seen:
        mixed = inputs.mean(dim=(2, 3))  # the dense mixed target, by linearity
        torch.testing.assert_close(targets, 0.8 * mixed + 0.2 / NUM_CLASSES)
        mixed_any |= bool((mixed.max(dim=1).values < 0.99).any())
    assert mixed_any
    assert _traced(trainer) >= {mixer.__name__, "LabelSmoothing"}


@pytest.mark.parametrize("order", [(CutMix, MixUp), (MixUp, CutMix)])
@pytest.mark.parametrize("grad_accum", [1, 2])
def test_cutmix_and_mixup_both_apply_and_targets_follow_the_inputs(order, grad_accum: int):
    trainer, recorder = _fit([order[0](alpha=1.0), order[1](alpha=1.0)], grad_accum, batches=4)
    boxes = blends = 0
    for inputs, targets, outputs in recorder.seen:
        assert targets.shape == outputs.shape
        torch.testing.assert_close(inputs.mean(dim=(2, 3)), targets)  # both steps, in the inputs' order
        torch.testing.assert_close(targets.sum(dim=1), torch.ones(len(targets)))
        # CutMix leaves images that differ between pixels (a pasted box); MixUp leaves pixels that are blends.
        boxes += int((inputs.amax(dim=(2, 3)) - inputs.amin(dim=(2, 3)) > 1e-6).any())
        blends += int(((inputs > 1e-6) & (inputs < 1 - 1e-6)).any())
    assert boxes > 0 and blends > 0
    assert _traced(trainer) >= {"CutMix", "MixUp"}


def test_two_mixing_steps_give_the_composed_formula():
    """[CutMix, MixUp] equals cutmix_batch then mixup_batch with the same draws, inputs and targets alike."""
    from composer.functional import cutmix_batch, mixup_batch

    class Capture(LossInputsRecorder):
        def after_dataloader(self, state, logger) -> None:
            self.mixed_inputs = state.batch_pair[0].clone()

    data = label_images(8)
    images, labels = data.tensors
    recorder = Capture()
    cutmix, mixup = CutMix(alpha=1.0), MixUp(alpha=0.4)
    trainer = Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="1ba",
        algorithms=[cutmix, mixup],
        callbacks=[recorder],
        device="cpu",
        seed=5,
        progress_bar=False,
    )
    # Replay the same draws by hand: the Trainer reseeds state.rng from the seed, so take it before fit.
    replay = torch.Generator().set_state(trainer.state.rng.get_state())
    trainer.fit()
    from composer.algorithms.cutmix import gen_cutmix_bbox
    from composer.algorithms.mixup import gen_interpolation_lambda
    from composer.algorithms.mixup.batch_mixing import random_permutation

    lam1 = gen_interpolation_lambda(1.0, replay)
    bbox = gen_cutmix_bbox(4, 4, lam1, replay)
    perm1 = random_permutation(8, replay)
    x1, y1, _ = cutmix_batch(images, labels, NUM_CLASSES, bbox=bbox, indices=perm1)
    lam2 = gen_interpolation_lambda(0.4, replay)
    perm2 = random_permutation(8, replay)
    x2, y2, _ = mixup_batch(x1, y1, lam2, NUM_CLASSES, indices=perm2)
    torch.testing.assert_close(recorder.mixed_inputs, x2)
    ((_, targets, _),) = recorder.seen
    torch.testing.assert_close(targets, y2)


@pytest.mark.parametrize("mixer", [MixUp, CutMix])
@pytest.mark.parametrize("grad_accum", [1, 2])
def test_commuting_orders_train_to_the_same_weights(mixer, grad_accum: int):
    def weights(algorithms: list[Algorithm]) -> dict[str, torch.Tensor]:
        trainer, _ = _fit(algorithms, grad_accum, batches=3)
        return {k: v.detach().clone() for k, v in trainer.state.model.state_dict().items()}

    first = weights([LabelSmoothing(alpha=0.1), mixer(alpha=0.5)])
    second = weights([mixer(alpha=0.5), LabelSmoothing(alpha=0.1)])
    initial = label_image_model().state_dict()
    assert any(not torch.equal(first[k], initial[k]) for k in first)  # it trained
    for name in first:
        torch.testing.assert_close(first[name], second[name], rtol=1e-6, atol=1e-7)


def _resumable(folder, max_duration: str, grad_accum: int = 1, load_path=None) -> Trainer:
    return Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(label_images(32, seed=1), batch_size=8, shuffle=True),
        max_duration=max_duration,
        algorithms=[LabelSmoothing(alpha=0.1), CutMix(alpha=1.0), MixUp(alpha=0.5)],
        grad_accum=grad_accum,
        device="cpu",
        seed=11,
        progress_bar=False,
        save_folder=str(folder),
        save_interval="3ba",
        load_path=load_path,
    )


def test_a_mixing_list_resumes_bitwise(tmp_path):
    whole = _resumable(tmp_path / "whole", "8ba")
    whole.fit()
    stopped = _resumable(tmp_path / "part", "3ba")
    stopped.fit()
    resumed = _resumable(tmp_path / "resumed", "8ba", load_path=str(tmp_path / "part" / "ep0-ba3-rank0.pt"))
    resumed.fit()
    for (name, a), b in zip(whole.state.model.state_dict().items(), resumed.state.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_grad_accumulation_trains_on_the_big_batch_targets():
    """Partners are drawn from the whole batch: the microbatches' targets put together are the big batch's."""

    def targets(grad_accum: int) -> list[torch.Tensor]:
        _, recorder = _fit([LabelSmoothing(alpha=0.1), MixUp(alpha=1.0), CutMix(alpha=1.0)], grad_accum, batches=2)
        per_batch = [recorder.seen[i : i + grad_accum] for i in range(0, len(recorder.seen), grad_accum)]
        return [torch.cat([t for _, t, _ in microbatches]) for microbatches in per_batch]

    for big, accumulated in zip(targets(1), targets(4)):
        torch.testing.assert_close(accumulated, big)
