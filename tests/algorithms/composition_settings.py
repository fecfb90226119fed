"""The composition matrices of issue 15: every ordered pair of registered methods, trained together on one setting.

Two short runs per ordered pair ``(first, second)`` (``algorithms=[first, second]``), one with ``grad_accum=1`` and
one with ``grad_accum=2``:

* the image matrix: every pair of image and optimization methods, on a ResNet-8 over 16x16 synthetic images
  (:class:`~composer.datasets.SyntheticClassificationDataset`, whose per-sample transform AugMix and RandAugment
  extend), 2 batches of 4;
* the language matrix: every pair with a language method and an optimization or language method, on a one-layer
  byte-level GPT over :class:`~composer.datasets.ByteTextDataset`, 2 batches of 4 windows of 16 bytes.

:data:`SETTINGS` says, for each name in ``composer.algorithms.ALGORITHMS``, which matrix it belongs to and how to
build it so that it fires within the run (start fractions 0, short intervals). A method registered without an entry
here makes ``test_every_registered_method_has_a_composition_setting`` fail; add one with one small edit, and both
matrices pick it up. :data:`EXCLUDED` names the few registered methods kept out of the matrices, each with the reason
(NoOpModel, which replaces the model).

:func:`run_pair` trains one run and reports an :class:`Outcome`; :func:`problem` says what is wrong with it, if
anything. ``tests/algorithms/test_composition.py`` runs the matrices in the suite, ``scripts/composition_matrix.py``
runs them in full and prints a summary.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import (
    ALGORITHMS,
    EMA,
    SAM,
    SWA,
    Alibi,
    AugMix,
    BlurPool,
    ChannelsLast,
    ColOut,
    CutMix,
    CutOut,
    Factorize,
    GatedLinearUnits,
    GhostBatchNorm,
    GradientClipping,
    GyroDropout,
    LabelSmoothing,
    LayerFreezing,
    LowPrecisionGroupNorm,
    LowPrecisionLayerNorm,
    MixUp,
    ProgressiveResizing,
    RandAugment,
    ScaleSchedule,
    SelectiveBackprop,
    SeqLengthWarmup,
    SqueezeExcite,
    StochasticDepth,
    WeightStandardization,
)
from composer.core import Algorithm, Callback, Logger, State
from composer.datasets import ByteTextDataset, SyntheticClassificationDataset
from composer.models import GPT, ComposerModel, GPTConfig
from composer.models.resnet_cifar import cifar_resnet

__all__ = [
    "EXCLUDED",
    "EXPECTED_REFUSALS",
    "GRAD_ACCUMS",
    "IMAGE",
    "LANGUAGE",
    "OPTIMIZATION",
    "SETTINGS",
    "MethodSetting",
    "Outcome",
    "Run",
    "image_runs",
    "language_runs",
    "problem",
    "run_pair",
    "single_threaded",
]

IMAGE = "image"
"""Methods for image classifiers: they run in the image matrix."""
OPTIMIZATION = "optimization"
"""Methods for any model (they act on the optimizer, the gradients or the weights): they run in both matrices."""
LANGUAGE = "language"
"""Methods for language models: they run in the language matrix."""

GRAD_ACCUMS = (1, 2)
"""Every pair runs once with each of these ``grad_accum`` values."""

EXPECTED_REFUSALS: frozenset[frozenset[str]] = frozenset({frozenset({"ema", "swa"})})
"""The pairs (by registry name, in either order) that the Trainer may refuse: the combination has no meaning.

