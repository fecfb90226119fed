"""The Trainer's side of checkpoints: its save and load settings, what to load at start-up, and where an epoch
resumes.

Exact resumption rests on one rule: the data an epoch yields depends only on the random states just before its
iterator was created (a ``DataLoader(shuffle=True)`` without a generator seeds its sampler and its workers from the
global torch generator at that moment). So every epoch records those states (:func:`epoch_batches`), checkpoints
carry them, and an epoch resumed at batch ``k`` restores them, rebuilds the iterator, draws and drops the ``k``
batches already trained (only their indices, where the samples depend on their index alone), and only then restores
the random states of the moment the checkpoint was saved.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import itertools
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.callbacks.checkpoint_saver import CheckpointSaver, SaveInterval
from composer.core.state import State
from composer.core.time import Time
from composer.trainer.skipped_batches import skipping_iterator
from composer.utils import dist
from composer.utils.checkpoint import (
    CheckpointError,
    RemoteCheckpointFolder,
    format_checkpoint_name,
    is_sharded_checkpoint,
    read_checkpoint,
    restore_checkpoint,
)
from composer.utils.checkpoint.folders import CheckpointFolder, LocalFolder, RemoteFolder
from composer.utils.checkpoint.mirrored_folder import WEIGHTS_ONLY, MirroredFolder
from composer.utils.checkpoint.naming import (
    DEFAULT_FILENAME,
    DEFAULT_LATEST_FILENAME,
    SHARDED_FILENAME,
    SHARDED_LATEST_FILENAME,
)
from composer.utils.checkpoint.remote_folder import UNFINISHED_UPLOAD
from composer.utils.checkpoint.sharded_mirror import download_on_every_node
from composer.utils.object_store import ObjectStoreURL, StorageOptions, is_url, parse_location, redact

__all__ = ["Checkpointing", "epoch_batches", "newest_readable", "run_config"]

log = logging.getLogger(__name__)

Refused = list[tuple[str, CheckpointError]]


class Checkpointing:
    """The Trainer's checkpoint arguments (see :class:`~composer.trainer.Trainer` for each), which the Trainer checks
    with the others (:mod:`composer.trainer.arguments`); the store of an ``s3://`` folder is checked here.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> settings = Checkpointing(run_name="demo", save_folder=folder + "/{run_name}", autoresume=True)
        >>> settings.save_folder.endswith("demo")
        True
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> settings.load(state) is None  # nothing saved yet: start from the beginning
        True
    """

    def __init__(
        self,
        *,
        run_name: str | None = None,
        save_folder: str | None = None,
        save_filename: str = DEFAULT_FILENAME,
        save_latest_filename: str | None = DEFAULT_LATEST_FILENAME,
        save_interval: SaveInterval = "1ep",
        save_num_checkpoints_to_keep: int = -1,
        save_overwrite: bool = False,
        save_weights_only: bool = False,
        load_path: str | os.PathLike[str] | None = None,
        load_weights_only: bool = False,
        load_strict_model_weights: bool = True,
        load_ignore_keys: Sequence[str] | None = None,
        autoresume: bool = False,
        storage_options: StorageOptions | Mapping[str, Any] | None = None,
        on_upload_failure: str = "raise",
        sharded: bool = False,
    ) -> None:
        # The values were checked with the Trainer's other arguments (composer.trainer.arguments).
        self.on_upload_failure = on_upload_failure
        self.run_name = run_name if run_name is not None else _new_run_name()
        self.storage_options = StorageOptions.from_input(storage_options)
        self.save_folder = None if save_folder is None else format_checkpoint_name(save_folder, run_name=self.run_name)
        # An s3:// save_folder: checkpoints are written to a local folder, then uploaded (checked now, before any
        # training: the scheme, the URL, the credentials, the bucket, and that objects can be written).
        self.remote: RemoteCheckpointFolder | None = None
        if self.save_folder is not None:
            location = parse_location(self.save_folder, "save_folder")
            if isinstance(location, ObjectStoreURL):
                self.remote = RemoteCheckpointFolder.open(location, self.storage_options, "save_folder", write=True)
            else:
                self.save_folder = str(location)
        self._remote_load: tuple[RemoteCheckpointFolder, str] | None = None  # an s3:// load_path: folder, name
        self.load_path = self._parse_load_path(load_path)
        self.sharded = sharded
        if sharded:  # a sharded checkpoint is a folder: the default names without the file suffix
            save_filename = SHARDED_FILENAME if save_filename == DEFAULT_FILENAME else save_filename
            if save_latest_filename == DEFAULT_LATEST_FILENAME:
                save_latest_filename = SHARDED_LATEST_FILENAME
        self.save_filename = save_filename
        self.save_latest_filename = save_latest_filename
        self.save_interval = save_interval
        self.save_num_checkpoints_to_keep = save_num_checkpoints_to_keep
        self.save_overwrite = save_overwrite
        self.save_weights_only = save_weights_only
        self.load_weights_only = load_weights_only
        self.load_strict_model_weights = load_strict_model_weights
        self.load_ignore_keys = list(load_ignore_keys or [])
        self.autoresume = autoresume
        self.loaded_path: Path | None = None
        self.saver: CheckpointSaver | None = None  # made by make_saver

    def _parse_load_path(self, load_path: str | os.PathLike[str] | None) -> Path | None:
        """``load_path`` as a local path; an ``s3://`` one opens its folder in the store (checked now, before any
        training) into ``_remote_load`` and gives None."""
        if load_path is None or not is_url(str(load_path)):
            return None if load_path is None else Path(load_path)
        location = parse_location(str(load_path), "load_path")
        if not isinstance(location, ObjectStoreURL):
            return Path(location)
        parent, _, name = location.prefix.rpartition("/")
        if not name:
            raise ValueError(
                f"load_path={redact(str(load_path))!r} names a whole bucket; give the checkpoint's key "
                "(s3://BUCKET/PATH/ep1-ba6-rank0.pt) or the folder that holds it (s3://BUCKET/PATH)."
            )
        folder = RemoteCheckpointFolder.open(
            ObjectStoreURL(location.bucket, parent), self.storage_options, "load_path", write=False
        )
        self._remote_load = (folder, name)
        return None

    def make_saver(self, metadata: Mapping[str, Any], check_finite: bool = True) -> CheckpointSaver | None:
        """The callback that saves checkpoints (None without ``save_folder``); ``check_finite``: the Trainer's."""
        if self.save_folder is None:
            return None
        self.saver = CheckpointSaver(
            folder=self.save_folder if self.remote is None else str(self.remote.local_folder),
            filename=self.save_filename,
            latest_filename=self.save_latest_filename,
            save_interval=self.save_interval,
            num_checkpoints_to_keep=self.save_num_checkpoints_to_keep,
            overwrite=self.save_overwrite or self.autoresume,
            weights_only=self.save_weights_only,
            run_name=self.run_name,
            metadata=metadata,
            check_finite=check_finite,
            remote=self.remote,
            sharded=self.sharded,
            on_upload_failure=self.on_upload_failure,
        )
        return self.saver

    def load(self, state: State) -> Path | None:
        """Restores the newest valid checkpoint in ``save_folder`` (with ``autoresume``), else ``load_path``.

        With ``autoresume``, checkpoints that cannot be resumed (damaged, or weights only) are skipped with one
        warning that lists them. If the folder holds checkpoints of this run and none can be resumed, it raises
        :class:`~composer.utils.checkpoint.CheckpointError` listing each and why, rather than train from the start
        over them; ``save_overwrite=True`` allows that (then ``load_path``, if given, or the start).

        Call it once the state's optimizers, schedulers and grad scaler exist.

        Raises:
            CheckpointError: With ``autoresume``, if no checkpoint of this run in ``save_folder`` can be resumed and
                ``save_overwrite`` is False; or if ``load_path`` cannot be read.

        Returns:
            Path | None: The checkpoint loaded, if any.
        """
        if self.autoresume:
            path = self._resume(state)
            if path is not None:
                return path
            log.info("autoresume: no checkpoint in %s to resume from; training from the start.", self.save_folder)
        if self.sharded and self._remote_load is not None:
            # A sharded checkpoint's folder in the store: checked complete, downloaded by each node's first rank and
            # verified, then loaded like a local one.
            remote, name = self._remote_load
            self.load_path, self._remote_load = download_on_every_node(remote, name), None
        if self.load_path is not None or self._remote_load is not None:
            path, checkpoint = self._read_load_path()
            restore_checkpoint(
                state,
                _without_budget(checkpoint, state),
                weights_only=self.load_weights_only,
                strict=self.load_strict_model_weights,
                ignore_keys=self.load_ignore_keys,
                path=path,
            )
            log.info("Loaded %s from %s.", "weights" if self.load_weights_only else "checkpoint", path)
            self.loaded_path = path
            if not self.load_weights_only:
                _warn_if_inexact(state)
        return self.loaded_path

    def _resume(self, state: State) -> Path | None:
        """Autoresume: restores the newest checkpoint of this run that can be resumed (None if there is none)."""
        folder = self._resume_folder()
        collective = isinstance(folder, MirroredFolder)  # every rank walks it alike; else rank 0 chooses for all
        found, refused = newest_readable(folder, whole=True) if collective or state.rank == 0 else (None, [])
        chosen = None if found is None else str(found[0])
        reasons = [(Path(name), error.reason) for name, error in refused]
        error = self._error_if_none(chosen, reasons)
        if not collective:
            chosen, error = dist.broadcast_object_list([chosen, error])
        if error is not None:
            raise CheckpointError(error)
        if reasons and state.rank == 0:  # one warning for them all
            outcome = f"resumes from {chosen}" if chosen is not None else "is training from the start"
            warnings.warn(
                f"autoresume skips {len(reasons)} checkpoint(s) in {self.save_folder} that cannot be resumed "
                f"and {outcome}{' (save_overwrite=True)' if chosen is None else ''}: {_listing(reasons)}",
                stacklevel=4,
            )
        if chosen is None:
            return None
        path = Path(chosen)
        checkpoint = found[1] if found is not None else read_checkpoint(path)
        with _of_this_model(path, self.save_folder):
            restore_checkpoint(state, _without_budget(checkpoint, state), path=path)
        log.info("autoresume: resuming from %s at %s.", path, state.timer)
        self.loaded_path = path
        _warn_if_inexact(state)
        folder.catch_up()  # a store: the newer local checkpoints it lacks are uploaded
        return path

    def _resume_folder(self) -> CheckpointFolder:
        """Where autoresume looks: the saver's folder; in a store, with every rank's local folder besides."""
        assert self.save_folder is not None
        if self.saver is not None:
            folder = self.saver.destination
        elif self.remote is not None:
            folder = RemoteFolder(self.remote, self.remote.local_folder, self.save_filename, self.run_name)
        else:
            folder = LocalFolder(self.save_folder, self.save_filename, self.run_name)
        return MirroredFolder(folder) if isinstance(folder, RemoteFolder) else folder

    def _read_load_path(self) -> tuple[Path, dict[str, Any]]:
        """``load_path`` read back; for a folder, its newest checkpoint that reads back (and holds the whole training
        state, unless ``load_weights_only``), by autoresume's rule over names that fit ``save_filename``; an
        ``s3://`` one: the object itself, downloaded and verified, or if no object has that key, the folder of that
        name."""
        if self._remote_load is not None:
            store, name = self._remote_load
            if store.store.head(store.url.key(name)) is not None:
                path = store.download(name)
                return path, read_checkpoint(path)
            inner = RemoteCheckpointFolder(store.url.join(name), store.store, store.local_folder / name)
            folder: CheckpointFolder = RemoteFolder(inner, inner.local_folder, self.save_filename, self.run_name)
        else:
            assert self.load_path is not None
            if not self.load_path.is_dir() or is_sharded_checkpoint(self.load_path):
                return self.load_path, read_checkpoint(self.load_path)
            folder = LocalFolder(self.load_path, self.save_filename, self.run_name)
        found, refused = newest_readable(folder, whole=not self.load_weights_only)
        if self._remote_load is None:
            for name, error in refused:
                if error.reason != WEIGHTS_ONLY:
                    warnings.warn(
                        f"load_path={folder.location!r} is a folder; skipping {folder.local_path(name)}, trying the "
                        f"one before: {error}",
                        stacklevel=4,
                    )
        if found is None:
            raise FileNotFoundError(self._no_checkpoint_in(folder, refused))
        log.info("load_path=%r is a folder; loading its newest checkpoint, %s.", folder.location, found[0].name)
        return found

    def _no_checkpoint_in(self, folder: CheckpointFolder, refused: Refused) -> str:
        if isinstance(folder, RemoteFolder):
            problems = "; ".join(f"{name}: {error.reason}" for name, error in refused)
            return (
                f"load_path={folder.location!r} is neither an object nor a folder holding a readable checkpoint named "
                f"like save_filename={self.save_filename!r}"
                + (f" (refused: {problems})" if problems else "")
                + ". Pass the checkpoint's full key, for example s3://BUCKET/PATH/ep1-ba6-rank0.pt."
            )
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.local_folder.iterdir())
        listing = ", ".join(entries[:20]) + (f", ... ({len(entries)} in all)" if len(entries) > 20 else "")
        kind = "checkpoint" if self.load_weights_only else "checkpoint with the whole training state"
        return (
            f"load_path={folder.location!r} is a folder, and it holds no readable {kind} named like "
            f"save_filename={self.save_filename!r}. It holds: {listing or 'nothing'}. Pass the checkpoint file "
            "itself as load_path (or save_filename, when the checkpoints were saved under another name pattern)."
        )

    def _error_if_none(self, chosen: str | None, refused: Sequence[tuple[Path, str]]) -> str | None:
        """Why autoresume stops when it found nothing to resume from and refused checkpoints of this run; a sharded
        folder whose upload never finished (what a run stopped in the middle of an upload leaves) is passed over like
        the others, but is no reason to stop."""
        if chosen is not None or self.save_overwrite or all(why == UNFINISHED_UPLOAD for _, why in refused):
            return None
        return self._none_resumable(refused)

    def _none_resumable(self, refused: Sequence[tuple[Path, str]]) -> str:
        return (
            f"autoresume found {len(refused)} checkpoints of this run in {self.save_folder}, and none can be resumed: "
            f"{_listing(refused)}. Training from the start would write over them, so it stops instead. To fix: put a "
            "sound checkpoint of this run back into the folder, or pass load_path= to one (and save to another "
            "save_folder), or pass save_overwrite=True to train from the start and write over them."
        )


