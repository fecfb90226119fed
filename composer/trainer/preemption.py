"""Stopping when the job is told to: SIGTERM (and SIGINT) while ``fit`` runs saves a checkpoint, then ends ``fit``.

Schedulers, spot instances and ``torchrun`` (passing on its own SIGTERM) send SIGTERM some seconds before they kill a
job. While :meth:`Trainer.fit <composer.trainer.Trainer.fit>` runs, and only then, :class:`Preemption` handles
SIGTERM and (unless ``handle_sigint=False``) SIGINT:

1. the handler only records the signal; the batch in progress is finished, with its events up to
   ``BATCH_CHECKPOINT`` (and an evaluation that is due);
2. with ``save_folder``, the Trainer's checkpoint saver saves that batch (unless it just did) and waits for the upload
   of it, and of those queued before it, until ``preemption_grace_period`` seconds after the signal; at that
   deadline an unfinished upload is stopped (the checkpoint stays in the local folder, which the next run's
   ``autoresume`` looks at too) and the message names the local file;
3. ``fit`` raises :class:`Preempted` (under SIGINT :class:`Interrupted`, also a ``KeyboardInterrupt``, so that a
   notebook stops as on any Ctrl-C), and, as after any error, the callbacks and loggers are closed.

``EPOCH_END``, ``EPOCH_CHECKPOINT`` and ``FIT_END`` do not fire: the run has not ended (a rerun with ``autoresume``
continues the epoch and fires them), and ``FIT_END`` is where callbacks finish a completed run (waiting for every
upload without a deadline, exporting, summarising), for which the grace period has no room. Without ``save_folder``
the same happens with nothing saved. A second signal ends the process at once, by that signal's default action. A
signal that arrives after the last batch's check (during the final evaluation or ``FIT_END``) lets ``fit`` finish,
final checkpoint included, and then raise :class:`Preempted`.

Launched on several processes, every rank stops after the same batch (a sharded checkpoint needs every rank's shards
of one batch), agreed without a collective of its own on most steps: see
:class:`~composer.distributed.stop_agreement.StopAgreement`. The ranks wait for each other while saving (up to the
grace period), so ``dist_timeout`` must be longer than it (300 s by default). The handlers are installed when
``fit`` starts and the previous ones put back when it ends; nothing is installed at import, and a ``fit`` outside the
main thread (where Python cannot set handlers) warns once and handles nothing. A handler set outside Python, or a
signal that is ignored (``SIG_IGN``: a background job's SIGINT), is left as it is. The
DataLoader workers started while ``fit`` runs get process groups of their own (:func:`shield_workers`): a signal to
the whole process group (torchrun passes SIGTERM on that way) would otherwise kill them, and the batch with them.

Library code never exits the process: the ``composer`` command turns :class:`Preempted` into exit status 75, and a
script of your own can do the same (``except Preempted: sys.exit(75)``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from composer.distributed.stop_agreement import StopAgreement
from composer.utils import dist
from composer.utils.object_store import UploadError

if TYPE_CHECKING:
    from composer.callbacks.checkpoint_saver import CheckpointSaver
    from composer.core.state import State

__all__ = ["Interrupted", "Preempted", "Preemption", "shield_workers"]

log = logging.getLogger(__name__)


class Preempted(BaseException):
    """``fit`` stopped because the process received SIGTERM (or SIGINT): see :mod:`composer.trainer.preemption`.

    A ``BaseException``, like ``KeyboardInterrupt`` and ``SystemExit``: it asks the program to end, so an
    ``except Exception`` meant for errors does not swallow it. The message says where the checkpoint is. Each argument
    but ``message`` is kept as an attribute of the same name.

    Args:
        message (str): What happened and where the checkpoint is.
        signal (signal.Signals | None): The signal this process received; None when another rank received one.
        batch (int): The batches trained when ``fit`` stopped (the checkpoint's batch).
        checkpoint (str | None): The checkpoint saved: a local path, or its ``s3://`` URL once uploaded; None when
            nothing was saved.
        complete (bool): Whether the checkpoint is complete where :attr:`checkpoint` says (False: the upload did not
            finish within the grace period or failed, and the checkpoint is at that local path).
    """

    def __init__(
        self,
        message: str,
        *,
        signal: signal.Signals | None = None,
        batch: int = 0,
        checkpoint: str | None = None,
        complete: bool = False,
    ) -> None:
        super().__init__(message)
        self.signal = signal
        self.batch = batch
        self.checkpoint = checkpoint
        self.complete = complete


class Interrupted(Preempted, KeyboardInterrupt):
    """:class:`Preempted` by SIGINT (Ctrl-C): also a ``KeyboardInterrupt``, which notebooks and scripts expect.

    Args:
        message (str): What happened and where the checkpoint is.
        signal (signal.Signals | None): ``SIGINT``; None when another rank received the signal.
        batch (int): The batches trained when ``fit`` stopped.
        checkpoint (str | None): The checkpoint saved, as for :class:`Preempted`.
        complete (bool): Whether the checkpoint is complete where ``checkpoint`` says.
    """


class _OwnProcessGroup:
    """A DataLoader's ``worker_init_fn`` that first moves the worker into a process group of its own (picklable, for
    spawned workers too)."""

    def __init__(self, worker_init_fn: Callable[[int], None] | None) -> None:
        self.worker_init_fn = worker_init_fn

    def __call__(self, worker_id: int) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not permitted, or not POSIX: the group stays
            os.setpgid(0, 0)
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)


def shield_workers(loaders: Iterable[object]) -> list[tuple[DataLoader[Any], Callable[[int], None] | None]]:
    """Puts each worker process that ``loaders`` start from now on in a process group of its own; returns each
    DataLoader changed with the ``worker_init_fn`` to put back.

    A signal sent to a whole process group (torchrun passing SIGTERM on, Slurm's scancel, a terminal's Ctrl-C) would
    reach the DataLoader workers too and kill them (torch's workers obey only their parent's SIGTERM; SIGINT ends
    them), and the main process would fail at its next batch ("DataLoader worker ... killed by signal") instead of
    saving one. In a group of their own they do not get it, and their main process still stops them as usual (its
    SIGTERM is sent to each of them, and they end when it ends). They move at start-up, in ``worker_init_fn``: one
    that gets the signal in its first milliseconds still dies with it.
    """
    shielded = []
    for loader in loaders:
        if isinstance(loader, DataLoader) and loader.num_workers > 0:
            shielded.append((loader, loader.worker_init_fn))
            loader.worker_init_fn = _OwnProcessGroup(loader.worker_init_fn)
    return shielded


class Preemption:
    """The Trainer's handling of SIGTERM and SIGINT while ``fit`` runs; see :mod:`composer.trainer.preemption`.

    Args:
        grace_period (float): Seconds from the signal by which the checkpoint must be saved and uploaded (the
            Trainer's ``preemption_grace_period``, checked with its other arguments).
        handle_sigint (bool): Handle SIGINT as well as SIGTERM.
        saver (CheckpointSaver, optional): The Trainer's checkpoint saver (``save_folder``); None saves nothing.
        agreement (StopAgreement, optional): How the ranks agree on the batch to stop after; default: unlaunched.

    Example:
        >>> preemption = Preemption(grace_period=20.0)
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> with preemption.watching(state):
        ...     signal.getsignal(signal.SIGTERM) == preemption.handle
        True
        >>> signal.getsignal(signal.SIGTERM) == preemption.handle
        False
    """

    def __init__(
        self,
        *,
        grace_period: float = 20.0,
        handle_sigint: bool = True,
        saver: CheckpointSaver | None = None,
        agreement: StopAgreement | None = None,
    ) -> None:
        self.grace_period = float(grace_period)
        self.signals = (signal.SIGTERM, signal.SIGINT) if handle_sigint else (signal.SIGTERM,)
        self.saver = saver
        self.agreement = agreement if agreement is not None else StopAgreement(launched=False)
        self.received: signal.Signals | None = None
        self.received_at: float | None = None
        self._pid: int | None = None  # the process that installed the handlers (not a DataLoader worker it forked)
        self._warned = False

    @contextlib.contextmanager
    def watching(self, state: State) -> Iterator[None]:
        """The block ``fit`` runs in: the handlers are installed on entry and the previous ones put back on exit.

        Raises:
            Preempted: On leaving the block normally, if a signal arrived after the last batch's check.
        """
        self.received = self.received_at = None
        self.agreement.reset()
        previous = self._install()
        loaders = [state.train_dataloader, *(evaluator.dataloader.dataloader for evaluator in state.evaluators)]
        shielded = shield_workers(loaders) if previous else []
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for loader, worker_init_fn in shielded:
                loader.worker_init_fn = worker_init_fn
        if self.received is not None:  # after the last batch's check: fit has completed
            saved = self.saver.saved_checkpoints if self.saver is not None else []
            final = f" Its final checkpoint is {saved[-1]}." if saved else ""
            message = f"fit received {self.received.name} after its last batch, and completed the run.{final}"
            raise self._exception(message, state, str(saved[-1]) if saved else None, True)

    def after_batch(self, state: State) -> None:
        """Called by the loop after every batch (after ``BATCH_CHECKPOINT``), on every rank.

        Raises:
            Preempted: If the ranks agree to stop: after the checkpoint of this batch is saved (and uploaded, or the
                grace period is over).
        """
        if not self.agreement.agreed():
            return
        deadline = (self.received_at if self.received_at is not None else time.monotonic()) + self.grace_period
        if self.saver is None:
            raise self._preempted(state, "; nothing was saved (no save_folder)", None, False)
        raise self._preempted(state, *self._save(state, deadline))

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: records the first signal; a second one ends the process at once."""
        del frame
        if os.getpid() != self._pid:  # a DataLoader worker forked during fit: its main process decides
            return
        name = signal.Signals(signum).name
        if self.received is not None:
            os.write(2, f"composer: {name} again: ending the process now, without saving.\n".encode())
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received, self.received_at = signal.Signals(signum), time.monotonic()
        self.agreement.requested = True
        then = "saving a checkpoint, then stopping" if self.saver is not None else "stopping (no save_folder)"
        os.write(2, f"composer: {name} received: finishing the batch, {then}; a second signal ends at once.\n".encode())

    # ---- private -----------------------------------------------------------------------------------------------

    def _install(self) -> dict[signal.Signals, Any]:
        """Installs :meth:`handle` for each signal handled; returns the handlers it replaced."""
        if threading.current_thread() is not threading.main_thread():
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"Trainer.fit runs outside the main thread ({threading.current_thread().name}), where Python "
                    "cannot set signal handlers: SIGTERM and SIGINT are not handled, and a preemption ends the process "
                    "without saving a checkpoint. Call fit from the main thread to save one when the job is stopped.",
                    stacklevel=4,
                )
            return {}
        self._pid = os.getpid()
        previous = {}
        for sig in self.signals:
            handler = signal.getsignal(sig)
            if handler is None or handler == signal.SIG_IGN:  # set outside Python, or ignored: left as it is
                continue
            previous[sig] = handler
            signal.signal(sig, self.handle)
        return previous

    def _save(self, state: State, deadline: float) -> tuple[str, str | None, bool]:
        """Saves (every rank), waits for the uploads until ``deadline``; returns (how it went, checkpoint, complete)
        as rank 0 knows them."""
        saver = self.saver
        assert saver is not None
        failure = None
        try:
            complete = saver.save_now(state, deadline)
        except UploadError as error:
            complete, failure = False, error
        newest = saver.saved_checkpoints[-1] if saver.saved_checkpoints else None
        remote = saver.remote
        if newest is None:
            outcome: tuple[str, str | None, bool] = ("; nothing was saved", None, False)
        elif remote is None:
            outcome = (f" and saved the checkpoint {newest}", str(newest), True)
        elif complete:
            url = str(remote.url.join(newest.relative_to(saver.folder_path or newest.parent).as_posix()))
            outcome = (f" and saved the checkpoint {url}", url, True)
        elif failure is not None or saver.store_outage is not None:
            why = (
                f"an upload failed ({failure})" if failure is not None else f"the store is down ({saver.store_outage})"
            )
            outcome = (f"; {why}, and the newest checkpoint is at {newest}", str(newest), False)
        else:
            outcome = (
                f"; the checkpoint is saved at {newest}, but its upload to {remote.url} did not finish within "
                f"preemption_grace_period={self.grace_period:g} s and was stopped. It stays on this machine: a run with "
                "autoresume=True here uploads it, and until then the store's newest checkpoint is older",
                str(newest),
                False,
            )
        message, checkpoint, complete = dist.broadcast_object_list(list(outcome))  # as rank 0 saw the upload
        return message, checkpoint, complete

    def _preempted(self, state: State, outcome: str, checkpoint: str | None, complete: bool) -> Preempted:
        signum, batch = self.received, int(state.timer.batch)
        cause = signum.name if signum is not None else "a signal to another rank"
        waited = (
            f", {time.monotonic() - self.received_at:.1f} s after the signal," if self.received_at is not None else ""
        )
        again = " Run the same command again (autoresume=True) to continue." if checkpoint is not None else ""
        message = f"fit stopped by {cause} after batch {batch}{waited}{outcome}.{again}"
        return self._exception(message, state, checkpoint, complete)

    def _exception(self, message: str, state: State, checkpoint: str | None, complete: bool) -> Preempted:
        log.info("%s", message)
        kind = Interrupted if self.received == signal.SIGINT else Preempted
        return kind(
            message, signal=self.received, batch=int(state.timer.batch), checkpoint=checkpoint, complete=complete
        )
