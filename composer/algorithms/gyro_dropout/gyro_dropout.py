"""Gyro Dropout (Lee et al., MLSys 2022): dropout that trains a fixed pool of ``sigma`` subnetworks, ``tau`` at a time.

Plain dropout draws a new mask for every sample of every iteration, so no subnetwork is trained for long. Gyro
dropout draws ``sigma`` masks once, before training (the subnetworks), and trains ``tau`` of them at every
iteration: the batch is split into ``tau`` groups of consecutive samples, each group dropped with one of the active
masks. Each subnetwork should see ``1/sigma`` of all the training samples; with ``tau`` of them sharing a batch, an
active set is kept for ``total_iterations * tau / sigma`` iterations before the next ``tau`` masks take over. Here the
masks take turns in a fixed, seeded order, so that over the run every mask is active for the same number of
iterations (the paper's schedule; MosaicML's port draws each new set at random, with repeats).

:func:`gyro_dropout_masks` draws the pool and :func:`gyro_dropout_interval` gives the schedule; the
:class:`GyroDropoutLayer` applies them; :func:`apply_gyro_dropout` puts it in place of a model's ``nn.Dropout``
modules, and :class:`GyroDropout` does that at ``Event.FIT_START`` and keeps the layers on the batch count.
"""

from __future__ import annotations

import torch
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import TimeUnit
from composer.utils.module_surgery import replace_module_classes

__all__ = [
    "GyroDropout",
    "GyroDropoutHparams",
    "GyroDropoutLayer",
    "apply_gyro_dropout",
    "gyro_dropout_interval",
    "gyro_dropout_masks",
]


