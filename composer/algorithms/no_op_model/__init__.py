"""NoOpModel: a one-parameter stand-in for the model, to measure the data pipeline and the training loop alone.

The method of the original MosaicML Composer release (``no_op_model``), kept as a benchmarking tool.
"""

from composer.algorithms.no_op_model.no_op_model import NoOpModel, NoOpModelClass, NoOpModelHparams, no_op_model

__all__ = ["NoOpModel", "NoOpModelClass", "NoOpModelHparams", "no_op_model"]
