"""Datasets: seeded synthetic data, small real datasets that need no download, and readers for data you have.

The image datasets keep uint8 images and have a torchvision-style per-sample ``transform``, which per-sample
augmentations (AugMix, RandAugment, ``ColOut(batch=False)``) extend. The CIFAR and image-folder loaders return uint8
batches and normalize them on the device (:class:`Normalize`, a DataSpec device transform); the digits and
synthetic datasets convert each sample to float in their ``transform`` (:class:`ToNormalizedTensor`).
"""

from composer.datasets.cifar import CIFARDataset, cifar_dataloader, load_cifar
from composer.datasets.digits import digits_dataloaders, digits_datasets
from composer.datasets.hf_dataset import HFDataset
from composer.datasets.image_dataset import ImageTensorDataset
from composer.datasets.image_folder import image_folder_dataloader
from composer.datasets.loader import split_dataloader
from composer.datasets.masking import (
    BYTE_MASK_TOKEN_ID,
    MASKED_BYTE_VOCAB_SIZE,
    MaskingCollator,
    mask_token_id_of,
    mask_tokens,
)
from composer.datasets.normalization import Normalize, ToNormalizedTensor
from composer.datasets.synthetic import SyntheticClassificationDataset, SyntheticTokenDataset
from composer.datasets.text import (
    ByteTextDataset,
    TokenTextDataset,
    byte_unigram_entropy,
    load_python_docs,
    pack_documents,
    python_docs_dataloaders,
    text_file_dataloader,
)
from composer.datasets.tokenizer import load_tokenizer, train_bpe_tokenizer

__all__ = ["SyntheticClassificationDataset", "SyntheticTokenDataset", "digits_dataloaders"]
__all__ += ["ByteTextDataset", "byte_unigram_entropy", "load_python_docs", "python_docs_dataloaders"]
__all__ += ["TokenTextDataset", "load_tokenizer", "pack_documents", "text_file_dataloader", "train_bpe_tokenizer"]
__all__ += ["BYTE_MASK_TOKEN_ID", "MASKED_BYTE_VOCAB_SIZE", "MaskingCollator", "mask_token_id_of", "mask_tokens"]
__all__ += ["HFDataset", "ImageTensorDataset", "ToNormalizedTensor", "split_dataloader"]
__all__ += ["CIFARDataset", "Normalize", "cifar_dataloader", "digits_datasets", "image_folder_dataloader", "load_cifar"]
