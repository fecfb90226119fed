"""Datasets: seeded synthetic data, small real datasets that need no download, and readers for data you have.

Image loaders return uint8 images and normalize them on the device (:class:`Normalize`, a DataSpec device transform).
"""

from composer.datasets.cifar import CIFARDataset, cifar_dataloader, load_cifar
from composer.datasets.digits import digits_dataloaders, digits_datasets
from composer.datasets.image_folder import image_folder_dataloader
from composer.datasets.normalization import Normalize
from composer.datasets.synthetic import SyntheticClassificationDataset, SyntheticTokenDataset
from composer.datasets.text import (
    ByteTextDataset,
    byte_unigram_entropy,
    load_python_docs,
    python_docs_dataloaders,
    text_file_dataloader,
)

__all__ = ["SyntheticClassificationDataset", "SyntheticTokenDataset", "digits_dataloaders"]
__all__ += ["ByteTextDataset", "byte_unigram_entropy", "load_python_docs", "python_docs_dataloaders"]
__all__ += ["text_file_dataloader"]
__all__ += ["CIFARDataset", "Normalize", "cifar_dataloader", "digits_datasets", "image_folder_dataloader", "load_cifar"]
