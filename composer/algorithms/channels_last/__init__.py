"""ChannelsLast: convert the model to the NHWC (``torch.channels_last``) memory format.

See the PyTorch tutorial "Channels Last Memory Format in PyTorch",
https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html.
"""

from composer.algorithms.channels_last.channels_last import ChannelsLast, ChannelsLastHparams, apply_channels_last

__all__ = ["ChannelsLast", "ChannelsLastHparams", "apply_channels_last"]
