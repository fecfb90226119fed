"""What MixUp and CutMix share: a seeded permutation of the batch and dense targets mixed with their partners'.

Both methods pair every sample with the sample a random permutation sends it to, and train on a weighted blend of
the two targets. :func:`mix_targets` builds those dense targets once the class count is known;
:class:`DeferredTargetMix` holds a batch's targets from ``AFTER_DATALOADER`` (when the inputs are mixed) until
``BEFORE_LOSS``, where the class count can be read from the model's outputs, and hands out one slice per microbatch.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DeferredTargetMix", "mix_targets", "num_classes_of", "random_permutation"]


def random_permutation(
    n: int, generator: torch.Generator | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """A random permutation of ``0 .. n-1`` drawn from ``generator``, returned on ``device``.

    The permutation is drawn on the generator's device (a CPU generator cannot fill a CUDA tensor) and then moved.

    Args:
        n: The number of samples.
        generator: Where the randomness comes from; default: torch's default generator.
        device: Where the result lives; default: the generator's device.

    Returns:
        torch.Tensor: An int64 tensor of shape ``(n,)``.

    Example:
        >>> random_permutation(5, torch.Generator().manual_seed(0)).sort().values
        tensor([0, 1, 2, 3, 4])
    """
    draw_on = generator.device if generator is not None else torch.device("cpu")
    perm = torch.randperm(n, generator=generator, device=draw_on)
    return perm if device is None else perm.to(device)


def _check_indices(indices: torch.Tensor, n: int) -> None:
    if not isinstance(indices, torch.Tensor) or indices.shape != (n,) or indices.is_floating_point():
        got = f"shape {tuple(indices.shape)}, dtype {indices.dtype}" if isinstance(indices, torch.Tensor) else indices
        raise ValueError(
            f"indices must be an integer tensor of shape ({n},), a permutation of the batch indices, got {got}. "
            f"To fix, pass torch.randperm({n}) or leave indices=None for a random one."
        )


def _check_lambda(interpolation_lambda: float) -> None:
    value = interpolation_lambda
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"interpolation_lambda={value!r} must be a number in [0, 1], the weight of each sample's own input and "
            "target. Draw one with gen_interpolation_lambda(alpha)."
        )


def mix_targets(
    targets: torch.Tensor, interpolation_lambda: float, n_classes: int, indices: torch.Tensor
) -> torch.Tensor:
    """Dense targets ``lambda * dense(targets) + (1 - lambda) * dense(targets)[indices]``.

    Each sample's target is blended with the target of its partner ``indices[i]``, weighted like the inputs were.
    Class-index targets (an integer tensor) become one-hot first; floating targets are taken as dense already.

    Args:
        targets: Class indices, an integer tensor of shape ``(B, d1, ..., dn)`` with values in ``[0, n_classes)``,
            or dense targets, a floating tensor of shape ``(B, n_classes, d1, ..., dn)``.
        interpolation_lambda: The weight of each sample's own target, in ``[0, 1]``.
        n_classes: The number of classes.
        indices: The partner of each sample, an integer tensor of shape ``(B,)``.

    Returns:
        torch.Tensor: Dense targets of shape ``(B, n_classes, d1, ..., dn)``: float32 for index targets, the same
        dtype for dense ones.

    Raises:
        ValueError: If ``interpolation_lambda`` is outside ``[0, 1]``, ``n_classes`` is not a positive int, or the
            shapes do not fit.

    Example:
        >>> mix_targets(torch.tensor([0, 2]), 0.75, n_classes=3, indices=torch.tensor([1, 0]))
        tensor([[0.7500, 0.0000, 0.2500],
                [0.2500, 0.0000, 0.7500]])
    """
    _check_lambda(interpolation_lambda)
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive int (the number of classes), got {n_classes!r}.")
    if not isinstance(targets, torch.Tensor) or targets.ndim < 1:
        raise ValueError(
            "targets must be a tensor with a batch dimension: class indices (B, ...) or dense targets "
            f"(B, n_classes, ...), got {targets!r}."
        )
    _check_indices(indices, targets.shape[0])
    indices = indices.to(targets.device)
    lam = float(interpolation_lambda)
    if targets.is_floating_point():
        if targets.ndim < 2 or targets.shape[1] != n_classes:
            raise ValueError(
                f"Dense (floating) targets must have shape (B, n_classes={n_classes}, ...), got "
                f"{tuple(targets.shape)}. Class-index targets must be an integer tensor."
            )
        # lerp(partner, own, lam) = lam * own + (1 - lam) * partner, in one pass.
        return torch.lerp(targets[indices], targets, lam)
    # Index targets (B, d...) -> (B, 1, d...): each sample puts lam on its class and 1 - lam on its partner's (the
    # two add up when both are the same class).
    own = targets.unsqueeze(1)
    mixed = torch.zeros((targets.shape[0], n_classes, *targets.shape[1:]), device=targets.device)
    mixed.scatter_(1, own, lam)
    return mixed.scatter_add_(1, own[indices], mixed.new_full((1,), 1.0 - lam).expand(own.shape))


def num_classes_of(outputs: Any, method: str) -> int:
    """The number of classes in a model's logits ``(N, C, ...)``: ``C``.

    Args:
        outputs: The model's outputs.
        method: The algorithm asking, for the error message.

    Raises:
        ValueError: If ``outputs`` is not a tensor with a class dimension.

    Example:
        >>> num_classes_of(torch.zeros(4, 10), "MixUp")
        10
    """
    if not isinstance(outputs, torch.Tensor) or outputs.ndim < 2:
        shape = tuple(outputs.shape) if isinstance(outputs, torch.Tensor) else type(outputs).__name__
        raise ValueError(
            f"{method} reads the number of classes from the model's outputs, which must be logits of shape "
            f"(N, C, ...), got {shape}. Use {method} with a classifier whose forward returns logits."
        )
    return int(outputs.shape[1])


class DeferredTargetMix:
    """Holds one batch's targets and pairing until the class count is known, then mixes them microbatch by microbatch.

    An algorithm that mixes the inputs at ``AFTER_DATALOADER`` calls :meth:`start_batch` with the original targets,
    the weight and the permutation. At ``BEFORE_LOSS`` the model's outputs give the class count, and
    :meth:`next_microbatch` returns the mixed dense targets of the current microbatch. Microbatches come in order and
    together make up the batch (the contract of :func:`~composer.core.data_spec.split_batch`), so a cursor over the
    batch finds each one; :meth:`rewind` restarts it when the optimizer re-runs the batch (``BEFORE_TRAIN_BATCH``).

    Example:
        >>> pending = DeferredTargetMix()
        >>> pending.start_batch(torch.tensor([0, 1, 2, 0]), 0.5, torch.tensor([3, 2, 1, 0]))
        >>> pending.next_microbatch(torch.tensor([0, 1]), n_classes=3)  # the first half of the batch
        tensor([[1.0000, 0.0000, 0.0000],
                [0.0000, 0.5000, 0.5000]])
        >>> pending.next_microbatch(torch.tensor([2, 0]), n_classes=3).shape
        torch.Size([2, 3])
    """

    def __init__(self) -> None:
        self._targets: torch.Tensor | None = None
        self._lambda = 1.0
        self._indices: torch.Tensor | None = None
        self._mixed: torch.Tensor | None = None
        self._cursor = 0

    def start_batch(self, targets: torch.Tensor, interpolation_lambda: float, indices: torch.Tensor) -> None:
        """Remembers the batch's original targets, the weight of each sample's own target, and its partners."""
        self._targets, self._lambda, self._indices = targets, interpolation_lambda, indices
        self._mixed, self._cursor = None, 0

    def rewind(self) -> None:
        """Starts handing out microbatches from the beginning of the batch again."""
        self._cursor = 0

    def next_microbatch(self, targets: torch.Tensor, n_classes: int) -> torch.Tensor:
        """Returns the mixed dense targets for the next microbatch, whose original targets are ``targets``.

        Raises:
            ValueError: If ``targets`` are not the next slice of the batch's original targets (another algorithm
                changed them after the inputs were mixed), or the batch holds fewer samples than asked for.
        """
        full = self._targets
        if full is None or self._indices is None:
            return targets  # no batch was mixed (the algorithm was added after AFTER_DATALOADER)
        start, stop = self._cursor, self._cursor + targets.shape[0]
        expected = full[start:stop]
        if stop > full.shape[0] or targets.shape != expected.shape or targets.dtype != expected.dtype:
            raise ValueError(
                f"Expected the original targets of samples {start}..{stop - 1} of the mixed batch (shape "
                f"{tuple(expected.shape)}, {expected.dtype}) at BEFORE_LOSS, got shape {tuple(targets.shape)}, "
                f"{targets.dtype}. Another algorithm changed the targets or the batch size after the inputs were "
                "mixed: list MixUp/CutMix before algorithms that change targets before the loss (LabelSmoothing), "
                "or after those that drop samples."
            )
        if self._mixed is None or self._mixed.shape[1] != n_classes:
            self._mixed = mix_targets(full, self._lambda, n_classes, self._indices)
        self._cursor = stop
        return self._mixed[start:stop]
