"""What MixUp and CutMix share: a seeded permutation of the batch, and targets that follow the inputs' mixing.

Both methods pair every sample with the sample a random permutation sends it to, and train on a weighted blend of
the two targets. :func:`mix_targets` builds those dense targets once the class count is known. In the Trainer that
count is known only from the model's outputs, so until then a :class:`MixedTargets` takes the targets' place in the
batch and records the mixing steps; :class:`MixingAlgorithm` is the Algorithm side both methods share.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, NamedTuple

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = [
    "MixedTargets",
    "MixingAlgorithm",
    "check_indices",
    "check_lambda",
    "mix_targets",
    "num_classes_of",
    "random_permutation",
]


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


def check_indices(indices: torch.Tensor, n: int) -> None:
    """Raises ValueError unless ``indices`` is an integer tensor of shape ``(n,)``: a sample's partner per sample."""
    if not isinstance(indices, torch.Tensor) or indices.shape != (n,) or indices.is_floating_point():
        got = f"shape {tuple(indices.shape)}, dtype {indices.dtype}" if isinstance(indices, torch.Tensor) else indices
        raise ValueError(
            f"indices must be an integer tensor of shape ({n},), a permutation of the batch indices, got {got}. "
            f"To fix, pass torch.randperm({n}) or leave indices=None for a random one."
        )


def check_lambda(interpolation_lambda: float) -> None:
    """Raises ValueError unless ``interpolation_lambda`` is a number in ``[0, 1]``."""
    value = interpolation_lambda
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"interpolation_lambda={value!r} must be a number in [0, 1], the weight of each sample's own input and "
            "target. Draw one with gen_interpolation_lambda(alpha)."
        )


def _check_targets(targets: torch.Tensor, n_classes: int) -> None:
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive int (the number of classes), got {n_classes!r}.")
    if not isinstance(targets, torch.Tensor) or targets.ndim < 1:
        raise ValueError(
            "targets must be a tensor with a batch dimension: class indices (B, ...) or dense targets "
            f"(B, n_classes, ...), got {targets!r}."
        )
    if targets.is_floating_point() and (targets.ndim < 2 or targets.shape[1] != n_classes):
        raise ValueError(
            f"Dense (floating) targets must have shape (B, n_classes={n_classes}, ...), got "
            f"{tuple(targets.shape)}. Class-index targets must be an integer tensor."
        )


def _blend(own: torch.Tensor, partner: torch.Tensor, lam: float, n_classes: int) -> torch.Tensor:
    """``lam * dense(own) + (1 - lam) * dense(partner)``, for checked targets of one shape."""
    if own.is_floating_point():
        # lerp(partner, own, lam) = lam * own + (1 - lam) * partner, in one pass.
        return torch.lerp(partner, own, lam)
    # Index targets (N, d...) -> (N, 1, d...): each sample puts lam on its class and 1 - lam on its partner's (the
    # two add up when both are the same class).
    own = own.unsqueeze(1)
    mixed = torch.zeros((own.shape[0], n_classes, *own.shape[2:]), device=own.device)
    mixed.scatter_(1, own, lam)
    return mixed.scatter_add_(1, partner.unsqueeze(1), mixed.new_full((1,), 1.0 - lam).expand(own.shape))


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
    check_lambda(interpolation_lambda)
    _check_targets(targets, n_classes)
    check_indices(indices, targets.shape[0])
    return _blend(targets, targets[indices.to(targets.device)], float(interpolation_lambda), n_classes)


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


