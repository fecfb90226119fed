"""Pictures for the method cards, drawn by the site build from each method's own function on the built-in digits.

What BlurPool, CutOut, ColOut, MixUp and Progressive Resizing do to an image, and how ScaleSchedule stretches a
learning-rate schedule. The image is four of the digits that ship with the package (``digits_datasets``, 32 x 32
each), side by side in a 2 x 2 grid; every random choice comes from a seeded ``torch.Generator``, so a build draws the
same pictures. They are committed under ``docs/images/methods`` (``bash scripts/docs figures``) so that the cards show
them on the repository host too.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["METHOD_FIGURES", "method_figure_png"]


def _digits(image_size: int = 32) -> Any:
    """Four digits (0 to 3) in a 2 x 2 grid: a (1, 1, 2 * image_size, 2 * image_size) tensor in [0, 1].

    The digits are read at their own 8 x 8 pixels and only these four are scaled up (bilinear, as ``digits_datasets``
    scales them), which is much cheaper than scaling the whole set.
    """
    import torch
    import torch.nn.functional as F

    from composer.datasets import digits_datasets

    train, _ = digits_datasets(image_size=8)
    first: dict[int, Any] = {}
    for index in range(len(train)):
        image, label = train[index]
        first.setdefault(int(label), image)
        if all(digit in first for digit in range(4)):
            break
    images = torch.stack([first[digit] for digit in range(4)])
    if image_size != 8:
        images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", align_corners=False)
    grid = torch.cat([torch.cat([images[0], images[1]], dim=2), torch.cat([images[2], images[3]], dim=2)], dim=1)
    return (grid / grid.max()).unsqueeze(0)


def _panels(images: list[tuple[str, Any]], rows: int = 1) -> bytes:
    """Grey-scale panels with their titles, ``rows`` rows of them, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = -(-len(images) // rows)
    figure, axes = plt.subplots(rows, columns, figsize=(2.3 * columns, 2.7 * rows), squeeze=False)
    for ax, (title, image) in zip(axes.flat, images, strict=False):
        pixels = image.squeeze().numpy()
        ax.imshow(pixels, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{pixels.shape[1]} x {pixels.shape[0]}", fontsize=9)
    for ax in list(axes.flat)[len(images) :]:
        ax.axis("off")
    return _png(figure)


def _png(figure: Any) -> bytes:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _seeded(seed: int) -> Any:
    import torch

    return torch.Generator().manual_seed(seed)


def _blurpool() -> bytes:
    import torch

    from composer.functional import blur_2d

    # The digits at their own 8 x 8 pixels, each pixel 3 x 3 wide: sharp edges, which subsampling aliases.
    image = _digits(8).repeat_interleave(3, dim=2).repeat_interleave(3, dim=3)
    shifted = torch.roll(image, shifts=1, dims=3)
    plain, plain_shifted = image[..., ::2, ::2], shifted[..., ::2, ::2]
    blurred, blurred_shifted = blur_2d(image, stride=2), blur_2d(shifted, stride=2)
    return _panels(
        [
            ("image", image),
            ("stride 2, no blur", plain),
            ("the same, image shifted 1 px", plain_shifted),
            ("|difference|", (plain - plain_shifted).abs()),
            ("image", image),
            ("blur_2d(stride=2)", blurred),
            ("the same, image shifted 1 px", blurred_shifted),
            ("|difference|", (blurred - blurred_shifted).abs()),
        ],
        rows=2,
    )


def _cutout() -> bytes:
    from composer.functional import cutout

    image = _digits()
    draws = [
        (f"cutout, seed {seed}", cutout(image, n_holes=1, length=24, generator=_seeded(seed))) for seed in range(3)
    ]
    return _panels([("image", image), *draws])


def _colout() -> bytes:
    from composer.functional import colout

    image = _digits()
    draws = [(f"colout, seed {seed}", colout(image, generator=_seeded(seed))) for seed in range(3)]
    return _panels([("image", image), *draws])


def _mixup() -> bytes:
    import torch

    from composer.functional import mixup_inputs

    image = _digits()
    other = torch.flip(image, dims=(2, 3))  # the same digits upside down: a second, different image
    batch = torch.cat([image, other])
    swap = torch.tensor([1, 0])  # each sample is mixed with the other one
    mixes = [(f"lambda = {lam}", mixup_inputs(batch, lam, swap)[:1]) for lam in (0.8, 0.6)]
    return _panels([("x_i", image), ("x_perm(i)", other), *mixes])


def _progressive_resizing() -> bytes:
    import torch

    from composer.functional import resize_inputs

    image = _digits()
    target = torch.zeros(1)
    resized = [(f"scale {scale}", resize_inputs(image, target, scale)[0]) for scale in (0.25, 0.5, 0.75)]
    cropped = resize_inputs(image, target, 0.5, mode="crop", generator=_seeded(0))[0]
    return _panels([*resized, ("scale 1.0 (full size)", image), ("scale 0.5, mode='crop'", cropped)])


def _scale_schedule() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from composer.functional import scale_scheduler

    def curve(make: Callable[[torch.optim.Optimizer], Any], ssr: float, epochs: int) -> list[float]:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = make(optimizer)
        scale_scheduler(scheduler, ssr)
        values = []
        for _ in range(round(epochs * ssr)):
            values.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return values

    schedules = {
        "MultiStepLR(milestones=[30, 60, 80], gamma=0.1)": lambda o: torch.optim.lr_scheduler.MultiStepLR(
            o, milestones=[30, 60, 80], gamma=0.1
        ),
        "CosineAnnealingLR(T_max=90)": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=90),
    }
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
    for ax, (title, make) in zip(axes, schedules.items(), strict=True):
        for ssr, style in ((1.0, "-"), (0.5, "--"), (0.25, ":")):
            ax.plot(curve(make, ssr, 90), style, label=f"ratio={ssr}")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("epoch", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("learning rate (x base)", fontsize=10)
    axes[0].legend(fontsize=10)
    return _png(figure)


# Card folder -> the function that draws its picture.
METHOD_FIGURES: dict[str, Callable[[], bytes]] = {
    "blurpool": _blurpool,
    "colout": _colout,
    "cutout": _cutout,
    "mixup": _mixup,
    "progressive_resizing": _progressive_resizing,
    "scale_schedule": _scale_schedule,
}


def method_figure_png(name: str) -> bytes:
    """The picture of the method card ``name`` (a folder of ``composer/algorithms``), as a PNG.

    Args:
        name (str): One of :data:`METHOD_FIGURES`.

    Returns:
        bytes: The PNG image.
    """
    return METHOD_FIGURES[name]()


def write_method_figures(folder: Path) -> list[Path]:
    """Draws every card's picture into ``folder`` (``docs/images/methods``)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in METHOD_FIGURES:
        path = folder / f"{name}.png"
        path.write_bytes(method_figure_png(name))
        written.append(path)
    return written