def newest_readable(folder: CheckpointFolder, *, whole: bool) -> tuple[tuple[Path, dict[str, Any]] | None, Refused]:
    """The newest checkpoint of ``folder`` that reads back (and, with ``whole``, holds the whole training state), and
    the newer ones refused on the way, each with why: one walk of :meth:`~CheckpointFolder.newest_first`.

    Args:
        folder (CheckpointFolder): Where to look (a :class:`~composer.utils.checkpoint.mirrored_folder.MirroredFolder`
            is walked on every rank alike: a collective).
        whole (bool): Pass over checkpoints that hold only model weights.

    Returns:
        tuple: ``(path, checkpoint)`` or None, and the refused ``(name, CheckpointError)`` pairs, newest first.

    Example:
        >>> import tempfile
        >>> newest_readable(LocalFolder(tempfile.mkdtemp(), "ep{epoch}-ba{batch}.pt"), whole=True)
        (None, [])
    """
    refused: Refused = []
    for name in folder.newest_first():
        try:
            path = folder.open(name)
            checkpoint = read_checkpoint(path)
        except CheckpointError as e:
            refused.append((name, e))
            continue
        if whole and checkpoint["metadata"].get("weights_only", False):
            refused.append((name, CheckpointError(f"{path} holds only model weights.", reason=WEIGHTS_ONLY)))
            continue
        return (path, checkpoint), refused
    return None, refused


