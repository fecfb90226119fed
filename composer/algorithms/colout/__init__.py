"""ColOut: drop a random fraction of the rows and columns of images, which shrinks them."""

from composer.algorithms.colout.colout import ColOut, ColOutHparams, ColOutTransform, colout

__all__ = ["ColOut", "ColOutHparams", "ColOutTransform", "colout"]
