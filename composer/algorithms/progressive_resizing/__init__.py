"""Progressive resizing: train on small images first and grow them to full size (fast.ai's progressive resizing).

See Howard & Gugger, "Fastai: A Layered API for Deep Learning" (2020, https://arxiv.org/abs/2002.04688).
"""

from composer.algorithms.progressive_resizing.progressive_resizing import (
    COMPILED_SCALE_BUCKETS,
    ProgressiveResizing,
    ProgressiveResizingHparams,
    resize_inputs,
    resize_scale,
    scaled_size,
)

__all__ = [
    "COMPILED_SCALE_BUCKETS",
    "ProgressiveResizing",
    "ProgressiveResizingHparams",
    "resize_inputs",
    "resize_scale",
    "scaled_size",
]