EMA and SWA each replace the weights with their own average at the end of training, so at most one of them can.
A pair not listed here must train; add a pair only where the combination itself is meaningless, not where it breaks.
"""

_SEED = 0
_MAX_DURATION = "2ba"  # 2 optimizer steps (ScaleSchedule's ratio of 1.5 makes it 3); EPOCH_END fires at the end
_BATCH_SIZE = 4
_NUM_SAMPLES = 8
_IMAGE_SHAPE = (3, 16, 16)  # 16 pixels: halved by ProgressiveResizing, a microbatch of 1 still has 2x2 maps at the end
_NUM_CLASSES = 4
_TEXT = b"The quick brown fox jumps over the lazy dog. " * 3  # 135 bytes: 8 windows of 16
_SEQ_LEN = 16


@dataclass(frozen=True)
class MethodSetting:
    """How one registered method takes part in the matrices.

    Attributes:
        kind: :data:`IMAGE`, :data:`OPTIMIZATION` or :data:`LANGUAGE`.
        build: Builds the algorithm for the run's freshly built model (Alibi reads its policy from the model).
    """

    kind: str
    build: Callable[[ComposerModel], Algorithm]


SETTINGS: dict[str, MethodSetting] = {
    # Image methods, on ResNet-8 over 16x16 images.
    "augmix": MethodSetting(IMAGE, lambda model: AugMix(severity=3)),
    "blurpool": MethodSetting(
        IMAGE, lambda model: BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)
    ),
    "channels_last": MethodSetting(IMAGE, lambda model: ChannelsLast()),
    "colout": MethodSetting(IMAGE, lambda model: ColOut(p_row=0.25, p_col=0.25, batch=True)),
    "cutmix": MethodSetting(IMAGE, lambda model: CutMix(alpha=1.0)),
    "cutout": MethodSetting(IMAGE, lambda model: CutOut(n_holes=1, length=4)),
    # ResNet-8's convolutions with 32 or more channels at a quarter of their width; the 64 -> 4 classifier at rank 2.
    "factorize": MethodSetting(
        IMAGE,
        lambda model: Factorize(min_channels=32, latent_channels=0.25, min_features=4, latent_features=2),
    ),
    "ghost_batchnorm": MethodSetting(IMAGE, lambda model: GhostBatchNorm(ghost_batch_size=2)),
    "label_smoothing": MethodSetting(IMAGE, lambda model: LabelSmoothing(alpha=0.1)),
    # Freezes at EPOCH_END, which fires once the 2 batches are done.
    "layer_freezing": MethodSetting(IMAGE, lambda model: LayerFreezing(freeze_start=0.0, freeze_level=1.0)),
    "mixup": MethodSetting(IMAGE, lambda model: MixUp(alpha=0.2)),
    "progressive_resizing": MethodSetting(
        IMAGE, lambda model: ProgressiveResizing(mode="resize", initial_scale=0.5, finetune_fraction=0.2)
    ),
    "randaugment": MethodSetting(IMAGE, lambda model: RandAugment(severity=9, depth=2)),
    "selective_backprop": MethodSetting(
        IMAGE, lambda model: SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0)
    ),
    # ResNet-8's convolutions have 16, 32 or 64 channels: SE blocks go after the 4 with 32 or more.
    "squeeze_excite": MethodSetting(IMAGE, lambda model: SqueezeExcite(latent_channels=8, min_channels=32)),
    "stochastic_depth": MethodSetting(
        IMAGE,
        lambda model: StochasticDepth(
            stochastic_method="block", target_layer_name="ResNetBasicBlock", drop_rate=0.5, drop_warmup=0.5
        ),
    ),
    "weight_standardization": MethodSetting(IMAGE, lambda model: WeightStandardization(n_last_layers_ignore=0)),
    # Optimization methods, in both matrices.
    "ema": MethodSetting(OPTIMIZATION, lambda model: EMA(half_life="1ba")),
    "gradient_clipping": MethodSetting(
        OPTIMIZATION, lambda model: GradientClipping(clipping_type="adaptive", clipping_threshold=0.1)
    ),
    "sam": MethodSetting(OPTIMIZATION, lambda model: SAM(rho=0.05)),
    # A ratio other than 1, so that it changes the run (the other methods' fractions follow the scaled run), and
    # above 1, so that the scaled run keeps at least 2 optimizer steps.
    "scale_schedule": MethodSetting(OPTIMIZATION, lambda model: ScaleSchedule(ratio=1.5)),
    "swa": MethodSetting(OPTIMIZATION, lambda model: SWA(swa_start=0.0, anneal_epochs=1, swa_lr=0.01)),
    # Language methods, on the one-layer GPT over windows of 16 bytes.
    "alibi": MethodSetting(
        LANGUAGE, lambda model: Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=0.5)
    ),
    "seq_length_warmup": MethodSetting(
        LANGUAGE,
        lambda model: SeqLengthWarmup(duration=0.5, min_seq_length=8, max_seq_length=16, step_size=4, truncate=False),
    ),
    "gated_linear_units": MethodSetting(LANGUAGE, lambda model: GatedLinearUnits(activation="silu")),
    # The matrices run in fp32, where the low-precision norms warn and swap in modules that act as the originals;
    # they check that the swap composes (the bf16 behaviour has its own tests). ResNet-8 has no GroupNorm.
    "low_precision_layernorm": MethodSetting(LANGUAGE, lambda model: LowPrecisionLayerNorm()),
    "low_precision_groupnorm": MethodSetting(IMAGE, lambda model: LowPrecisionGroupNorm()),
    # The GPT is the matrices' model with nn.Dropout modules (p=0; Gyro Dropout drops with its own p=0.5).
    "gyro_dropout": MethodSetting(LANGUAGE, lambda model: GyroDropout(p=0.5, sigma=8, tau=2)),
}


EXCLUDED: dict[str, str] = {
    "no_op_model": (
        "NoOpModel replaces the model with a one-parameter stand-in, a benchmarking tool: every surgery method "
        "listed after it finds nothing to change, and whatever is listed before it changes a model that is not "
        "trained, so a pair says nothing about composition (tests/algorithms/test_no_op_model.py says what it does "
        "with surgery methods)"
    ),
}
"""Registered methods kept out of both matrices, with the reason."""


@dataclass(frozen=True, order=True)
class Run:
    """One run of a matrix: ``algorithms=[first, second]`` (registry names) with ``grad_accum``."""

    first: str
    second: str
    grad_accum: int

    @property
    def language(self) -> bool:
        """Whether the run trains the GPT (one of the two is a language method) instead of the ResNet."""
        return LANGUAGE in (SETTINGS[self.first].kind, SETTINGS[self.second].kind)

    def __str__(self) -> str:
        return f"{self.first}+{self.second}-ga{self.grad_accum}"


def _registered(kinds: tuple[str, ...]) -> list[str]:
    # Registered names only (a setting for an unregistered name is reported by the coverage test, not run).
    return [name for name in sorted(ALGORITHMS) if name in SETTINGS and SETTINGS[name].kind in kinds]


def image_runs() -> list[Run]:
    """Every ordered pair of distinct image and optimization methods, with each of :data:`GRAD_ACCUMS`."""
    names = _registered((IMAGE, OPTIMIZATION))
    return [Run(a, b, g) for a in names for b in names if a != b for g in GRAD_ACCUMS]


def language_runs() -> list[Run]:
    """Every ordered pair of distinct methods with a language method and a language or optimization method."""
    names = _registered((LANGUAGE, OPTIMIZATION))
    return [
        Run(a, b, g)
        for a in names
        for b in names
        if a != b and LANGUAGE in (SETTINGS[a].kind, SETTINGS[b].kind)
        for g in GRAD_ACCUMS
    ]


@dataclass
class Outcome:
    """What one run did.

    Attributes:
        run: The run.
        status: ``'trained'`` (``fit`` returned), ``'refused'`` (the Trainer's constructor raised a ValueError) or
            ``'crashed'`` (anything else raised).
        steps: Optimizer steps taken (calls of the optimizer's ``step``, through any wrapper such as SAM's).
        losses: The loss of every batch.
        traced: The algorithm names in the Engine's traces (those whose ``apply`` ran at least once).
        error: The exception, when one was raised.
        where: ``'constructor'`` or ``'fit'``: where it was raised.
    """

    run: Run
    status: str
    steps: int = 0
    losses: list[float] = field(default_factory=list)
    traced: set[str] = field(default_factory=set)
    error: BaseException | None = None
    where: str = ""

    def describe_error(self) -> str:
        """The exception's type, message and notes, and the frame that raised it (empty without one)."""
        if self.error is None:
            return ""
        notes = " ".join(getattr(self.error, "__notes__", []))
        frames = traceback.extract_tb(self.error.__traceback__)
        origin = f" [at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}]" if frames else ""
        return f"{type(self.error).__name__} in {self.where}: {self.error} {notes}{origin}".strip()


class _LossRecorder(Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def batch_end(self, state: State, logger: Logger) -> None:
        self.losses.append(float(torch.as_tensor(state.loss).detach().sum()))


def _image_setting() -> tuple[ComposerModel, DataLoader[Any]]:
    torch.manual_seed(_SEED)
    model = cifar_resnet(depth=8, num_classes=_NUM_CLASSES)
    data = SyntheticClassificationDataset(_NUM_SAMPLES, _IMAGE_SHAPE, _NUM_CLASSES, seed=_SEED)
    return model, DataLoader(data, batch_size=_BATCH_SIZE)


def _language_setting() -> tuple[ComposerModel, DataLoader[Any]]:
    torch.manual_seed(_SEED)
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=32))
    return model, DataLoader(ByteTextDataset(_TEXT, seq_len=_SEQ_LEN), batch_size=_BATCH_SIZE)


