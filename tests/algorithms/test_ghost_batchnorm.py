"""Ghost batch norm equals batch norm when one ghost batch covers the batch, and per-chunk normalisation otherwise;
running statistics, evaluation, the surgery on our ResNets and torchvision's; GhostBatchNorm in the Trainer."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import GhostBatchNorm, GhostBatchNormHparams
from composer.algorithms.ghost_batchnorm import GhostBatchNorm1d, GhostBatchNorm2d, GhostBatchNorm3d
from composer.functional import apply_ghost_batchnorm
from composer.models import imagenet_resnet
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer

EPS = 1e-5


def chunk_normalize(x: torch.Tensor, ghost: int, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Reference: each slice x[i : i + ghost] normalised by its own per-channel mean and biased variance (float64)."""
    x = x.double()
    shape = (1, -1) + (1,) * (x.dim() - 2)
    dims = (0, *range(2, x.dim()))
    outs = []
    for start in range(0, x.shape[0], ghost):
        chunk = x[start : start + ghost]
        mean = chunk.mean(dim=dims, keepdim=True)
        var = ((chunk - mean) ** 2).mean(dim=dims, keepdim=True)
        outs.append((chunk - mean) / torch.sqrt(var + EPS) * weight.double().view(shape) + bias.double().view(shape))
    return torch.cat(outs)


