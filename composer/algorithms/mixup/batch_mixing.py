"""What MixUp and CutMix share: a seeded permutation of the batch and dense targets mixed with their partners'.

Both methods pair every sample with the sample a random permutation sends it to, and train on a weighted blend of
the two targets. :func:`mix_targets` builds those dense targets once the class count is known;
:class:`DeferredTargetMix` holds a batch's targets and mixing steps from ``AFTER_DATALOADER`` (when the inputs are
mixed) until ``AFTER_FORWARD``, where the class count can be read from the model's outputs, and hands out one slice
per microbatch; :class:`MixingAlgorithm` is the Algorithm side both methods share.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["DeferredTargetMix", "MixingAlgorithm", "mix_targets", "num_classes_of", "random_permutation"]


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
    """One batch's targets and the mixing steps applied to its inputs, resolved once the class count is known.

    Algorithms that mix inputs at ``AFTER_DATALOADER`` (:class:`MixingAlgorithm`) :meth:`add` their step, the
    weight of each sample's own target and its partners, in the order they mixed the inputs. Once the model's outputs
    give the class count, :meth:`next_microbatch` applies every step to the whole batch's targets, in the same order
    (``dense -> mix_1 -> mix_2 ...``), and returns the current microbatch's slice. Microbatches come in order and
    together make up the batch (the contract of :func:`~composer.core.data_spec.split_batch`), so a cursor over the
    batch finds each one; :meth:`rewind` restarts it when the optimizer re-runs the batch (``BEFORE_TRAIN_BATCH``).
    Partners are drawn from the whole batch, so gradient accumulation sees the targets the big batch would.

    Args:
        targets: The batch's targets as they were when the first step mixed the inputs (class indices or dense).

    Example:
        >>> pending = DeferredTargetMix(torch.tensor([0, 1, 2, 0]))
        >>> pending.add(0.5, torch.tensor([3, 2, 1, 0]))
        >>> pending.next_microbatch(torch.tensor([0, 1]), n_classes=3)  # the first half of the batch
        tensor([[1.0000, 0.0000, 0.0000],
                [0.0000, 0.5000, 0.5000]])
        >>> pending.next_microbatch(torch.tensor([2, 0]), n_classes=3).shape
        torch.Size([2, 3])
    """

    def __init__(self, targets: torch.Tensor) -> None:
        self.targets = targets
        self.steps: list[tuple[float, torch.Tensor]] = []
        self._mixed: torch.Tensor | None = None
        self._cursor = 0

    def add(self, interpolation_lambda: float, indices: torch.Tensor) -> None:
        """Appends a mixing step: each sample keeps ``interpolation_lambda`` of its target, the rest is its partner's."""
        _check_lambda(interpolation_lambda)
        _check_indices(indices, self.targets.shape[0])
        self.steps.append((interpolation_lambda, indices))
        self._mixed = None

    def rewind(self) -> None:
        """Starts handing out microbatches from the beginning of the batch again."""
        self._cursor = 0

    def mixed_targets(self, n_classes: int) -> torch.Tensor:
        """The whole batch's dense targets after every step, shape ``(B, n_classes, ...)``."""
        if self._mixed is None or self._mixed.shape[1] != n_classes:
            mixed = self.targets
            for interpolation_lambda, indices in self.steps:
                mixed = mix_targets(mixed, interpolation_lambda, n_classes, indices)
            self._mixed = mixed
        return self._mixed

    def next_microbatch(self, targets: torch.Tensor, n_classes: int) -> torch.Tensor:
        """Returns the mixed dense targets for the next microbatch, whose original targets are ``targets``.

        Raises:
            ValueError: If ``targets`` are not the next slice of the batch's original targets (another algorithm
                changed them, or the batch size, after the inputs were mixed).
        """
        full = self.targets
        start, stop = self._cursor, self._cursor + targets.shape[0]
        expected = full[start:stop]
        if stop > full.shape[0] or targets.shape != expected.shape or targets.dtype != expected.dtype:
            raise ValueError(
                f"Expected the original targets of samples {start}..{stop - 1} of the mixed batch (shape "
                f"{tuple(expected.shape)}, {expected.dtype}) after the forward pass, got shape "
                f"{tuple(targets.shape)}, {targets.dtype}. An algorithm changed the targets or the batch size between "
                "AFTER_DATALOADER (where the inputs were mixed) and AFTER_FORWARD (where the targets are). Change "
                "targets in BEFORE_LOSS (as LabelSmoothing does) or drop samples before the mixing (as "
                "SelectiveBackprop does, with run_first)."
            )
        self._cursor = stop
        return self.mixed_targets(n_classes)[start:stop]