def run_pair(run: Run) -> Outcome:
    """Trains a fresh, seeded model with ``algorithms=[first, second]`` for 2 batches and reports what happened."""
    model, dataloader = _language_setting() if run.language else _image_setting()
    algorithms = [SETTINGS[run.first].build(model), SETTINGS[run.second].build(model)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    steps = [0]
    # Counts the steps of the optimizer that holds the model's parameters; SAM wraps it and steps it once per step.
    optimizer.register_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    recorder = _LossRecorder()
    try:
        trainer = Trainer(
            model=model,
            train_dataloader=dataloader,
            max_duration=_MAX_DURATION,
            algorithms=algorithms,
            optimizers=optimizer,
            grad_accum=run.grad_accum,
            callbacks=[recorder],
            device="cpu",
            seed=_SEED,
            progress_bar=False,
            log_to_console=False,
        )
    except ValueError as e:
        return Outcome(run, "refused", error=e, where="constructor")
    except Exception as e:
        return Outcome(run, "crashed", error=e, where="constructor")
    try:
        trainer.fit()
    except Exception as e:
        status = "crashed"
        error: BaseException | None = e
    else:
        status, error = "trained", None
    finally:
        trainer.close()
    traced = {trace.name for trace in trainer.engine.traces.values()}
    return Outcome(run, status, steps[0], recorder.losses, traced, error, "fit" if error is not None else "")


def problem(outcome: Outcome) -> str | None:
    """What is wrong with ``outcome``, or None if the pair composed (or was refused, as :data:`EXPECTED_REFUSALS`
    allows, with a message naming both methods)."""
    run = outcome.run
    names = (ALGORITHMS[run.first].__name__, ALGORITHMS[run.second].__name__)
    if outcome.status == "refused":
        message = str(outcome.error)
        if frozenset({run.first, run.second}) not in EXPECTED_REFUSALS:
            return f"refused, but the pair is not in EXPECTED_REFUSALS: {outcome.describe_error()}"
        if not all(name in message for name in names):
            return f"refused with a message that does not name both {names[0]} and {names[1]}: {message}"
        return None
    if outcome.status == "crashed":
        return f"crashed: {outcome.describe_error()}"
    found = []
    if outcome.steps < 2:
        found.append(f"took {outcome.steps} optimizer step(s), fewer than 2")
    if not outcome.losses or not all(math.isfinite(loss) for loss in outcome.losses):
        found.append(f"losses {outcome.losses} are not all finite")
    missing = [name for name in names if name not in outcome.traced]
    if missing:
        found.append(f"the Engine's traces show no apply of {missing} (traced: {sorted(outcome.traced)})")
    return "; ".join(found) or None


@contextmanager
def single_threaded() -> Iterator[None]:
    """Runs the block with one torch thread (these tiny models gain nothing from two), then restores the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
