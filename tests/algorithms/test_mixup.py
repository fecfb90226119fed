"""mixup_batch against the formula for given lambda and indices, the Beta draw, and MixUp in the Trainer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import LabelSmoothing, MixUp, MixUpHparams
from composer.core import Callback
from composer.functional import gen_interpolation_lambda, mix_targets, mixup_batch
from composer.models import ComposerClassifier
from composer.models.resnet_cifar import CIFARResNet
from composer.trainer import Trainer


def test_mixup_batch_matches_formula_for_given_lambda_and_indices():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, 4, 4, generator=g)
    y = torch.randint(0, 5, (6,), generator=g)
    indices = torch.tensor([3, 0, 5, 1, 2, 4])
    lam = 0.3
    x_mix, y_mix, perm = mixup_batch(x, y, lam, n_classes=5, indices=indices)
    one_hot = F.one_hot(y, 5).float()
    torch.testing.assert_close(x_mix, lam * x + (1 - lam) * x[indices])
    torch.testing.assert_close(y_mix, lam * one_hot + (1 - lam) * one_hot[indices])
    assert torch.equal(perm, indices)


def test_mixup_batch_dense_and_multi_dim_targets():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 2, generator=g)
    dense = torch.softmax(torch.randn(4, 3, generator=g), dim=1)
    indices = torch.tensor([1, 2, 3, 0])
    _, y_mix, _ = mixup_batch(x, dense, 0.6, n_classes=3, indices=indices)
    torch.testing.assert_close(y_mix, 0.6 * dense + 0.4 * dense[indices])

    masks = torch.randint(0, 3, (4, 5, 5), generator=g)  # per-pixel labels (B, H, W) -> dense (B, C, H, W)
    _, y_mix, _ = mixup_batch(torch.randn(4, 1, 5, 5), masks, 0.25, n_classes=3, indices=indices)
    one_hot = F.one_hot(masks, 3).movedim(-1, 1).float()
    torch.testing.assert_close(y_mix, 0.25 * one_hot + 0.75 * one_hot[indices])


def test_same_class_partners_keep_a_one_hot_target():
    y_mix = mix_targets(torch.tensor([1, 1]), 0.3, n_classes=2, indices=torch.tensor([1, 0]))
    torch.testing.assert_close(y_mix, torch.tensor([[0.0, 1.0], [0.0, 1.0]]))


def test_random_permutation_is_seeded():
    x, y = torch.randn(16, 3), torch.randint(0, 4, (16,))
    _, _, perm_a = mixup_batch(x, y, 0.5, 4, generator=torch.Generator().manual_seed(3))
    _, _, perm_b = mixup_batch(x, y, 0.5, 4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(perm_a, perm_b)
    assert torch.equal(perm_a.sort().values, torch.arange(16))


def test_gen_interpolation_lambda_follows_beta():
    g = torch.Generator().manual_seed(0)
    draws = torch.tensor([gen_interpolation_lambda(0.2, g) for _ in range(2000)])
    assert draws.min() >= 0 and draws.max() <= 1
    assert abs(draws.mean().item() - 0.5) < 0.05  # Beta(a, a) is symmetric around 1/2
    assert ((draws < 0.1) | (draws > 0.9)).float().mean() > 0.5  # small alpha: mass near the ends
    wide = torch.tensor([gen_interpolation_lambda(20.0, g) for _ in range(500)])
    assert ((wide > 0.3) & (wide < 0.7)).float().mean() > 0.9  # large alpha: mass near 1/2
    assert gen_interpolation_lambda(0.0, g) == 1.0


def test_gen_interpolation_lambda_is_reproducible_and_advances_the_generator():
    g = torch.Generator().manual_seed(5)
    first, second = gen_interpolation_lambda(1.0, g), gen_interpolation_lambda(1.0, g)
    assert first != second
    g.manual_seed(5)
    assert gen_interpolation_lambda(1.0, g) == first


@pytest.mark.parametrize("alpha", [-0.5, float("inf"), float("nan"), None])
def test_bad_alpha_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        gen_interpolation_lambda(alpha)
    with pytest.raises(ValueError, match="alpha"):
        MixUp(alpha)
    with pytest.raises(ValueError, match="alpha"):
        MixUpHparams(alpha=alpha)


def test_bad_inputs_raise():
    x, y = torch.randn(4, 3), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match="interpolation_lambda"):
        mixup_batch(x, y, 1.5, 3)
    with pytest.raises(ValueError, match="n_classes"):
        mixup_batch(x, y, 0.5, 0)
    with pytest.raises(ValueError, match="indices"):
        mixup_batch(x, y, 0.5, 3, indices=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="same number of samples"):
        mixup_batch(x, y[:3], 0.5, 3)
    with pytest.raises(ValueError, match="batch dimension"):
        mixup_batch(torch.tensor(1.0), y, 0.5, 3)
    with pytest.raises(ValueError, match="n_classes=3"):
        mixup_batch(x, torch.rand(4, 5), 0.5, 3)
    with pytest.raises(TypeError, match="floating"):
        mixup_batch(torch.zeros(4, 3, dtype=torch.uint8), y, 0.5, 3)


# Inputs that encode their own label: image i is one_hot(y_i) broadcast over 4x4 pixels. Mixing is linear with the
# same weight for inputs and targets, so after MixUp (or CutMix, whose weight is the pasted area) the mean of each
# image over its pixels must equal its dense mixed target, whatever lambda and permutation were drawn.
NUM_CLASSES = 4


def label_images(num_samples: int, seed: int = 0) -> TensorDataset:
    labels = torch.randint(0, NUM_CLASSES, (num_samples,), generator=torch.Generator().manual_seed(seed))
    images = F.one_hot(labels, NUM_CLASSES).float()[:, :, None, None].expand(-1, -1, 4, 4).contiguous()
    return TensorDataset(images, labels)


def label_image_model() -> ComposerClassifier:
    torch.manual_seed(0)
    return ComposerClassifier(CIFARResNet(depth=8, num_classes=NUM_CLASSES, in_channels=NUM_CLASSES))


class LossInputsRecorder(Callback):
    """Records (inputs, targets, outputs) of every microbatch at BEFORE_LOSS, after the algorithms ran."""

    def __init__(self) -> None:
        self.seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def before_loss(self, state, logger) -> None:
        inputs, targets = state.batch_pair
        self.seen.append((inputs.clone(), targets.clone(), state.outputs.detach().clone()))


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_trainer_mixes_inputs_and_targets_alike(grad_accum: int):
    data = label_images(16)
    recorder = LossInputsRecorder()
    trainer = Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="2ba",
        algorithms=[MixUp(alpha=1.0)],
        callbacks=[recorder],
        grad_accum=grad_accum,
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    assert len(recorder.seen) == 2 * grad_accum
    mixed_any = False
    for inputs, targets, outputs in recorder.seen:
        assert targets.shape == outputs.shape == (8 // grad_accum, NUM_CLASSES)  # dense, classes from the outputs
        torch.testing.assert_close(inputs.mean(dim=(2, 3)), targets)
        torch.testing.assert_close(targets.sum(dim=1), torch.ones(len(targets)))
        mixed_any |= bool((targets.max(dim=1).values < 0.99).any())
    assert mixed_any  # the effect is visible: some targets are no longer one-hot


def test_mixup_composes_with_label_smoothing_listed_after():
    recorder = LossInputsRecorder()
    trainer = Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(label_images(8), batch_size=8),
        max_duration="1ba",
        algorithms=[MixUp(alpha=1.0), LabelSmoothing(alpha=0.2)],
        callbacks=[recorder],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    ((inputs, targets, _),) = recorder.seen
    torch.testing.assert_close(targets, 0.8 * inputs.mean(dim=(2, 3)) + 0.2 / NUM_CLASSES)


def test_seeded_runs_mix_identically():
    def run() -> list[torch.Tensor]:
        recorder = LossInputsRecorder()
        Trainer(
            model=label_image_model(),
            train_dataloader=DataLoader(label_images(16), batch_size=8),
            max_duration="2ba",
            algorithms=[MixUp(alpha=0.2)],
            callbacks=[recorder],
            device="cpu",
            seed=7,
            progress_bar=False,
        ).fit()
        return [targets for _, targets, _ in recorder.seen]

    for a, b in zip(run(), run()):
        torch.testing.assert_close(a, b)


def test_mixed_targets_split_with_the_batch_and_resolve_as_mix_targets_does():
    from composer.algorithms.mixup.batch_mixing import MixedTargets
    from composer.core.data_spec import split_batch

    g = torch.Generator().manual_seed(2)
    targets, first, second = torch.randint(0, 4, (6,), generator=g), torch.randperm(6, generator=g), torch.randperm(6)
    expected = mix_targets(mix_targets(targets, 0.6, 4, first), 0.3, 4, second)  # two steps on the whole batch
    record = MixedTargets.of(targets).add(0.6, first).add(0.3, second)
    assert MixedTargets.of(record) is record
    assert torch.equal(record.resolve(n_classes=4), expected)
    parts = split_batch((torch.zeros(6, 2), record), 3)  # the microbatch split cuts the record along with the inputs
    assert all(isinstance(part_targets, MixedTargets) for _, part_targets in parts)
    assert torch.equal(torch.cat([part.resolve(n_classes=4) for _, part in parts]), expected)


def test_a_batch_size_changed_after_mixing_is_refused():
    from composer.algorithms.mixup.batch_mixing import MixedTargets
    from composer.core import Event, Logger

    class State:  # what MixUp reads at AFTER_FORWARD
        batch_pair = (torch.zeros(3, 2), MixedTargets.of(torch.tensor([0, 1, 2, 0])).add(0.5, torch.arange(4)))
        outputs = torch.zeros(3, 4)

    with pytest.raises(ValueError, match="changed the batch size"):
        MixUp(alpha=1.0).apply(Event.AFTER_FORWARD, State(), Logger(None))
