"""``composer launch -n N script.py [args ...]`` (or ``composer -n N script.py``): run a script on N processes.

A thin front to torch's own launcher, :mod:`torch.distributed.run` (``torchrun``): the options become a ``torchrun``
argument list (:func:`torchrun_args`) and torchrun runs in this process. Each worker is ``python script.py args``
with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set, which
:mod:`composer.utils.dist` and the Trainer read. ``torchrun`` itself works just as well; ``composer/cli/LAUNCH.md``
gives the equivalent commands for one and several nodes.

Exit status: 0 when every worker succeeds; the failed worker's exit status when one fails (128 + the signal number
when a signal killed it), after torchrun has stopped the others; 2 for a malformed command line or a missing script.

Stopped by SIGTERM or SIGINT, torchrun passes the signal on to every worker and kills them ``--shutdown-timeout``
seconds later (default here: 30, longer than the Trainer's ``preemption_grace_period`` of 20 s, in which the workers
save a checkpoint and stop: :mod:`composer.trainer.preemption`); the status is then 128 + the signal number.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer.config import ConfigError

__all__ = ["add_parser", "launch", "route", "torchrun_args"]

SHUTDOWN_TIMEOUT = 30
"""Seconds torchrun waits, after passing SIGTERM or SIGINT on, before it kills the workers: the Trainer's default
``preemption_grace_period`` (20 s, to save and upload a checkpoint) plus 10 s to close and exit; Kubernetes' default
grace period (30 s) bounds it anyway."""

# The spellings of the process count that make ``composer -n N ...`` mean ``composer launch -n N ...``.
_SHORT_FORM = re.compile(r"-n\d*|--nproc(=.*)?")


def route(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``launch`` put in front when it uses the short form ``composer -n N script.py ...``.

    Example:
        >>> route(["-n", "2", "train.py", "--lr", "0.1"])
        ['launch', '-n', '2', 'train.py', '--lr', '0.1']
        >>> route(["train", "-f", "recipe.yaml"])
        ['train', '-f', 'recipe.yaml']
    """
    argv = list(argv)
    return ["launch", *argv] if argv and _SHORT_FORM.fullmatch(argv[0]) else argv


def torchrun_args(
    nproc: int,
    script: str,
    script_args: Sequence[str] = (),
    *,
    nnodes: str = "1",
    node_rank: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    rdzv_backend: str | None = None,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
    rdzv_conf: str | None = None,
    max_restarts: int = 0,
    module: bool = False,
    shutdown_timeout: int | None = None,
) -> list[str]:
    """The ``torchrun`` argument list that runs ``script`` on ``nproc`` processes per node.

    Options left as ``None`` are not passed, so torchrun's defaults hold: on one node without ``master_port`` it
    rendezvouses on a free local port by itself.

    Args:
        nproc: Processes on this node (one per GPU, or per CPU rank).
        script: The script's path, or a module's name when ``module`` is true.
        script_args: The script's own arguments, passed through unchanged.
        nnodes: The number of nodes, ``"N"``, or ``"MIN:MAX"`` for an elastic job.
        node_rank: This node's rank, 0 to ``nnodes - 1`` (static rendezvous).
        master_addr: The address of node 0 (static rendezvous).
        master_port: A free port on node 0 (static rendezvous).
        rdzv_backend: The rendezvous backend, e.g. ``"c10d"`` (dynamic rendezvous).
        rdzv_endpoint: The rendezvous endpoint ``host:port`` (dynamic rendezvous).
        rdzv_id: The job id every node shares (dynamic rendezvous).
        rdzv_conf: Extra rendezvous settings, ``key1=value1,key2=value2``.
        max_restarts: How often torchrun restarts the workers after a failure before giving up.
        module: Run ``script`` as a module, like ``python -m``.
        shutdown_timeout: Seconds between passing a SIGTERM or SIGINT on to the workers and killing them.

    Example:
        >>> torchrun_args(2, "train.py", ["--lr", "0.1"])
        ['--nproc-per-node', '2', '--nnodes', '1', '--max-restarts', '0', 'train.py', '--lr', '0.1']
        >>> torchrun_args(4, "train.py", nnodes="2", node_rank=0, master_addr="10.0.0.1", master_port=29500)[4:]
        ['--max-restarts', '0', '--node-rank', '0', '--master-addr', '10.0.0.1', '--master-port', '29500', 'train.py']
    """
    args = ["--nproc-per-node", str(nproc), "--nnodes", nnodes, "--max-restarts", str(max_restarts)]
    optional = {
        "--node-rank": node_rank,
        "--master-addr": master_addr,
        "--master-port": master_port,
        "--rdzv-backend": rdzv_backend,
        "--rdzv-endpoint": rdzv_endpoint,
        "--rdzv-id": rdzv_id,
        "--rdzv-conf": rdzv_conf,
        "--shutdown-timeout": shutdown_timeout,
    }
    args += [item for flag, value in optional.items() if value is not None for item in (flag, str(value))]
    if module:
        args.append("--module")
    return [*args, script, *script_args]