class MixedTargets(NamedTuple):
    """A batch's targets while its inputs are mixed: what each sample's dense target is made of, and with what weights.

    A mixing method puts it in the targets' place when it mixes the inputs (``AFTER_DATALOADER``), a second mixing
    method adds its step to it, and :meth:`resolve` turns it into dense targets once the model's outputs give the
    class count (``AFTER_FORWARD``), applying the steps in the order the inputs went through them. Both fields hold one
    row per sample, so the batch splitter cuts the record into microbatches along with the inputs, and each
    microbatch resolves its own rows. Partners are drawn from the whole batch, so gradient accumulation trains on the
    targets of the big batch.

    Attributes:
        targets: After ``k`` steps, a tensor ``(B, 2**k, ...)``: row ``i`` holds the original targets (class indices,
            or dense targets) of every sample mixed into sample ``i``. Its first half is what sample ``i`` was made of
            before the last step, its second half what that step's partner was made of, and so on within each half.
        weights: A float64 CPU tensor ``(B, k)``: ``weights[:, j]`` is the share of its own target that step ``j``
            left each sample (the same for every row, and kept per row so that it splits with the batch).

    Example:
        >>> mixed = MixedTargets.of(torch.tensor([0, 1, 2, 0])).add(0.75, torch.tensor([3, 2, 1, 0]))
        >>> mixed.resolve(n_classes=3)
        tensor([[1.0000, 0.0000, 0.0000],
                [0.0000, 0.7500, 0.2500],
                [0.0000, 0.2500, 0.7500],
                [1.0000, 0.0000, 0.0000]])
        >>> first_half = MixedTargets(mixed.targets[:2], mixed.weights[:2])  # what the batch splitter makes of it
        >>> torch.equal(first_half.resolve(n_classes=3), mixed.resolve(n_classes=3)[:2])
        True
    """

    targets: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def of(cls, targets: torch.Tensor | MixedTargets) -> MixedTargets:
        """The record of ``targets`` before any step (a MixedTargets is returned as it is: it already records some).

        Raises:
            ValueError: If ``targets`` is not a tensor with a batch dimension.
        """
        if isinstance(targets, MixedTargets):
            return targets
        if not isinstance(targets, torch.Tensor) or targets.ndim < 1:
            raise ValueError(
                "Mixing needs the targets as a tensor with a batch dimension: class indices (B, ...) or dense "
                f"targets (B, n_classes, ...), got {type(targets).__name__}. Use a dataloader that yields (inputs, "
                "targets) pairs of tensors."
            )
        return cls(targets.unsqueeze(1), torch.empty((targets.shape[0], 0), dtype=torch.float64))

    def add(self, interpolation_lambda: float, indices: torch.Tensor) -> MixedTargets:
        """The record after one more step: each sample keeps ``interpolation_lambda`` of its target, and takes the
        rest from its partner ``indices[i]``."""
        check_lambda(interpolation_lambda)
        check_indices(indices, self.targets.shape[0])
        weight = self.weights.new_full((self.weights.shape[0], 1), float(interpolation_lambda))
        partners = self.targets[indices.to(self.targets.device)]
        return MixedTargets(torch.cat([self.targets, partners], dim=1), torch.cat([self.weights, weight], dim=1))

    def resolve(self, n_classes: int) -> torch.Tensor:
        """The dense targets after every step, shape ``(B, n_classes, ...)``, as :func:`mix_targets` applied step by
        step to the whole batch gives them (row for row, with the same arithmetic).

        Raises:
            ValueError: If ``n_classes`` is not a positive int or does not fit dense targets.
        """
        parts, rows = self.targets, self.targets.shape[0]
        _check_targets(parts[:, 0], n_classes)
        for lam in self.weights[0].tolist() if rows else []:
            # Neighbours (2m, 2m + 1) are a sample and its partner in this step: blend them, halving the parts.
            own, partner = parts[:, 0::2], parts[:, 1::2]
            count = own.shape[1]
            # Contiguous, as the whole batch's tensors were: the arithmetic then runs exactly as mix_targets' does.
            own, partner = own.flatten(0, 1).contiguous(), partner.flatten(0, 1).contiguous()
            blended = _blend(own, partner, lam, n_classes)
            parts = blended.reshape(rows, count, *blended.shape[1:])
        return parts.squeeze(1)


class MixingAlgorithm(Algorithm):
    """Base of the algorithms that blend each sample with a partner from its batch (MixUp, CutMix).

    A subclass implements :meth:`mix_inputs`: it draws its randomness from the generator it is given, changes the
    inputs of the whole batch, and returns the weight that each sample's own target keeps and each sample's partner.
    This base class does the rest, in one place for every mixing method, through the batch alone:

    * ``AFTER_DATALOADER``: mixes the inputs of the whole batch (before it is split into microbatches) and adds the
      step to the :class:`MixedTargets` in the targets' place. A second mixing method adds its step to the same
      record, so that in ``[CutMix, MixUp]`` the targets go through the same steps as the inputs, in the same order
      (cut, then mix): both apply to every batch.
    * ``AFTER_FORWARD``: the model's outputs give the class count; the first mixing method to run replaces the
      current microbatch's record with its dense targets.

    Because the targets are mixed right after the forward pass, algorithms that transform targets before the loss
    (:class:`~composer.algorithms.label_smoothing.LabelSmoothing`, at ``BEFORE_LOSS``) always see the mixed targets,
    whatever the order of the list: label smoothing and mixing are both linear maps of the targets, so they commute,
    and both orders train identically.
    """

    @abstractmethod
    def mix_inputs(self, inputs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Mixes a batch of inputs; returns ``(mixed inputs, weight of each sample's own target, partners)``."""

    def match(self, event: Event, state: State) -> bool:
        """Runs after the dataloader (inputs) and after each forward pass (targets)."""
        return event in (Event.AFTER_DATALOADER, Event.AFTER_FORWARD)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Mixes the inputs after the dataloader and the targets once the class count is known."""
        inputs, targets = state.batch_pair
        if event == Event.AFTER_DATALOADER:
            mixed, own_weight, partners = self.mix_inputs(inputs, state.rng)
            state.batch_pair = (mixed, MixedTargets.of(targets).add(own_weight, partners))
        elif isinstance(targets, MixedTargets):  # else another mixing method resolved them already
            n_classes = num_classes_of(state.outputs, type(self).__name__)
            if state.outputs.shape[0] != targets.targets.shape[0]:
                raise ValueError(
                    f"{type(self).__name__} mixed a batch whose targets record {targets.targets.shape[0]} samples, "
                    f"but the model's outputs hold {state.outputs.shape[0]}: an algorithm changed the batch size "
                    "between AFTER_DATALOADER (where the inputs were mixed) and AFTER_FORWARD. Drop samples before "
                    "the mixing (as SelectiveBackprop does, with run_first)."
                )
            state.batch_pair = (inputs, targets.resolve(n_classes))