def _check(p: float, sigma: int, tau: int) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"p={p!r} must be a drop probability in [0, 1), such as 0.5.")
    for name, value in (("sigma", sigma), ("tau", tau)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive int (sigma: masks in the pool; tau: active masks).")
    if tau > sigma:
        raise ValueError(
            f"tau={tau} must be at most sigma={sigma}: tau of the sigma pre-drawn masks are active at a time; "
            f"lower tau or raise sigma (the paper uses sigma=256, tau=16)."
        )


def gyro_dropout_masks(
    num_features: int, p: float, sigma: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Draws the pool: ``sigma`` distinct keep-masks over ``num_features`` features, each kept with probability ``1 - p``.

    Rows that repeat an earlier row are drawn again until all ``sigma`` are distinct (for more than a few dozen
    features a repeat is vanishingly rare), so the pool holds exactly ``sigma`` subnetworks.

    Args:
        num_features: Features each mask covers (the last dimension of the dropout's input).
        p: Probability of dropping a feature.
        sigma: Masks in the pool.
        generator: Draws the masks (None: torch's global generator).

    Returns:
        torch.Tensor: Booleans of shape ``(sigma, num_features)``, True where a feature is kept.

    Raises:
        ValueError: If there are fewer than ``sigma`` possible masks over ``num_features`` features.

    Example:
        >>> masks = gyro_dropout_masks(64, p=0.5, sigma=16, generator=torch.Generator().manual_seed(0))
        >>> masks.shape, len(torch.unique(masks, dim=0))
        (torch.Size([16, 64]), 16)
    """
    _check(p, sigma, 1)
    if num_features < 1:
        raise ValueError(f"num_features={num_features!r} must be positive.")
    if num_features < 63 and 2**num_features < sigma:
        raise ValueError(
            f"sigma={sigma} distinct masks cannot be drawn over {num_features} features (only {2**num_features} "
            "exist); lower sigma or apply gyro dropout to a wider layer."
        )
    masks = torch.rand(sigma, num_features, generator=generator) >= p
    for _ in range(1000):
        _, inverse = torch.unique(masks, dim=0, return_inverse=True)
        seen: set[int] = set()
        repeats = []
        for row, key in enumerate(inverse.tolist()):
            if key in seen:
                repeats.append(row)
            seen.add(key)
        if not repeats:
            return masks
        masks[repeats] = torch.rand(len(repeats), num_features, generator=generator) >= p
    raise ValueError(
        f"Could not draw sigma={sigma} distinct masks over {num_features} features with p={p}; lower sigma."
    )


def gyro_dropout_interval(total_iterations: int, sigma: int, tau: int) -> int:
    """Iterations each set of ``tau`` active masks lasts: ``total_iterations * tau / sigma``, at least 1.

    Each of the ``sigma`` subnetworks should be trained on ``1/sigma`` of the run's samples, ``total_iterations * B /
    sigma``; an active one sees ``B / tau`` samples an iteration, so it stays active for ``total_iterations * tau /
    sigma`` iterations (rounded down).

    Args:
        total_iterations: Iterations (optimizer steps) of the whole run.
        sigma: Masks in the pool.
        tau: Masks active at a time.

    Returns:
        int: Iterations per set of active masks.

    Example:
        >>> gyro_dropout_interval(total_iterations=1000, sigma=256, tau=16)  # 1000 * 16 / 256 = 62.5
        62
    """
    _check(0.0, sigma, tau)
    if isinstance(total_iterations, bool) or not isinstance(total_iterations, int) or total_iterations < 1:
        raise ValueError(f"total_iterations={total_iterations!r} must be a positive int (the run's optimizer steps).")
    return max(1, total_iterations * tau // sigma)


class GyroDropoutLayer(nn.Module):
    """Dropout over a fixed pool of ``sigma`` masks, ``tau`` of them active at a time (one per group of samples).

    In training, the input ``(B, ..., F)`` is split along the batch into ``tau`` groups of consecutive samples
    (sample ``i`` in group ``i * tau // B``; sizes differ by at most one, and with ``B < tau`` some groups are empty),
    and group ``j`` is multiplied by active mask ``j`` over the last dimension (shared by any middle dimensions, such
    as sequence positions) and by ``1 / (1 - p)``, so each feature's expectation is unchanged. The active masks are
    ``order[(k * tau + j) % sigma]`` for selection ``k = iteration // iterations_per_selection``, where ``order`` is
    a seeded permutation of the pool. In evaluation it is the identity.

    The pool is drawn on the first training call, when the number of features is known, from ``seed``: layers with
    the same seed on every rank of a distributed run train the same subnetworks. ``iteration`` counts the training
    calls (one per step in a plain loop) while ``advance`` is True; :class:`GyroDropout` sets it from the Trainer's
    batch count instead, so microbatches of one batch share their masks and a resumed run continues the schedule.

    Args:
        p: Probability of dropping a feature.
        sigma: Masks in the pool (subnetworks).
        tau: Masks active at a time (groups per batch).
        iterations_per_selection: Iterations each set of active masks lasts (:func:`gyro_dropout_interval`).
        seed: Seeds the pool and the order of the masks.

    Example:
        >>> layer = GyroDropoutLayer(p=0.5, sigma=8, tau=2, iterations_per_selection=10, seed=0)
        >>> out = layer(torch.ones(4, 16))
        >>> torch.equal(out[0], out[1]) and torch.equal(out[2], out[3])  # two groups, one mask each
        True
        >>> sorted(out.unique().tolist())  # dropped, or kept and scaled by 1 / (1 - p)
        [0.0, 2.0]
        >>> torch.equal(layer.eval()(torch.ones(4, 16)), torch.ones(4, 16))
        True
    """

    masks: torch.Tensor | None
    order: torch.Tensor | None

    def __init__(
        self, p: float = 0.5, sigma: int = 256, tau: int = 16, iterations_per_selection: int = 1, seed: int = 0
    ) -> None:
        super().__init__()
        _check(p, sigma, tau)
        if isinstance(iterations_per_selection, bool) or not isinstance(iterations_per_selection, int):
            raise ValueError(f"iterations_per_selection={iterations_per_selection!r} must be a positive int.")
        if iterations_per_selection < 1:
            raise ValueError(f"iterations_per_selection={iterations_per_selection!r} must be a positive int.")
        self.p, self.sigma, self.tau = float(p), sigma, tau
        self.iterations_per_selection = iterations_per_selection
        self.seed = seed
        self.iteration = 0
        self.advance = True
        # Derived from the seed, so kept out of the state dict (the model's keys stay those of nn.Dropout).
        self.register_buffer("masks", None, persistent=False)
        self.register_buffer("order", None, persistent=False)

    def _pool(self, num_features: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if self.masks is None or self.order is None or self.masks.shape[1] != num_features:
            if self.masks is not None:
                raise ValueError(
                    f"GyroDropoutLayer drew its masks for {self.masks.shape[1]} features, but got an input with "
                    f"{num_features} in its last dimension; use one layer per feature size."
                )
            generator = torch.Generator().manual_seed(self.seed)
            self.masks = gyro_dropout_masks(num_features, self.p, self.sigma, generator).to(device)
            self.order = torch.randperm(self.sigma, generator=generator).to(device)
        return self.masks, self.order

    def active_masks(self, num_features: int, device: torch.device | None = None) -> torch.Tensor:
        """The ``tau`` masks active at the current ``iteration``: booleans of shape ``(tau, num_features)``."""
        masks, order = self._pool(num_features, device or torch.device("cpu"))
        selection = self.iteration // self.iterations_per_selection
        slots = (selection * self.tau + torch.arange(self.tau, device=order.device)) % self.sigma
        return masks[order[slots]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Drops features of ``x`` ``(B, ..., F)`` with each group's active mask (training), or returns ``x``."""
        if not self.training or self.p == 0.0:
            return x
        if x.dim() < 2:
            raise ValueError(
                f"GyroDropoutLayer expects inputs of shape (B, ..., F) with a batch dimension, got {tuple(x.shape)}."
            )
        batch = x.shape[0]
        active = self.active_masks(x.shape[-1], x.device)  # (tau, F)
        groups = torch.arange(batch, device=x.device) * self.tau // batch  # (B,): consecutive groups
        mask = active[groups].view(batch, *([1] * (x.dim() - 2)), x.shape[-1])
        if self.advance:
            self.iteration += 1
        return x * mask.to(x.dtype) * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return (
            f"p={self.p}, sigma={self.sigma}, tau={self.tau}, "
            f"iterations_per_selection={self.iterations_per_selection}, seed={self.seed}"
        )


def apply_gyro_dropout(
    model: nn.Module, total_iterations: int, p: float = 0.5, sigma: int = 256, tau: int = 16, seed: int = 0
) -> nn.Module:
    """Replaces every ``nn.Dropout`` of ``model`` with a :class:`GyroDropoutLayer`, in place.

    Every layer drops with probability ``p`` (whatever the replaced dropout's was) and keeps each set of ``tau``
    active masks for :func:`gyro_dropout_interval` ``(total_iterations, sigma, tau)`` iterations. Each layer's seed
    is drawn, in the model's module order, from a generator seeded with ``seed``, so the same seed gives the same
    subnetworks. Dropout has no parameters, so optimizers need no update. Warns when the model has no ``nn.Dropout``.

    Args:
        model: The model to change.
        total_iterations: Optimizer steps of the whole run (batches per epoch times epochs).
        p: Probability of dropping a feature.
        sigma: Masks in each layer's pool.
        tau: Masks active at a time (groups of samples per batch).
        seed: Seeds the layers' masks and their order.

    Returns:
        nn.Module: ``model``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        ...                             torch.nn.Linear(64, 2))
        >>> model = apply_gyro_dropout(model, total_iterations=1000, p=0.5, sigma=64, tau=4)
        >>> model[2]
        GyroDropoutLayer(p=0.5, sigma=64, tau=4, iterations_per_selection=62, seed=...)
    """
    interval = gyro_dropout_interval(total_iterations, sigma, tau)
    _check(p, sigma, tau)

    seeds = torch.Generator().manual_seed(seed)  # one seed per layer, drawn in the model's module order

    def policy(module: nn.Module, index: int) -> nn.Module:
        layer_seed = int(torch.randint(0, 2**62, (1,), generator=seeds))
        layer = GyroDropoutLayer(p, sigma, tau, iterations_per_selection=interval, seed=layer_seed)
        layer.train(module.training)
        return layer

    replace_module_classes(model, {nn.Dropout: policy})
    return model


def _total_iterations(state: State) -> int:
    duration = state.max_duration
    if duration.unit == TimeUnit.BATCH:
        return int(duration.value)
    if duration.unit == TimeUnit.EPOCH and state.steps_per_epoch:
        return int(duration.value) * state.steps_per_epoch
    raise ValueError(
        f"GyroDropout needs the run's length in batches to schedule its masks, but max_duration={duration} "
        + ("and the training dataloader has no length" if duration.unit == TimeUnit.EPOCH else "is not in ep or ba")
        + "; give max_duration in batches ('1000ba') or epochs with a dataloader that has a length."
    )


class GyroDropout(Algorithm):
    """Replaces the model's ``nn.Dropout`` modules with Gyro Dropout: ``tau`` of ``sigma`` fixed masks at a time.

    At ``Event.FIT_START`` (once), :func:`apply_gyro_dropout` swaps every ``nn.Dropout`` (typically those of a
    classifier head, or a transformer's) for a :class:`GyroDropoutLayer` scheduled over the run's length in batches
    and seeded from the run's seed (the same masks on every rank). At every ``Event.BATCH_START`` the layers are set
    to the batch count, so microbatches share their masks and a resumed run picks up the schedule where it was.
    Logs ``GyroDropout/num_new_modules``.

    Lee et al. 2022, "Gyro Dropout: Maximizing Ensemble Effect in Neural Network Training", MLSys 2022.

    Args:
        p: Probability of dropping a feature.
        sigma: Masks in each layer's pool (subnetworks).
        tau: Masks active at a time (groups per batch).

    Example:
        >>> from composer import Trainer
        >>> from composer.models import ComposerClassifier
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Dropout(0.5),
        ...                           torch.nn.Linear(64, 3))
        >>> data = DataLoader(TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,))), batch_size=8)
        >>> trainer = Trainer(model=ComposerClassifier(net, num_classes=3), train_dataloader=data,
        ...                   max_duration="2ep", algorithms=[GyroDropout(sigma=8, tau=2)], progress_bar=False)
        >>> trainer.fit()
        >>> net[2].iterations_per_selection, net[2].iteration  # 4 batches * 2 / 8; set to the last batch
        (1, 3)
    """

    def __init__(self, p: float = 0.5, sigma: int = 256, tau: int = 16) -> None:
        _check(p, sigma, tau)
        self.p, self.sigma, self.tau = p, sigma, tau

    def match(self, event: Event, state: State) -> bool:
        """Runs at ``Event.FIT_START`` (the surgery) and ``Event.BATCH_START`` (the schedule)."""
        return event in (Event.FIT_START, Event.BATCH_START)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Swaps the dropouts once; sets every Gyro Dropout layer to the batch count at each batch."""
        if event == Event.FIT_START and not any(isinstance(m, GyroDropoutLayer) for m in state.model.modules()):
            total = _total_iterations(state)
            apply_gyro_dropout(state.model, total, self.p, self.sigma, self.tau, seed=state.rank_zero_seed)
            count = sum(isinstance(m, GyroDropoutLayer) for m in state.model.modules())
            logger.metric_fit({"GyroDropout/num_new_modules": count})
        for module in state.model.modules():
            if isinstance(module, GyroDropoutLayer):
                module.advance = False
                module.iteration = int(state.timer.batch)


GyroDropoutHparams = hparams_for(GyroDropout)
"""See :class:`GyroDropout`; the fields are its arguments (YAML key ``gyro_dropout``)."""