def launch(argv: Sequence[str]) -> int:
    """Runs torchrun with ``argv`` (see :func:`torchrun_args`) in this process and returns the job's exit status.

    A failed worker's status comes back (128 + the signal number when a signal killed it), not torchrun's
    traceback; the failure report goes to standard error. Torchrun installs signal handlers that stop the workers on
    SIGTERM, SIGINT, SIGHUP and SIGQUIT; they are restored on return, so this can run inside another program.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    handlers = {}  # torchrun, like Python, only sets handlers from the main thread
    if threading.current_thread() is threading.main_thread():
        names = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
        handlers = {
            sig: signal.getsignal(sig) for sig in (getattr(signal, name) for name in names if hasattr(signal, name))
        }
    try:
        torchrun_main(list(argv))
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        print(error, file=sys.stderr)  # torchrun's failure report
        # A negative exit code is the signal that killed the worker; report it as a shell would.
        code = 128 - failure.exitcode if failure.exitcode < 0 else failure.exitcode or 1
        print(f"composer launch: error: rank {rank} failed with exit status {code}", file=sys.stderr)
        return code
    except SignalException as error:
        print(f"composer launch: stopped by {error.sigval.name}; the workers were terminated", file=sys.stderr)
        return 128 + int(error.sigval)
    finally:
        for sig, handler in handlers.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a whole number of processes, received {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expects at least 1 process, received {value}")
    return value


def _seconds(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expects a whole number of seconds, at least 1, received {text!r}")
    return int(text)


def _nnodes(text: str) -> str:
    if not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", text):
        raise argparse.ArgumentTypeError(f"expects N or MIN:MAX with positive whole numbers, received {text!r}")
    return text


def _check(args: argparse.Namespace) -> None:
    if args.script is None:
        raise ConfigError("SCRIPT", "missing; give the Python file to run on each rank: composer launch -n 2 train.py")
    if not args.module and not Path(args.script).is_file():
        raise ConfigError("script", f"{args.script!r} not found; pass the path of the Python file to run on each rank.")
    max_nodes = int(args.nnodes.split(":")[-1])
    if args.node_rank is not None and not 0 <= args.node_rank < max_nodes:
        raise ConfigError(
            "--node-rank", f"received {args.node_rank} but --nnodes {args.nnodes} allows 0 to {max_nodes - 1}."
        )
    if max_nodes > 1 and args.rdzv_endpoint is None and (args.master_addr is None or args.node_rank is None):
        raise ConfigError(
            "--nnodes",
            f"{args.nnodes} nodes need --node-rank and --master-addr (the address of node 0), "
            "or --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id JOB for a dynamic rendezvous.",
        )


def _run(args: argparse.Namespace) -> int:
    _check(args)
    options = {name: getattr(args, name) for name in ("node_rank", "master_addr", "master_port", "max_restarts")}
    options |= {name: getattr(args, name) for name in ("rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf")}
    options["shutdown_timeout"] = args.shutdown_timeout
    return launch(
        torchrun_args(args.nproc, args.script, args.script_args, nnodes=args.nnodes, module=args.module, **options)
    )


def add_parser(subparsers: Any) -> None:
    """Adds ``composer launch`` to the command line's subcommands."""
    parser = subparsers.add_parser(
        "launch",
        help="run a script on N processes through torchrun (also: composer -n N script.py)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-n", "--nproc", type=_positive_int, required=True, metavar="N", help="processes per node")
    parser.add_argument("--nnodes", type=_nnodes, default="1", help="nodes, N or MIN:MAX (default: 1)")
    parser.add_argument("--node-rank", "--node_rank", type=int, help="this node's rank (static rendezvous)")
    parser.add_argument("--master-addr", "--master_addr", help="address of node 0 (static rendezvous)")
    parser.add_argument("--master-port", "--master_port", type=int, help="free port on node 0 (static rendezvous)")
    parser.add_argument("--rdzv-backend", "--rdzv_backend", help="rendezvous backend, e.g. c10d")
    parser.add_argument("--rdzv-endpoint", "--rdzv_endpoint", help="rendezvous endpoint HOST:PORT")
    parser.add_argument("--rdzv-id", "--rdzv_id", help="job id shared by every node")
    parser.add_argument("--rdzv-conf", "--rdzv_conf", help="extra rendezvous settings, key=value,key=value")
    parser.add_argument("--max-restarts", type=int, default=0, help="worker restarts before giving up (default: 0)")
    parser.add_argument(
        "--shutdown-timeout",
        "--shutdown_timeout",
        type=_seconds,
        default=SHUTDOWN_TIMEOUT,
        metavar="SECONDS",
        help="after a SIGTERM or SIGINT, seconds the workers have to save and stop before SIGKILL (default: "
        f"{SHUTDOWN_TIMEOUT}; keep it above the Trainer's preemption_grace_period)",
    )
    parser.add_argument("-m", "--module", action="store_true", help="run SCRIPT as a module, like python -m")
    # Optional for argparse, checked in _check: argparse would name ARGS as missing too, though they may be empty.
    parser.add_argument("script", nargs="?", metavar="SCRIPT", help="the Python file each process runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments")
    parser.set_defaults(run=_run)