def _listing(refused: Sequence[tuple[Path, str]]) -> str:
    return "; ".join(f"{path.name}: {reason}" for path, reason in refused)


def _warn_if_inexact(state: State) -> None:
    loader = state.train_dataloader
    if getattr(loader, "persistent_workers", False) and getattr(loader, "num_workers", 0) > 0:
        warnings.warn(
            "The training DataLoader keeps persistent_workers, whose random states carry over from epoch to epoch and "
            "are not in the checkpoint: random transforms in its workers will differ from the run that saved it. "
            "For an exact resume, use persistent_workers=False.",
            stacklevel=3,
        )


def _without_budget(checkpoint: dict[str, Any], state: State) -> dict[str, Any]:
    """The checkpoint without its training budget: the run's arguments set ``max_duration`` and the scale schedule
    ratio (so a relaunch with a longer duration trains on, and algorithms that change the budget at ``INIT`` or
    ``FIT_START`` do so once); the checkpoint supplies the progress (the timer)."""
    saved = dict(checkpoint["state"])
    budget = ("max_duration", "unscaled_max_duration", "scale_schedule_ratio")
    if saved.get("max_duration", str(state.max_duration)) != str(state.max_duration):
        log.info(
            "max_duration=%s from the arguments replaces the checkpoint's %s.",
            state.max_duration,
            saved["max_duration"],
        )
    return {**checkpoint, "state": {k: v for k, v in saved.items() if k not in budget}}


