"""Uploads in the background: one worker thread, a bounded queue, and failures raised where the caller looks.

Training hands over a job (upload this file, then prune) and goes on; the worker runs the jobs in order. The queue
holds at most ``max_pending`` jobs, the one running included, so a store slower than training makes the next
:meth:`BackgroundUploader.submit` wait instead of letting local files pile up. A job that fails for good is kept and
raised by the next :meth:`~BackgroundUploader.submit`, :meth:`~BackgroundUploader.wait` or
:meth:`~BackgroundUploader.close`, so a failed upload is never lost silently; the jobs queued behind it are dropped
(their local files stay).

On Linux the worker runs at a lower CPU priority (``nice`` 10 by default): a thread's nice value is its own, and the
threads a multipart transfer starts inherit it, so on a machine whose cores are all busy training the upload takes
the time left over instead of slowing the steps down.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["BackgroundUploader", "UploadError"]

log = logging.getLogger(__name__)


class UploadError(RuntimeError):
    """An upload that failed for good; the message names the object and the cause."""


class BackgroundUploader:
    """Runs upload jobs on one worker thread, at most ``max_pending`` at a time (queued or running).

    Args:
        max_pending (int): Jobs queued or running at most; :meth:`submit` blocks beyond that.
        name (str): The worker thread's name.
        nice (int): How much to lower the worker's CPU priority (Linux; 0 leaves it as the training thread's).

    Example:
        >>> done = []
        >>> uploader = BackgroundUploader(max_pending=2)
        >>> uploader.submit(lambda: done.append("ep0-ba2.pt"), "ep0-ba2.pt")
        >>> uploader.wait()
        >>> done
        ['ep0-ba2.pt']
        >>> uploader.submit(lambda: 1 / 0, "ep0-ba4.pt")
        >>> uploader.close()
        Traceback (most recent call last):
        ...
        composer.utils.object_store.uploader.UploadError: ep0-ba4.pt failed: ZeroDivisionError: division by zero
    """

    def __init__(self, max_pending: int = 2, name: str = "composer-upload", nice: int = 10) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending={max_pending!r} must be at least 1.")
        self._name = name
        self._nice = nice
        # A job holds its slot until it is done: the queue's own size counts only what waits, so a semaphore
        # counts what waits and what runs.
        self._slots = threading.BoundedSemaphore(max_pending)
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], str, str] | None] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._unfinished = 0
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._idle:
            return self._unfinished

    def submit(self, job: Callable[[], object], what: str, note: str = "") -> None:
        """Queues ``job``; waits while ``max_pending`` jobs are pending. If it fails, the error reads
        ``'<what> failed: <the cause> <note>'``.

        Raises:
            UploadError: If an earlier job failed for good (then ``job`` is not queued).
        """
        if self._closed:
            raise RuntimeError(f"Cannot upload {what}: the uploader is closed.")
        self._raise_failure()
        if not self._slots.acquire(blocking=False):
            log.info("Waiting for an upload slot before queueing %s (the store is slower than training).", what)
            self._slots.acquire()
        self._raise_failure(release=True)
        with self._idle:
            self._unfinished += 1
        if self._thread is None:
            # Daemon, so that a process that never calls close() can still exit; close() (and the Trainer's end of
            # fit) wait for the jobs.
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put((job, what, note))

    def check(self) -> None:
        """Raises now, without waiting, if a job failed for good.

        Raises:
            UploadError: If a job failed for good (raised once).
        """
        self._raise_failure()

    def wait(self) -> None:
        """Waits until every job submitted so far has run.

        Raises:
            UploadError: If a job failed for good.
        """
        with self._idle:
            self._idle.wait_for(lambda: self._unfinished == 0)
        self._raise_failure()

    def wait_until(self, deadline: float) -> bool:
        """Waits until every job submitted so far has run, or until ``time.monotonic()`` reaches ``deadline``.

        Returns:
            bool: Whether every job has run (False: the deadline came first; the jobs go on).

        Raises:
            UploadError: If a job failed for good.
        """
        with self._idle:
            done = self._idle.wait_for(lambda: self._unfinished == 0, max(0.0, deadline - time.monotonic()))
        self._raise_failure()
        return done

    def close(self) -> None:
        """Waits for the pending jobs, then stops the worker. Idempotent.

        Raises:
            UploadError: If a job failed for good (raised once).
        """
        if self._closed:
            return
        try:
            self.wait()
        finally:
            self._closed = True
            if self._thread is not None:
                self._jobs.put(None)
                self._thread.join()

    def _raise_failure(self, release: bool = False) -> None:
        error, self._error = self._error, None
        if error is not None:
            if release:
                self._slots.release()
            raise error

    def _work(self) -> None:
        if self._nice and sys.platform.startswith("linux"):
            with contextlib.suppress(OSError):  # not permitted: run at the normal priority
                os.setpriority(
                    os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + self._nice
                )
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, what, note = item
            try:
                if self._error is None:  # after a failure, the queued jobs are dropped: their files stay local
                    job()
            except BaseException as e:
                self._error = UploadError(f"{what} failed: {type(e).__name__}: {e}" + (f" {note}" if note else ""))
                self._error.__cause__ = e
                log.error("%s", self._error)
            finally:
                self._slots.release()
                with self._idle:
                    self._unfinished -= 1
                    self._idle.notify_all()
