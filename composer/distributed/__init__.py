"""Training as one of several processes: the one :class:`Parallelism` object the Trainer talks to, and the pieces it
calls (the process group, each rank's data, DistributedDataParallel, FSDP, the ranks' agreements on running out of
memory and on stopping, and automatic microbatching). See ``composer/distributed/DISTRIBUTED.md``.

The helpers of :mod:`~composer.distributed.process_group`, :mod:`~composer.distributed.data`,
:mod:`~composer.distributed.ddp` and :mod:`~composer.distributed.fsdp` are public for scripts that run their own loop;
each is a no-op, nearly free, in a single process.
"""

from composer.distributed.data import UnpaddedDistributedSampler
from composer.distributed.ddp import DDPSyncStrategy
from composer.distributed.fsdp import FSDPConfig
from composer.distributed.microbatching import Microbatching, MicrobatchTooSmallError
from composer.distributed.oom_agreement import OutOfMemoryAgreement, PeerOutOfMemoryError
from composer.distributed.parallelism import Parallelism
from composer.distributed.stop_agreement import StopAgreement

__all__ = [
    "DDPSyncStrategy",
    "FSDPConfig",
    "MicrobatchTooSmallError",
    "Microbatching",
    "OutOfMemoryAgreement",
    "Parallelism",
    "PeerOutOfMemoryError",
    "StopAgreement",
    "UnpaddedDistributedSampler",
]
