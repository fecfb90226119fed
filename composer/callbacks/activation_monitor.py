"""Statistics of each module's output (mean, std, max, zeros, infs, NaNs), through forward hooks at an interval."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.utils.interval import parse_interval

__all__ = ["ActivationMonitor", "ActivationMonitorHparams", "activation_stats", "select_modules"]

STATISTICS = ("mean", "std", "max", "zero_fraction", "inf_count", "nan_count")


def _stats_vector(tensor: torch.Tensor) -> torch.Tensor:
    # (6,) float32 on the tensor's device, in the order of STATISTICS; no host sync.
    x = tensor.detach().reshape(-1).float()
    finite = torch.isfinite(x)
    count = finite.sum()
    has_finite = count > 0
    count = count.clamp_min(1)
    mean = torch.where(finite, x, 0.0).sum() / count
    std = (torch.where(finite, x - mean, 0.0).square().sum() / count).sqrt()
    largest = torch.where(finite, x, float("-inf")).max()
    nan = torch.tensor(float("nan"), device=x.device)
    return torch.stack(
        [
            torch.where(has_finite, mean, nan),
            torch.where(has_finite, std, nan),
            torch.where(has_finite, largest, nan),
            (x == 0).sum() / x.numel(),
            torch.isinf(x).sum().float(),
            torch.isnan(x).sum().float(),
        ]
    )


def activation_stats(tensor: torch.Tensor) -> dict[str, float]:
    """Summary statistics of one activation tensor.

    Args:
        tensor (torch.Tensor): A floating-point tensor with at least one element (any shape; computed in float32).

    Returns:
        dict[str, float]: ``mean``, ``std`` (population standard deviation) and ``max`` over the finite elements
        (NaN when there is none), ``zero_fraction`` (elements equal to 0, over all elements), ``inf_count`` and
        ``nan_count``.

    Raises:
        ValueError: ``tensor`` is empty or not floating point.

    Example:
        >>> stats = activation_stats(torch.tensor([0.0, 1.0, 2.0, -3.0, float("inf"), float("nan"), 0.0]))
        >>> {key: round(value, 4) for key, value in stats.items()}  # doctest: +NORMALIZE_WHITESPACE
        {'mean': 0.0, 'std': 1.6733, 'max': 2.0, 'zero_fraction': 0.2857, 'inf_count': 1.0, 'nan_count': 1.0}
    """
    if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tensor.numel() == 0:
        what = f"{tensor.dtype} tensor of shape {tuple(tensor.shape)}" if isinstance(tensor, torch.Tensor) else tensor
        raise ValueError(f"tensor must be a non-empty floating-point tensor; got {what!r}.")
    return dict(zip(STATISTICS, _stats_vector(tensor).tolist()))


def _first_activation(output: Any) -> torch.Tensor | None:
    # The tensor a module's output stands for: itself, or the first floating tensor of a tuple, list or dict (a
    # Hugging Face ModelOutput is a dict); None when there is none.
    if isinstance(output, torch.Tensor):
        return output if output.is_floating_point() and output.numel() > 0 else None
    if isinstance(output, Mapping):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        for item in output:
            found = _first_activation(item)
            if found is not None:
                return found
    return None


def select_modules(
    model: torch.nn.Module, module_types: Sequence[type | str] | None = None, name_pattern: str | None = None
) -> list[tuple[str, torch.nn.Module]]:
    """The submodules an :class:`ActivationMonitor` watches.

    Args:
        model (torch.nn.Module): The model (the root module itself is never selected).
        module_types (Sequence[type | str], optional): Keep modules of these classes (a class, or its name such as
            ``'Linear'``). Default: every leaf module (one without children).
        name_pattern (str, optional): Keep modules whose qualified name matches this regular expression
            (``re.search``), e.g. ``r'\\.fc\\d$'``.

    Returns:
        list[tuple[str, torch.nn.Module]]: ``(qualified name, module)`` in ``named_modules`` order.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
        >>> [name for name, _ in select_modules(net)]
        ['0', '1', '2']
        >>> [name for name, _ in select_modules(net, module_types=["Linear"], name_pattern="2")]
        ['2']
    """
    pattern = re.compile(name_pattern) if name_pattern is not None else None
    classes = tuple(t for t in module_types or () if isinstance(t, type))
    class_names = {t for t in module_types or () if isinstance(t, str)}
    selected = []
    for name, module in model.named_modules():
        if not name:
            continue
        if module_types is None:
            keep = next(module.children(), None) is None
        else:
            keep = isinstance(module, classes) or type(module).__name__ in class_names
        if keep and (pattern is None or pattern.search(name) is not None):
            selected.append((name, module))
    return selected


class ActivationMonitor(Callback):
    """Logs statistics of chosen modules' outputs every ``interval`` (BATCH level), with hooks only while it looks.

    On a logging batch it registers a forward hook on each selected module at ``BEFORE_FORWARD`` and removes them all
    at ``AFTER_FORWARD``, so the model carries no hook, and training pays nothing, between logging batches (and
    evaluation is never hooked). For each module ``name`` it logs ``activations/<stat>/<name>`` for the statistics of
    :func:`activation_stats`: ``mean``, ``std``, ``max``, ``zero_fraction``, ``inf_count``, ``nan_count``. They are
    computed on the device inside the hooks and read with one host sync per logging batch. With gradient
    accumulation, the first microbatch is watched; a module called twice in one forward is logged for its first call.
    With ``'Nba'`` it logs at batches 0, N, 2N, ...; with ``'Nep'``, the first batch of every N-th epoch.

    Args:
        interval (str | Time | int): How often: ``'100ba'``, ``'1ep'``; an int means batches.
        module_types (Sequence[type | str], optional): Watch only modules of these classes (classes or class names,
            ``['Linear', 'Conv2d']``). Default: every leaf module.
        name_pattern (str, optional): Watch only modules whose qualified name matches this regular expression.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> monitor = ActivationMonitor(interval="2ba", module_types=["Linear"])
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   callbacks=[monitor], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> sorted(key for key in memory.data if key.startswith("activations/max/"))
        ['activations/max/module.net.1', 'activations/max/module.net.3']
        >>> memory.steps("activations/max/module.net.1")
        [0, 2]
        >>> trainer.close()
    """

    def __init__(
        self,
        interval: str | Time[Any] | int = "100ba",
        module_types: Sequence[type | str] | None = None,
        name_pattern: str | None = None,
    ) -> None:
        self.interval: Time[int] = parse_interval(interval, "interval")
        if module_types is not None:
            if isinstance(module_types, (str, type)):
                module_types = [module_types]
            bad = [t for t in module_types if not isinstance(t, (str, type))]
            if bad or not module_types:
                raise ValueError(
                    f"module_types={module_types!r} must be a non-empty list of module classes or class names, e.g. "
                    "['Linear', 'Conv2d'], or None for every leaf module."
                )
            module_types = list(module_types)
        if name_pattern is not None:
            try:
                re.compile(name_pattern)
            except re.error as error:
                raise ValueError(
                    f"name_pattern={name_pattern!r} is not a regular expression ({error}); e.g. r'layer\\d\\.conv'."
                ) from None
        self.module_types = module_types
        self.name_pattern = name_pattern
        self._modules: list[tuple[str, torch.nn.Module]] = []
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._collected: dict[str, torch.Tensor] = {}
        self._last_batch = -1

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        modules = select_modules(state.model, self.module_types, self.name_pattern)
        return [f"activations/{stat}/{name}" for name, _ in modules for stat in STATISTICS]

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        self._last_batch = -1
        self._modules = select_modules(state.model, self.module_types, self.name_pattern)
        if not self._modules:
            types = sorted({type(m).__name__ for _, m in state.model.named_modules()})
            raise ValueError(
                f"ActivationMonitor(module_types={self.module_types!r}, name_pattern={self.name_pattern!r}) selects "
                f"no module of the model; its module classes are {types}. Widen module_types or name_pattern."
            )

    def _due(self, state: State) -> bool:
        timer, n = state.timer, self.interval.value
        if self.interval.unit == TimeUnit.BATCH:
            return timer.batch.value % n == 0
        return timer.batch_in_epoch.value == 0 and timer.epoch.value % n == 0

    def _hook(self, name: str) -> Callable[[torch.nn.Module, Any, Any], None]:
        collected = self._collected

        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            del module, args
            if name not in collected:
                tensor = _first_activation(output)
                if tensor is not None:
                    collected[name] = _stats_vector(tensor)

        return hook

    def before_forward(self, state: State, logger: Logger) -> None:
        batch = state.timer.batch.value
        if batch == self._last_batch or not logger.destinations or not self._due(state):
            return
        self._last_batch = batch
        self._remove_hooks()
        self._handles = [module.register_forward_hook(self._hook(name)) for name, module in self._modules]

    def after_forward(self, state: State, logger: Logger) -> None:
        del state
        if not self._handles:
            return
        collected, self._collected = self._collected, {}
        self._remove_hooks()
        if collected:
            logger.metric_batch(lambda: _values(collected))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._collected.clear()

    def batch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._handles:  # the forward raised (and the run went on) before AFTER_FORWARD
            self._remove_hooks()

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self._remove_hooks()

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        self._remove_hooks()


def _values(collected: dict[str, torch.Tensor]) -> dict[str, float]:
    names = list(collected)
    device = collected[names[0]].device
    table = torch.stack([collected[name].to(device) for name in names]).tolist()  # (modules, 6): the one host sync
    return {
        f"activations/{stat}/{name}": row[i] for name, row in zip(names, table) for i, stat in enumerate(STATISTICS)
    }


ActivationMonitorHparams = hparams_for(ActivationMonitor)
"""See :class:`ActivationMonitor`; the fields are its arguments (YAML key ``activation_monitor``)."""
