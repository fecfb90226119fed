"""ChannelsLast: store a model's 4d weights in the ``torch.channels_last`` (NHWC) memory format.

Convolutions on NVIDIA tensor cores (and on many CPU kernels) run natively on NHWC data; with NCHW weights and
activations PyTorch inserts layout transposes around every convolution. Converting the model once makes the
convolutions produce channels-last activations, which the following layers keep.
"""

from __future__ import annotations

import sys
import warnings

import torch
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["ChannelsLast", "ChannelsLastHparams", "apply_channels_last"]


_FSDP_NOTE = (
    "the model is sharded with FSDP (fully_shard, the Trainer's fsdp_config), which gathers each parameter into a "
    "contiguous buffer for every forward pass, so its weights cannot be channels-last."
)


def _is_fsdp_sharded(model: nn.Module) -> bool:
    """Whether ``model`` or one of its submodules is sharded with FSDP (``torch.distributed.fsdp.fully_shard``)."""
    fsdp = sys.modules.get("torch.distributed.fsdp")  # not imported: nothing is sharded (and importing it is slow)
    return fsdp is not None and any(isinstance(module, fsdp.FSDPModule) for module in model.modules())


def apply_channels_last(model: nn.Module) -> nn.Module:
    """Changes the memory format of ``model``'s 4d parameters and buffers to ``torch.channels_last``, in place.

    Values, shapes and parameter objects are unchanged (only the strides differ), so optimizers keep working.
    Inputs are not converted: a convolution with channels-last weights returns channels-last outputs anyway.

    Args:
        model: The model to convert.

    Returns:
        nn.Module: ``model``.

    Raises:
        ValueError: If ``model`` is sharded with FSDP (``fully_shard``), whose parameters cannot be channels-last.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())
        >>> model = apply_channels_last(model)
        >>> model[0].weight.is_contiguous(memory_format=torch.channels_last)
        True
        >>> model(torch.randn(2, 3, 8, 8)).is_contiguous(memory_format=torch.channels_last)
        True
    """
    if _is_fsdp_sharded(model):
        raise ValueError(f"apply_channels_last: {_FSDP_NOTE} Leave it as it is, or train the model without FSDP.")
    return model.to(memory_format=torch.channels_last)


class ChannelsLast(Algorithm):
    """Changes the memory format of the model to ``torch.channels_last``; this usually improves GPU utilisation.

    Runs on ``Event.FIT_START`` (the original Composer API's ``TRAINING_START``), after the Trainer has moved the
    model to its device; converting again on a later ``fit`` changes nothing. Launched with DistributedDataParallel,
    the Trainer then wraps the model anew for the converted weights (``Parallelism.rewrap``); a model sharded with
    FSDP cannot have channels-last weights, and is left as it is, with a warning. Has no hyperparameters.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import cifar_resnet
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = cifar_resnet(depth=8)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep", algorithms=[ChannelsLast()],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> model.module.conv1.weight.is_contiguous(memory_format=torch.channels_last)
        True
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        if args or kwargs:
            raise TypeError(f"ChannelsLast takes no arguments, got {args!r} and {kwargs!r}.")

    def match(self, event: Event, state: State) -> bool:
        """Runs at ``Event.FIT_START``."""
        return event == Event.FIT_START

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Converts the model to channels-last (not a model sharded with FSDP: warns and leaves it as it is)."""
        if _is_fsdp_sharded(state.model):
            warnings.warn(
                f"ChannelsLast does nothing here: {_FSDP_NOTE} The model is left as it is; for channels-last weights "
                "train without fsdp_config (DistributedDataParallel converts them and wraps the model anew).",
                stacklevel=2,
            )
            return
        apply_channels_last(state.model)


ChannelsLastHparams = hparams_for(ChannelsLast)
"""See :class:`ChannelsLast`; the fields are its arguments (YAML key ``channels_last``)."""