def _new_run_name() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"


def epoch_batches(state: State, dataloader: Iterable[Any], steps_per_epoch: int | None) -> Iterator[Any]:
    """The batches the current epoch has still to train, in the order an uninterrupted run would see them.

    At the start of an epoch it records :meth:`State.capture_rng` in ``state.epoch_start_rng`` (before creating the
    iterator, which is when a shuffling DataLoader draws its order and worker seeds). After a checkpoint was loaded
    (``state.resume_rng`` is set) in the middle of an epoch, it restores the epoch-start states, rebuilds the
    iterator, draws the ``batch_in_epoch`` batches already trained and drops them (a loader of deterministic samples
    drops only their indices, reading none of them: :mod:`composer.trainer.skipped_batches`), then restores the
    states saved with the checkpoint; at an epoch boundary it restores those states first. A later ``fit`` of the
    same Trainer that continues an open epoch (the last one stopped mid-epoch) does the same with the states of this
    moment. The per-epoch cost is one snapshot of the random states; nothing happens per batch.

    Args:
        state (State): The training state.
        dataloader (Iterable): The training data.
        steps_per_epoch (int, optional): Batches per epoch (None: until the loader is exhausted).

    Example:
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> state.timer.on_batch_complete()  # one batch of this epoch is done
        >>> state.resume_rng = state.capture_rng()
        >>> batches = list(epoch_batches(state, ["a", "b", "c"], steps_per_epoch=None))
        >>> batches
        ['b', 'c']
    """
    done = state.timer.batch_in_epoch.value
    resume_rng, state.resume_rng = state.resume_rng, None
    if done and resume_rng is None and state.epoch_start_rng is not None:
        resume_rng = state.capture_rng()  # a later fit continues the open epoch: rebuild its order, then carry on
    if callable(getattr(dataloader, "start_epoch", None)):  # a stream positions itself: nothing is read twice
        return _positioned_batches(state, dataloader, steps_per_epoch, resume_rng)
    if done == 0:
        if resume_rng is not None:
            state.restore_rng(resume_rng)
        state.epoch_start_rng = state.capture_rng()
        return itertools.islice(dataloader, steps_per_epoch)
    remaining = None if steps_per_epoch is None else max(steps_per_epoch - done, 0)
    if remaining == 0:  # the checkpoint was taken after the epoch's last batch: nothing to replay
        if resume_rng is not None:
            state.restore_rng(resume_rng)
        return iter(())
    if resume_rng is not None and state.epoch_start_rng is not None:
        state.restore_rng(state.epoch_start_rng)
    iterator = skipping_iterator(dataloader, done)  # a loader of deterministic samples reads none of them
    if iterator is None:
        iterator = iter(dataloader)
        collections.deque(itertools.islice(iterator, done), maxlen=0)  # draw and drop the batches already trained
    if resume_rng is not None:
        state.restore_rng(resume_rng)
    return itertools.islice(iterator, remaining)


