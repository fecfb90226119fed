"""Images per second of our RandAugment and AugMix against torchvision's, on the same 32x32 RGB PIL images.

Each round passes every image once through each of the four transforms, in turn (interleaved, so drift in machine
speed hits all four), on one thread (as in a DataLoader worker). Settings match across libraries: RandAugment with
2 operations at severity/magnitude 9; AugMix with severity 3, width 3, random depth 1-3, alpha 1, all operations.
The transforms draw from torch's default generator, seeded at the start of each pass.

Run:  .venv/bin/python benchmarks/augmentations.py [--images 512] [--rounds 7]
Target: ours at least as fast as torchvision's (best-of-rounds images/s ratio >= 1).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

from composer.algorithms.augmix import AugmentAndMixTransform
from composer.algorithms.randaugment import RandAugmentTransform

__all__: list[str] = []


def make_images(count: int, size: int = 32) -> list[Image.Image]:
    # Smooth random colour fields plus noise: closer to natural images than uniform noise (histograms not flat).
    rng = np.random.default_rng(0)
    images = []
    for _ in range(count):
        base = rng.integers(0, 256, (4, 4, 3)).astype(np.float32)
        field = np.kron(base, np.ones((size // 4, size // 4, 1), dtype=np.float32))
        pixels = np.clip(field + rng.normal(0, 20, field.shape), 0, 255).astype(np.uint8)
        images.append(Image.fromarray(pixels))
    return images


def images_per_second(transform: Callable[[Any], Any], images: list[Image.Image]) -> float:
    torch.manual_seed(0)
    start = time.perf_counter()
    for img in images:
        transform(img)
    return len(images) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    images = make_images(args.images)
    candidates: dict[str, Callable[[Any], Any]] = {
        "ours RandAugment": RandAugmentTransform(severity=9, depth=2, augmentation_set="all"),
        "torchvision RandAugment": transforms.RandAugment(num_ops=2, magnitude=9),
        "ours AugMix": AugmentAndMixTransform(severity=3, depth=-1, width=3, alpha=1.0, augmentation_set="all"),
        "torchvision AugMix": transforms.AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True),
    }
    for transform in candidates.values():  # warm up caches and lazy imports
        images_per_second(transform, images[:32])
    rates: dict[str, list[float]] = {name: [] for name in candidates}
    for r in range(args.rounds):
        for name, transform in candidates.items():
            rates[name].append(images_per_second(transform, images))
        print(f"round {r}: " + "  ".join(f"{name} {rates[name][-1]:.0f}/s" for name in candidates))
    print()
    print(f"{'transform':<26}{'best img/s':>12}{'median img/s':>14}")
    for name, values in rates.items():
        print(f"{name:<26}{max(values):>12.0f}{statistics.median(values):>14.0f}")
    for method in ("RandAugment", "AugMix"):
        ours, theirs = rates[f"ours {method}"], rates[f"torchvision {method}"]
        print(f"{method}: ours / torchvision = {max(ours) / max(theirs):.2f}x (best), target >= 1.00")


if __name__ == "__main__":
    main()
