"""Loading a sharded checkpoint's tensors with ``torch.distributed.checkpoint`` (DCP), through its checked index.

:func:`load_tensors` reads DCP's index once, with :func:`~composer.utils.checkpoint.sharded_index.read_index`
(restricted unpickling, every entry checked against ``composer.pt``), before DCP plans anything, and hands DCP that
checked index: DCP never reads the index file itself, nor a rank's own index (``__<rank>.metadata``, which composer
never writes and DCP would fall back to). Each tensor DCP reads from a shard with ``torch.load(weights_only=True)``.
:class:`SafeLoadPlanner` unpickles a bytes item with ``weights_only=True`` too, where DCP's default planner uses a full
unpickler (defense in depth: the checked index holds no bytes item). Whatever fails while the shards are read (a
shard that is not DCP's, a tensor of another size) becomes a :class:`~composer.utils.checkpoint.CheckpointError`
naming the file and the item, on every rank that fails.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, ReadItem
from torch.futures import Future

from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.sharded_index import read_index, refusal

__all__ = ["SafeLoadPlanner", "load_tensors"]


def load_tensors(
    targets: dict[str, torch.Tensor],
    folder: str | os.PathLike[str],
    checkpoint: Mapping[str, Any],
    *,
    no_dist: bool = False,
) -> None:
    """Fills ``targets`` (DCP's flat names -> tensors, whole or this rank's shards) from the sharded checkpoint
    ``folder``, whose ``composer.pt`` is ``checkpoint``; a collective unless ``no_dist``.

    Args:
        targets (dict): The tensors to fill in place, by DCP's flat name (``'model/0.weight'``).
        folder (str | PathLike): The checkpoint's folder.
        checkpoint (Mapping): Its ``composer.pt``, as read with ``weights_only=True``.
        no_dist (bool): Load in this process alone (no process group).

    Raises:
        CheckpointError: If the index does not pass :func:`~composer.utils.checkpoint.sharded_index.read_index`,
            or a shard does not hold what the index says (the message names the file and the item).
    """
    from torch.distributed.checkpoint.state_dict_loader import load

    folder = Path(folder)
    reader = CheckedReader(folder, read_index(folder, checkpoint))
    try:
        load(targets, storage_reader=reader, planner=SafeLoadPlanner(), no_dist=no_dist)
    except CheckpointException as e:  # DCP gathered every rank's failure: this rank's own first, if it has one
        failures = sorted(e.failures.items(), key=lambda item: not isinstance(item[1][0], CheckpointError))
        rank, (error, _trace) = failures[0]
        if isinstance(error, CheckpointError):
            raise CheckpointError(str(error), reason=getattr(error, "reason", None)) from None
        problem = f"rank {rank} failed to read it ({type(error).__name__}: {_first_line(error)})"
        raise refusal(folder, problem, "could not be read") from None


class CheckedReader(FileSystemReader):
    """DCP's file reader over a checked index (read beforehand), turning read failures into
    :class:`~composer.utils.checkpoint.CheckpointError` naming the file and the item.

    Args:
        folder (Path): The checkpoint's folder.
        index (Metadata): Its index, from :func:`~composer.utils.checkpoint.sharded_index.read_index`.
    """

    def __init__(self, folder: Path, index: Metadata) -> None:
        super().__init__(folder)
        self.folder = folder
        self.index = index

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        if kwargs.get("rank") is not None:  # DCP's fallback to a rank's own index, which composer never writes
            raise refusal(self.folder, "DCP asked for a rank's own index, which composer never writes", "rank index")
        if getattr(self.index, "storage_meta", None) is None:
            self.index.storage_meta = StorageMeta()
        assert self.index.storage_meta is not None
        self.index.storage_meta.load_id = self.load_id
        return self.index

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        per_file: dict[str, list[ReadItem]] = {}
        for item in plan.items:
            per_file.setdefault(self.storage_data[item.storage_index].relative_path, []).append(item)
        for name, items in per_file.items():
            try:
                super().read_data(LoadPlan(items, plan.storage_data, plan.planner_data), planner).wait()
            except CheckpointError:
                raise
            except Exception as e:
                fqns = sorted({item.storage_index.fqn for item in items})
                problem = (
                    f"its shard file {name} does not hold the tensors its index places there ({fqns[:3]}"
                    f"{' ...' if len(fqns) > 3 else ''}): {type(e).__name__}: {_first_line(e)}"
                )
                raise refusal(self.folder, problem, f"shard file {name} holds no valid tensors") from None
        done: Future[None] = Future()
        done.set_result(None)
        return done


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner for a flat dict of tensors, except that a bytes item is unpickled with
    ``torch.load(weights_only=True)`` (tensors and plain values only), where the default uses a full unpickler.

    Example:
        >>> planner = SafeLoadPlanner()
        >>> planner.flatten_state_dict
        False
    """

    def __init__(self) -> None:
        super().__init__(flatten_state_dict=False)

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        name = read_item.dest_index.fqn
        try:
            self.state_dict[name] = torch.load(value, map_location="cpu", weights_only=True)
        except Exception as e:
            raise CheckpointError(
                f"Refusing the bytes item {name!r} of a sharded checkpoint: it holds Python objects other than tensors "
                f"and plain values, and unpickling them could run code ({type(e).__name__}: {_first_line(e)}).",
                reason=f"bytes item {name!r} holds Python objects",
            ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
