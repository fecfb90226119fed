"""What dynamo really did with a compiled forward: the graphs it compiled, and whether it gave up and ran eagerly.

``torch.compile`` reports neither per model. Dynamo counts, process-wide, every graph it hands to a backend
(``torch._dynamo.utils.counters['stats']['unique_graphs']``, recompilations included) and every time a frame reaches
``recompile_limit`` (an ``'unimplemented'`` entry, "Dynamo recompile limit exceeded"): from then on that frame runs
eagerly for the shapes no graph covers, and dynamo says so only once, in its log. :class:`GraphCount` wraps the
compiled forward and attributes to it what those counters gained during its calls, so ``trainer.compilation``
reports the true number of graphs and warns, naming the fixes, the moment the model falls back to eager.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["GraphCount", "dynamo_counts"]

_LIMIT_HIT = "dynamo recompile limit exceeded"


def dynamo_counts() -> tuple[int, int]:
    """Dynamo's process-wide counts so far: (graphs compiled, frames that reached their recompile limit).

    Example:
        >>> graphs, limit_hits = dynamo_counts()
        >>> graphs >= 0 and limit_hits >= 0
        True
    """
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    hits = sum(n for reason, n in counters["unimplemented"].items() if reason.lower().startswith(_LIMIT_HIT))
    return graphs, hits


class GraphCount:
    """The graphs dynamo compiled while a compiled forward ran, and whether that forward fell back to eager.

    Args:
        recompile_limit (int | None): The limit the forward was compiled with, for the warning (None: dynamo's
            ``torch._dynamo.config.recompile_limit``).

    Attributes:
        graphs (int): Graphs compiled during the wrapped calls: one per traced frame and shape (or mode) it had no
            graph for, recompilations included; a forward without graph breaks compiles one graph per region.
        fell_back_to_eager (bool): Whether a frame reached ``recompile_limit`` during the wrapped calls, so that
            shapes it has no graph for run eagerly (uncompiled) from then on.

    Example:
        >>> import torch
        >>> count = GraphCount(recompile_limit=1)
        >>> forward = count.wrap(torch.compile(torch.nn.Linear(4, 2), backend="eager", dynamic=False,
        ...                                    recompile_limit=1, isolate_recompiles=True))
        >>> _ = forward(torch.ones(1, 4)); count.graphs, count.fell_back_to_eager
        (1, False)
        >>> import pytest
        >>> with pytest.warns(UserWarning, match="recompile_limit"):
        ...     _ = forward(torch.ones(2, 4))  # a new size: a recompilation, past the limit of 1
        >>> count.graphs, count.fell_back_to_eager
        (1, True)
    """

    def __init__(self, recompile_limit: int | None = None) -> None:
        self.recompile_limit = recompile_limit
        self.graphs = 0
        self.fell_back_to_eager = False

    def wrap(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """``compiled`` (a compiled forward), counting what dynamo compiles while it runs."""

        def counted(*args: Any, **kwargs: Any) -> Any:
            graphs, hits = dynamo_counts()
            try:
                return compiled(*args, **kwargs)
            finally:
                self._add(*_since(graphs, hits))

        return counted

    def _add(self, graphs: int, hits: int) -> None:
        self.graphs += graphs
        if hits and not self.fell_back_to_eager:
            self.fell_back_to_eager = True
            import torch._dynamo

            limit = self.recompile_limit or torch._dynamo.config.recompile_limit
            warnings.warn(
                f"compile_config: the model's forward reached dynamo's recompile_limit ({limit}) after {self.graphs} "
                "graph(s), and from now on runs eagerly (uncompiled) for every shape no graph covers. "
                "TORCH_LOGS=recompiles shows why it recompiles. To fix: use fewer sizes "
                "(ProgressiveResizing(scale_buckets=4), its default when compiled); leave 'dynamic' out of "
                "compile_config, so that the Trainer marks what algorithms resize; or raise the limit "
                "(compile_config={'recompile_limit': 16}).",
                UserWarning,
                stacklevel=3,
            )


def _since(graphs: int, hits: int) -> tuple[int, int]:
    now_graphs, now_hits = dynamo_counts()
    return max(0, now_graphs - graphs), max(0, now_hits - hits)
