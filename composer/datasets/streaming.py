"""Shards streamed by LitData from a local folder or an S3-compatible store (``s3://bucket/prefix``).

The shards are LitData's own format (the ``index.json`` and ``chunk-*.bin`` files its ``optimize`` writer and
``BinaryWriter`` produce). :class:`StreamingShards` checks them when it is built, so that a missing shard, a shard of
the wrong size or a store that is down fails then, naming the shard, rather than mid-epoch. Its loader
(:class:`StreamLoader`, a ``litdata.StreamingDataLoader``) gives each rank and each DataLoader worker its own chunks,
which each downloads itself: nothing passes through rank 0.

The store is reached with the checkpoints' ``storage_options`` (:class:`~composer.utils.object_store.StorageOptions`):
the same endpoint and profile, credentials from the standard AWS chain, and requests bounded by the same
``retry_budget``: a chunk's download, which boto3's transfer manager tries up to 5 times, ends within about a quarter
of it (each request waits at most ``retry_budget / 40`` seconds, 1 to 60, and is sent at most 3 times). They are
handed to LitData's client as arguments; no environment variable is set. Downloaded shards are kept in the options'
``local_folder`` (default: a folder per bucket and prefix under the system's temporary folder).

Resuming mid-epoch reads nothing twice: the Trainer positions the stream from the checkpoint
(:meth:`StreamLoader.start_epoch`). With the same ranks, workers and batch size, the run ends with weights bitwise
equal to an uninterrupted run's; on another number of ranks (LitData's elastic resumption), each sample of the epoch
is trained once, none twice, within the limits :meth:`StreamLoader.start_epoch` gives.

Example:
    >>> import pathlib, tempfile
    >>> import torch
    >>> from litdata.streaming.writer import BinaryWriter
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> writer = BinaryWriter(str(folder / "shards"), chunk_size=8)
    >>> for i in range(20):
    ...     writer[i] = (torch.full((4,), float(i)), i % 2)
    >>> _ = writer.done()
    >>> writer.merge()
    >>> shards = StreamingShards(str(folder / "shards"))
    >>> len(shards)
    20
    >>> inputs, labels = next(iter(shards.dataloader(batch_size=5, train=False)))
    >>> inputs.shape, labels.tolist()
    (torch.Size([5, 4]), [0, 1, 0, 1, 0])
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from litdata import StreamingDataLoader, StreamingDataset

from composer.utils import dist
from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.s3 import S3ObjectStore, request_limits
from composer.utils.object_store.url import ObjectStoreURL, parse_location

__all__ = [
    "CHECKSUMS",
    "INDEX",
    "TRANSFER_ATTEMPTS",
    "StreamError",
    "StreamLoader",
    "StreamingShards",
    "file_sha256",
    "litdata_storage_options",
]

INDEX = "index.json"
"""The file of a shard folder that lists its shards (LitData's)."""
CHECKSUMS = "checksums.json"
"""The file ``composer data convert`` writes next to the index: each shard's sha256 (``{'sha256': {name: hex}}``)."""
_ASYNC_PREFETCH = "LITDATA_ASYNC_CHUNK_PREFETCH"


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


TRANSFER_ATTEMPTS = 5
"""How many times boto3's transfer manager (``TransferConfig.num_download_attempts``, its default, which LitData's
chunk downloads use) tries to download a chunk."""


def litdata_storage_options(options: StorageOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """LitData's ``storage_options`` (boto3 client arguments) and ``session_options`` for the checkpoints' options.

    Example:
        >>> client, session = litdata_storage_options(StorageOptions(endpoint_url="http://127.0.0.1:5000"))
        >>> client["endpoint_url"], client["config"].connect_timeout, session
        ('http://127.0.0.1:5000', 3.0, {})
    """
    from botocore.config import Config

    # LitData downloads a chunk with boto3's transfer manager, which tries a download up to TRANSFER_ATTEMPTS times,
    # each a request under these limits: the requests share the budget, so that a chunk fails within it.
    timeout, attempts = request_limits(options.retry_budget / TRANSFER_ATTEMPTS)
    config = Config(
        retries={"mode": "standard", "total_max_attempts": attempts},
        connect_timeout=timeout,
        read_timeout=timeout,
        s3={"addressing_style": "path"} if options.endpoint_url is not None else {},
    )
    client: dict[str, Any] = {"config": config, "region_name": options.region_name or "us-east-1"}
    if options.endpoint_url is not None:
        client["endpoint_url"] = options.endpoint_url
    session = {} if options.profile_name is None else {"profile_name": options.profile_name}
    return client, session


def chunks_through_boto3(worker_id: int) -> None:
    """The loader's ``worker_init_fn``: the worker (a process of this loader alone) downloads through boto3.

    LitData otherwise fetches chunks through obstore, whose client has its own timeout (200 s) and refuses ``http://``
    endpoints. Two of LitData's switches turn it off, set in the worker only: its rule that obstore is not used in a
    process forked after another one started it, and ``LITDATA_ASYNC_CHUNK_PREFETCH=0`` (the asynchronous prefetch).
    A stream from the store therefore always reads in at least one worker (LitData downloads in a background thread
    of the reading process, so a switch set in this process would have to stay set for the whole epoch).
    """
    from litdata.streaming import downloader

    del worker_id
    downloader._OBSTORE_INIT_PID = -1
    os.environ[_ASYNC_PREFETCH] = "0"


class StreamError(RuntimeError):
    """A shard that could not be read in the middle of an epoch (gone from the store, the store down past
    ``retry_budget``, a shard unreadable): the message names the shard, the recipe key (or argument) and the cause.
    The run stops at that batch rather than train on the part of the epoch it could read."""


def stream_error(error: Exception, key: str, path: str, shards: Sequence[str]) -> StreamError:
    """The :class:`StreamError` for ``error``, raised while streaming ``path`` (given by ``key``).

    The shard is the first of ``shards`` the error's text names (LitData names the chunk file it waited for; an error
    from a DataLoader worker carries the worker's traceback in its text); the cause is the text's last line.
    """
    text = str(error).strip()
    named = [name for name in shards if name in text]
    what = f"shard {named[0]}" if named else "the shards"
    cause = text.splitlines()[-1] if text else type(error).__name__
    return StreamError(
        f"{key}: reading {what} of {path} failed ({cause}); the run stops there. Check that the store answers "
        "and holds the shard (`composer data convert` writes the shards again), then run the same command again: "
        "with autoresume it continues from the last checkpoint."
    )


class StreamLoader(StreamingDataLoader):  # type: ignore[misc]  # LitData is untyped
    """LitData's ``StreamingDataLoader``, positioned by the Trainer at each epoch (:meth:`start_epoch`); its workers
    download chunks through the boto3 client of :func:`litdata_storage_options` (:func:`chunks_through_boto3`).

    An error while streaming, in this process or a worker, is raised as a :class:`StreamError` naming the shard and
    the key of its ``source`` (the recipe key, or the argument, that gave the shards; their path and names).
    """

    source: tuple[str, str, Sequence[str]] = ("path", "", ())

    def __init__(
        self, dataset: StreamingDataset, batch_size: int, num_workers: int, seed: int = 0, num_samples: int = 0
    ) -> None:
        worker_init = chunks_through_boto3 if num_workers else None
        # Its own generator: starting an iterator draws the workers' seeds from it, never from torch's global one
        # (which a run resumed mid-epoch has already advanced past that draw).
        self.seed, generator = seed, torch.Generator().manual_seed(seed)
        super().__init__(
            dataset, batch_size=batch_size, num_workers=num_workers, worker_init_fn=worker_init, generator=generator
        )
        self.num_samples = num_samples  # in the shards: bounds the batches left after a resume on another layout
        self.epoch_layout = self.layout()

    def layout(self) -> dict[str, int]:
        """What LitData's order of an epoch depends on besides the seed: ranks, nodes, workers, batch size."""
        env = self.dataset.distributed_env
        assert self.batch_size is not None
        return {
            "world_size": int(env.world_size),
            "num_nodes": int(env.num_nodes),
            "num_workers": max(int(self.num_workers), 1),  # LitData's: no worker is one
            "batch_size": int(self.batch_size),
        }

    def resume_state(self) -> dict[str, int]:
        """The :meth:`layout` the current epoch started with, which the Trainer saves in its checkpoints."""
        return dict(self.epoch_layout)

    def start_epoch(
        self, epoch: int, batches_done: int, samples_done: int | None = None, saved: dict[str, int] | None = None
    ) -> int | None:
        """The next iteration streams epoch ``epoch`` (0-based) from batch ``batches_done`` on, reading nothing before.

        The position is LitData's own state (its ``load_state_dict``), computed from what the Trainer's checkpoint
        holds: the epoch, the batches and samples done, and the layout the epoch started with (:meth:`resume_state`).
        With this run's layout, every worker replays its own part: the rest of the epoch is the uninterrupted run's.
        With another one (other ranks, workers or batch size), LitData's elastic resumption rebuilds the epoch's
        order from the saved layout, drops the ``samples_done`` samples trained and deals the rest out to this run's
        ranks and workers: each sample of the epoch is trained once, none twice (the weights differ from an
        uninterrupted run's, since the batches do). Under several ranks the rest is cut to whole steps
        (``drop_last``). From fewer ranks to more, LitData rounds ``samples_done`` down to whole steps of the new
        ranks, so up to a batch per rank is trained again unless the checkpoint is at such a step; on a number of
        ranks that divides the old one (2 to 1, 8 to 4) it is exact.

        Args:
            epoch: Epochs completed.
            batches_done: Batches of this epoch already trained on each rank (0 at the start of an epoch).
            samples_done: Samples of this epoch already trained on all ranks (default: ``batches_done`` batches on
                each rank of the epoch's layout).
            saved: The :meth:`resume_state` of the checkpoint resumed from (default: the layout this loader started
                the epoch with).

        Returns:
            int | None: An upper bound on the batches left on each rank after a resume on another layout (the stream
            ends by itself), else None (the epoch's batches less ``batches_done``).
        """
        assert self.generator is not None and self.batch_size is not None
        self.generator.manual_seed(self.seed + epoch)  # the workers' seeds depend on the seed and the epoch alone
        self.restore = False
        self.current_epoch = epoch  # iterating opens epoch + 1, LitData's numbering (it counts from 1)
        dataset = self.dataset
        assert isinstance(dataset, StreamingDataset)
        layout = self.layout()
        dataset.drop_last = layout["world_size"] > 1
        dataset._force_override_state_dict = False
        if batches_done == 0:
            self.epoch_layout = layout
            return None
        started = self.epoch_layout = dict(saved or self.epoch_layout)
        per_rank = batches_done * started["batch_size"]
        samples_done = per_rank * started["world_size"] if samples_done is None else samples_done
        dataset.reset_state_dict()
        dataset.set_epoch(epoch + 1)
        state = dataset.state_dict(batches_done * self.batch_size, self.num_workers, self.batch_size)
        if started == layout and samples_done == per_rank * layout["world_size"]:
            self.load_state_dict(
                {
                    "dataset": state,
                    "current_epoch": epoch + 1,
                    "num_samples_yielded": per_rank,
                    "latest_worker_idx": (batches_done - 1) % layout["num_workers"],
                }
            )
            return None
        self.load_state_dict({"dataset": _elastic_state(state, started, samples_done), "current_epoch": epoch + 1})
        # The epoch's order is rebuilt as the saved layout dealt it (with its drop_last); this run deals out the rest.
        dataset._force_override_state_dict = dataset.drop_last != (started["world_size"] > 1)
        per_step = layout["world_size"] * layout["batch_size"]
        return -(-max(self.num_samples - samples_done, 0) // per_step) + layout["num_workers"]  # + partial batches

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from super().__iter__()
        except Exception as error:
            raise stream_error(error, *self.source) from error


def _elastic_state(state: dict[str, Any], started: Mapping[str, int], samples_done: int) -> dict[str, Any]:
    """LitData's dataset state for a resume on another layout: the epoch began with ``started``, and the samples of
    the first ``samples_done`` places of its order are trained (LitData's ``resume_mode: elastic``)."""
    workers = max(started["num_workers"], 1)
    return {
        **state,
        "num_samples_yielded": 0,  # nothing of the rebuilt order to replay per worker: it drops samples_done
        "sample_in_epoch": samples_done,
        "resume_mode": "elastic",
        "drop_last": started["world_size"] > 1,
        "world_size": started["world_size"],
        "num_workers": workers,
        "batch_size": started["batch_size"],
        "initial_world_size": started["world_size"],
        "initial_num_workers": workers,
        "initial_batch_size": started["batch_size"],
        "initial_num_nodes": started["num_nodes"],
        "num_canonical_nodes": started["world_size"],
    }


class StreamingShards:
    """LitData shards in a local folder or in an S3-compatible store, checked when built, streamed by rank and worker.

    Args:
        path: The folder of the shards (its ``index.json`` and chunk files), local or ``s3://bucket/prefix``.
        storage_options: For ``s3://``: the checkpoints' ``storage_options`` (endpoint_url, region_name,
            profile_name, retry_budget, local_folder: where downloaded shards are kept).
        num_workers: DataLoader worker processes; each streams its own chunks (from ``s3://``, at least 1).
        shuffle_seed: The seed of the training order, which is drawn again each epoch (null: the run's seed).
        verify_checksums: Hash every shard when built and compare it with the ``checksums.json`` that ``composer
            data convert`` writes (this reads, or for ``s3://`` downloads, every shard once).

    Raises:
        ValueError: If the index is missing or unreadable, or a shard is missing or not of the size the index gives
            (the message names the shard).
        composer.utils.object_store.ObjectStoreError: If the store cannot be reached within ``retry_budget``.
    """

    def __init__(
        self,
        path: str,
        storage_options: dict[str, Any] | None = None,
        num_workers: int = 0,
        shuffle_seed: int | None = None,
        verify_checksums: bool = False,
    ) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers={num_workers!r} must be 0 (load in the main process) or more.")
        self.path, self.num_workers, self.shuffle_seed = path, num_workers, shuffle_seed
        self.options = StorageOptions.from_input(storage_options)
        self.location = parse_location(path, "path")
        index = self._check_local() if isinstance(self.location, Path) else self._check_remote(self.location)
        if verify_checksums:
            self._verify_checksums([chunk["filename"] for chunk in index["chunks"]])
        self.chunks: list[dict[str, Any]] = index["chunks"]

    def __len__(self) -> int:
        return sum(int(chunk["chunk_size"]) for chunk in self.chunks)

    def _read_index(self, text: str, where: str) -> dict[str, Any]:
        try:
            index = json.loads(text)
            chunks = index["chunks"]
            assert isinstance(chunks, list) and all({"filename", "chunk_bytes"} <= set(c) for c in chunks)
        except (ValueError, KeyError, TypeError, AssertionError):
            raise ValueError(
                f"path: {where} is not a LitData index (JSON with a 'chunks' list); write the shards with "
                "`composer data convert` or litdata.optimize."
            ) from None
        if not chunks:
            raise ValueError(f"path: {where} lists no shards: there is nothing to train on.")
        return dict(index)

    def _check_local(self) -> dict[str, Any]:
        assert isinstance(self.location, Path)
        index_path = self.location / INDEX
        if not index_path.is_file():
            raise ValueError(
                f"path: {self.location} holds no {INDEX}, so it is no folder of LitData shards; give the folder "
                "`composer data convert` wrote."
            )
        index = self._read_index(index_path.read_text(), str(index_path))
        sizes = {chunk["filename"]: int(chunk["chunk_bytes"]) for chunk in index["chunks"]}
        found = {name: (self.location / name).stat().st_size for name in sizes if (self.location / name).is_file()}
        self._check_sizes(sizes, found, str(self.location))
        return index

    def _check_remote(self, url: ObjectStoreURL) -> dict[str, Any]:
        store = S3ObjectStore(url.bucket, self.options)
        listed = {url.name_of(info.key): info.size for info in store.list_objects(url.key(""))}
        if INDEX not in listed:
            raise ValueError(f"path: {url} holds no {INDEX}, so it is no folder of LitData shards.")
        folder = self.options.local_folder_for(url)
        folder.mkdir(parents=True, exist_ok=True)
        store.download(url.key(INDEX), folder / INDEX)
        index = self._read_index((folder / INDEX).read_text(), f"{url}/{INDEX}")
        self._check_sizes({c["filename"]: int(c["chunk_bytes"]) for c in index["chunks"]}, listed, str(url))
        return index

    @staticmethod
    def _check_sizes(sizes: Mapping[str, int], found: Mapping[str, int], where: str) -> None:
        for name, size in sizes.items():
            if name not in found:
                raise ValueError(
                    f"path: shard {name} of {where} is missing ({INDEX} lists it); write the shards again."
                )
            if found[name] != size:
                raise ValueError(
                    f"path: shard {name} of {where} holds {found[name]} bytes, but {INDEX} says {size}: it is "
                    "damaged or from another write; write the shards again."
                )

    def _verify_checksums(self, names: list[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="composer-shards-") as scratch:
            if isinstance(self.location, Path):
                folder = self.location
            else:
                folder, store = Path(scratch), S3ObjectStore(self.location.bucket, self.options)
                for name in [CHECKSUMS, *names]:
                    store.download(self.location.key(name), folder / name)
            if not (folder / CHECKSUMS).is_file():
                raise ValueError(
                    f"verify_checksums: {self.path} holds no {CHECKSUMS}; write the shards with `composer data "
                    "convert`, or leave verify_checksums off."
                )
            expected = json.loads((folder / CHECKSUMS).read_text())["sha256"]
            for name in names:
                if expected.get(name) != file_sha256(folder / name):
                    raise ValueError(
                        f"path: shard {name} of {self.path} does not match its sha256 in {CHECKSUMS}: it is damaged "
                        "or from another write; write the shards again."
                    )

    def dataset(self, train: bool, seed: int = 0) -> StreamingDataset:
        """LitData's ``StreamingDataset`` over the shards: shuffled from the seed for training, in order otherwise."""
        remote = not isinstance(self.location, Path)
        client, session = litdata_storage_options(self.options) if remote else ({}, {})
        cache = str(self.options.local_folder_for(self.location)) if isinstance(self.location, ObjectStoreURL) else None
        world_size = dist.get_world_size()
        dataset = StreamingDataset(
            str(self.location).rstrip("/"),
            cache_dir=cache,
            shuffle=train,
            drop_last=world_size > 1,  # every rank as many samples, so that no rank waits for a batch in vain
            seed=seed if self.shuffle_seed is None else self.shuffle_seed,
            storage_options=client or None,
            session_options=session or None,
        )
        # This rank's place from the launcher, as the Trainer reads it: LitData reads torch.distributed if it is
        # already initialised, else WORLD_SIZE and GLOBAL_RANK (not torchrun's RANK), so a dataset built before the
        # process group would give every rank rank 0's part.
        nodes = max(1, world_size // dist.get_local_world_size())
        rank = dist.get_global_rank()
        dataset.distributed_env = type(dataset.distributed_env)(
            world_size=world_size, global_rank=rank, num_nodes=nodes
        )
        return dataset

    def dataloader(self, batch_size: int, train: bool, seed: int = 0, key: str = "path") -> StreamLoader:
        """The loader of the training (shuffled) or evaluation (in order) stream.

        Args:
            batch_size: Samples per batch.
            train: Shuffle, and let the Trainer position the stream each epoch.
            seed: The seed of the order, unless ``shuffle_seed`` is given.
            key: What an error while streaming names as the source of the shards (a recipe gives its key).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        # From the store, at least one worker: the downloads' switches are set there, never in this process.
        workers = self.num_workers if isinstance(self.location, Path) else max(1, self.num_workers)
        loader = StreamLoader(self.dataset(train, seed), batch_size, workers, seed, num_samples=len(self))
        loader.source = (key, self.path, [chunk["filename"] for chunk in self.chunks])
        return loader