class MixingAlgorithm(Algorithm):
    """Base of the algorithms that blend each sample with a partner from its batch (MixUp, CutMix).

    A subclass implements :meth:`mix_inputs`: it draws its randomness from the generator it is given, changes the
    inputs of the whole batch, and returns the weight that each sample's own target keeps and each sample's partner.
    This base class does the rest, in one place for every mixing method:

    * ``AFTER_DATALOADER``: mixes the inputs of the whole batch (before it is split into microbatches) and records the
      step. Mixing methods listed together share one record per batch, so that in ``[CutMix, MixUp]`` the targets
      go through the same steps as the inputs, in the same order (cut, then mix): both apply to every batch.
    * ``AFTER_FORWARD``: the model's outputs give the class count; the first mixing method of the batch replaces the
      current microbatch's targets with the dense targets after every step.
    * ``BEFORE_TRAIN_BATCH``: rewinds the walk over microbatches (the optimizer may re-run a batch).

    Because the targets are mixed right after the forward pass, algorithms that transform targets before the loss
    (:class:`~composer.algorithms.label_smoothing.LabelSmoothing`, at ``BEFORE_LOSS``) always see the mixed targets,
    whatever the order of the list: label smoothing and mixing are both linear maps of the targets, so they commute,
    and both orders train identically.
    """

    def __init__(self) -> None:
        self._mix: DeferredTargetMix | None = None
        self._owns_mix = False

    @abstractmethod
    def mix_inputs(self, inputs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Mixes a batch of inputs; returns ``(mixed inputs, weight of each sample's own target, partners)``."""

    def match(self, event: Event, state: State) -> bool:
        """Runs after the dataloader (inputs), after each forward pass (targets) and before each train batch."""
        return event in (Event.AFTER_DATALOADER, Event.BEFORE_TRAIN_BATCH, Event.AFTER_FORWARD)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Mixes the inputs after the dataloader and the targets once the class count is known."""
        if event == Event.AFTER_DATALOADER:
            inputs, targets = state.batch_pair
            mixed, own_weight, partners = self.mix_inputs(inputs, state.rng)
            state.batch_pair = (mixed, targets)
            self._join_batch(state.algorithms, targets).add(own_weight, partners)
        elif not self._owns_mix or self._mix is None:
            return  # another mixing method of this batch resolves the targets
        elif event == Event.BEFORE_TRAIN_BATCH:
            self._mix.rewind()
        else:
            inputs, targets = state.batch_pair
            n_classes = num_classes_of(state.outputs, type(self).__name__)
            state.batch_pair = (inputs, self._mix.next_microbatch(targets, n_classes))

    def _join_batch(self, algorithms: Sequence[Algorithm], targets: torch.Tensor) -> DeferredTargetMix:
        # The record of a mixing method that already mixed this very batch (same targets object), else a new one.
        for other in algorithms:
            if (
                other is not self
                and isinstance(other, MixingAlgorithm)
                and other._owns_mix
                and other._mix is not None
                and other._mix.targets is targets
            ):
                self._mix, self._owns_mix = other._mix, False
                return other._mix
        self._mix, self._owns_mix = DeferredTargetMix(targets), True
        return self._mix