def _positioned_batches(
    state: State, dataloader: Any, steps_per_epoch: int | None, resume_rng: Mapping[str, Any] | None
) -> Iterator[Any]:
    """:func:`epoch_batches` of a loader with ``start_epoch(epoch, batches_done, samples_done, saved)`` (a stream that
    skips by itself): ``samples_done`` counts every rank's (the timer's), ``saved`` is what the loader's
    ``resume_state()`` gave the checkpoint loaded (:attr:`State.resume_data`, None otherwise). It returns the batches
    it has left if they are not ``steps_per_epoch - batches_done`` (resumed on another number of ranks), else None."""
    done = state.timer.batch_in_epoch.value
    if resume_rng is not None:
        state.restore_rng(resume_rng)
    if done == 0:
        state.epoch_start_rng = state.capture_rng()
    saved, state.resume_data = state.resume_data, None
    left = dataloader.start_epoch(state.timer.epoch.value, done, state.timer.sample_in_epoch.value, saved)
    if left is None:
        left = None if steps_per_epoch is None else max(steps_per_epoch - done, 0)
    return itertools.islice(dataloader, left)


@contextlib.contextmanager
def _of_this_model(path: Path, folder: Any) -> Iterator[None]:
    """Autoresume's restore: a checkpoint whose weights (or optimizer states) do not fit the model, which the loading
    functions report as a ValueError, is another model's; the error names it and says what to do."""
    try:
        yield
    except CheckpointError:
        raise
    except ValueError as e:
        what = str(e).split(". ", 1)[0]  # what does not fit; the advice after it is for load_path, not for resuming
        raise CheckpointError(
            f"autoresume: {path} does not fit this run's model, so it belongs to another model ({what}). To fix: give "
            "this run another save_folder (or another run_name, where save_folder or save_filename holds "
            f"{{run_name}}), or remove that model's checkpoints from {folder}.",
            reason=f"belongs to another model ({what})",
        ) from e


def run_config(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The Trainer's arguments as plain values, stored in every checkpoint's metadata (objects become their repr).

    Example:
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> run_config({"max_duration": "2ep", "seed": 3, "model": model, "algorithms": None})
        {'max_duration': '2ep', 'seed': 3, 'model': 'ComposerClassifier', 'algorithms': None}
    """
    return {name: _plain(value) for name, value in arguments.items() if name != "self"}


def _plain(value: Any, depth: int = 0) -> Any:
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, (Time, os.PathLike)):
        return str(value)
    if isinstance(value, (list, tuple)) and depth == 0:
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, Mapping) and depth == 0:
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Callable) and hasattr(value, "__qualname__"):  # type: ignore[arg-type]
        return value.__qualname__
    text = repr(value)
    # Modules and loaders have long reprs: their class name says enough.
    return type(value).__name__ if "\n" in text or len(text) > 200 else text