def _randomize_affine(module: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.weight.copy_(torch.rand(module.weight.shape, generator=g) + 0.5)
        module.bias.copy_(torch.randn(module.bias.shape, generator=g))


@pytest.mark.parametrize("batch", [4, 6])
def test_equals_batchnorm_when_the_ghost_batch_covers_the_batch(batch: int):
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    _randomize_affine(bn, 0)
    ghost = GhostBatchNorm2d.from_batchnorm(copy.deepcopy(bn), ghost_batch_size=6)
    x = torch.randn(batch, 3, 4, 4, requires_grad=True)
    out_bn, out_ghost = bn(x), ghost(x)
    assert torch.equal(out_bn, out_ghost)
    assert torch.equal(bn.running_mean, ghost.running_mean) and torch.equal(bn.running_var, ghost.running_var)
    (grad_bn,) = torch.autograd.grad(out_bn.pow(2).sum(), x)
    (grad_ghost,) = torch.autograd.grad(out_ghost.pow(2).sum(), x)
    assert torch.allclose(grad_bn, grad_ghost)


@pytest.mark.parametrize(("batch", "ghost_batch_size"), [(8, 2), (8, 4), (10, 4), (9, 3), (7, 5)])
def test_normalizes_each_ghost_batch_on_its_own(batch: int, ghost_batch_size: int):
    gbn = GhostBatchNorm2d(3, ghost_batch_size=ghost_batch_size)
    _randomize_affine(gbn, 1)
    x = torch.randn(batch, 3, 5, 4, generator=torch.Generator().manual_seed(2)) * 3 + 1
    out = gbn(x)
    assert torch.allclose(out.double(), chunk_normalize(x, ghost_batch_size, gbn.weight, gbn.bias), atol=1e-5)
    # Gradients flow through the per-chunk statistics like batch norm's do through its batch statistics.
    x.requires_grad_(True)
    gbn(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_running_statistics_track_the_whole_batch_like_batchnorm():
    torch.manual_seed(0)
    gbn = GhostBatchNorm2d(3, ghost_batch_size=3, momentum=0.25)
    x = torch.randn(10, 3, 2, 2) * 2 + 5
    gbn(x)
    # Reference: batch norm's update with the full batch's mean and unbiased variance.
    mean = x.double().mean(dim=(0, 2, 3))
    var = x.double().var(dim=(0, 2, 3), unbiased=True)
    assert torch.allclose(gbn.running_mean.double(), 0.75 * 0 + 0.25 * mean, atol=1e-5)
    assert torch.allclose(gbn.running_var.double(), 0.75 * 1 + 0.25 * var, atol=1e-5)
    assert int(gbn.num_batches_tracked) == 1


def test_cumulative_average_when_momentum_is_none():
    gbn = GhostBatchNorm1d(2, ghost_batch_size=2, momentum=None)
    batches = [torch.randn(6, 2, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    for b in batches:
        gbn(b)
    expected = torch.stack([b.double().mean(0) for b in batches]).mean(0)
    assert torch.allclose(gbn.running_mean.double(), expected, atol=1e-6)


def test_evaluation_is_plain_batchnorm_with_the_running_statistics():
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    ghost = GhostBatchNorm2d.from_batchnorm(copy.deepcopy(bn), ghost_batch_size=2)
    for _ in range(3):
        x = torch.randn(8, 3, 4, 4)
        bn(x), ghost(x)
    bn.eval(), ghost.eval()
    assert torch.allclose(bn.running_mean, ghost.running_mean, atol=1e-6)
    x = torch.randn(8, 3, 4, 4)
    assert torch.allclose(bn(x), ghost(x), atol=1e-5)


@pytest.mark.parametrize(
    ("cls", "shape"), [(GhostBatchNorm1d, (8, 3)), (GhostBatchNorm1d, (8, 3, 5)), (GhostBatchNorm3d, (8, 3, 2, 3, 2))]
)
def test_other_ranks(cls: type[nn.Module], shape: tuple[int, ...]):
    gbn = cls(3, ghost_batch_size=4)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(gbn(x).double(), chunk_normalize(x, 4, gbn.weight, gbn.bias), atol=1e-5)


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match=r"GhostBatchNorm2d expects input with 4 dimensions .* got shape \(8, 3\)"):
        GhostBatchNorm2d(3, ghost_batch_size=2)(torch.randn(8, 3))
    with pytest.raises(ValueError, match="ghost_batch_size=0 must be a positive int"):
        GhostBatchNorm2d(3, ghost_batch_size=0)
    with pytest.raises(ValueError, match="ghost_batch_size=0 must be a positive int"):
        GhostBatchNorm(ghost_batch_size=0)
    with pytest.raises(ValueError, match="at least 2 samples"):  # the last ghost batch would be a single value
        GhostBatchNorm1d(3, ghost_batch_size=2)(torch.randn(5, 3))


# ---- the surgery -----------------------------------------------------------------------------------------------------


def _changes_outputs_keeping_shapes(model: nn.Module, size: int, ghost_batch_size: int = 2) -> None:
    model.train()
    x = torch.randn(4, 3, size, size, generator=torch.Generator().manual_seed(0))
    reference = copy.deepcopy(model)
    num_bn = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    keys = list(model.state_dict())
    apply_ghost_batchnorm(model, ghost_batch_size=ghost_batch_size)
    assert sum(isinstance(m, GhostBatchNorm2d) for m in model.modules()) == num_bn > 0
    assert not any(type(m) is nn.BatchNorm2d for m in model.modules())
    assert list(model.state_dict()) == keys  # checkpoints load into either model
    before, after = reference(x), model(x)
    assert after.shape == before.shape
    assert not torch.allclose(after, before, atol=1e-4)


def test_surgery_changes_outputs_of_our_resnets_keeping_shapes():
    torch.manual_seed(0)
    _changes_outputs_keeping_shapes(cifar_resnet(depth=8).module, 16)
    _changes_outputs_keeping_shapes(imagenet_resnet(depth=18).module, 32)


def test_surgery_shares_parameters_so_an_existing_optimizer_keeps_training_them():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    params = list(model.parameters())
    out = apply_ghost_batchnorm(model, ghost_batch_size=2)
    assert out is model and all(p is q for p, q in zip(params, model.parameters()))


def test_surgery_on_torchvision_resnets_at_64_pixels(torchvision_resnet: nn.Module):
    _changes_outputs_keeping_shapes(torchvision_resnet, 64, ghost_batch_size=2)


# ---- the Algorithm ---------------------------------------------------------------------------------------------------


def test_ghost_batchnorm_trains_a_resnet_normalizing_ghost_batches():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,))), batch_size=4)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        max_duration="2ba",
        algorithms=[GhostBatchNorm(ghost_batch_size=2)],
        progress_bar=False,
    )
    bn1 = model.module.bn1
    assert isinstance(bn1, GhostBatchNorm2d)
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    # Clones: the next ReLU works in place and the optimizer updates the weights in place.
    bn1.register_forward_hook(
        lambda m, args, out: seen.append(tuple(t.detach().clone() for t in (args[0], out, m.weight, m.bias)))
    )
    trainer.fit()
    assert len(seen) == 2
    for x, out, weight, bias in seen:  # each batch of 4 was normalised as two ghost batches of 2
        assert torch.allclose(out.double(), chunk_normalize(x, 2, weight, bias), atol=1e-4)
        assert not torch.allclose(out.double(), chunk_normalize(x, 4, weight, bias), atol=1e-3)


def test_hparams_require_the_ghost_batch_size():
    assert GhostBatchNorm().ghost_batch_size == 32
    assert GhostBatchNormHparams(ghost_batch_size=16).initialize_object().ghost_batch_size == 16
    with pytest.raises(ValueError, match="ghost_batch_size"):
        GhostBatchNormHparams()  # type: ignore[call-arg]
