"""Where a profiled run's time went: a table of the named ranges against the training steps, and a bar chart of it.

The times are the :class:`~composer.profiler.range_timer.RangeTimer`'s ``perf_counter`` sums over every step of the
fit (not only the steps the torch profiler's schedule recorded). A *step* is one wait for the dataloader plus one
training batch (``trainer/dataloader`` + ``trainer/batch``: ``AFTER_DATALOADER`` through ``BATCH_CHECKPOINT``); each
row's share is its wall time over the time in steps. Ranges outside the steps (``FIT_START``, an epoch's evaluation)
are shown against the same denominator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from composer.profiler.range_timer import RangeTotals

__all__ = ["ProfileSummary", "SummaryRow"]

_STAGES = (
    "trainer/dataloader",
    "trainer/batch",
    "trainer/forward",
    "trainer/loss",
    "trainer/backward",
    "trainer/optimizer_step",
)


@dataclass(frozen=True)
class SummaryRow:
    """One line of the summary.

    Args:
        name (str): The range (``"event/BATCH_END"``), or an algorithm or callback over all its events
            (``"callback/SpeedMonitor"``).
        calls (int): How often it ran.
        seconds (float): Its wall time, nested ranges included.
        self_seconds (float): Its wall time outside the ranges nested in it.
        depth (int): 1 for an algorithm's or callback's line per event, shown under its total; else 0.
    """

    name: str
    calls: int
    seconds: float
    self_seconds: float
    depth: int = 0


@dataclass(frozen=True)
class ProfileSummary:
    """The time per loop stage, per event, per algorithm and per callback, as shares of the training steps.

    Args:
        steps (int): Training steps in the run.
        step_seconds (float): Wall time in those steps (the dataloader waits included).
        rows (tuple[SummaryRow, ...]): The lines: loop stages, events, algorithms, callbacks, each by time.

    Example:
        >>> from composer.profiler.range_timer import RangeTotals
        >>> summary = ProfileSummary.from_totals({
        ...     "trainer/dataloader": RangeTotals(calls=3, seconds=1.0),
        ...     "trainer/batch": RangeTotals(calls=2, seconds=3.0, nested_seconds=2.0),
        ...     "callback/Sleep/BATCH_END": RangeTotals(calls=2, seconds=2.0),
        ... })
        >>> summary.steps, summary.step_seconds, summary.dataloader_seconds
        (2, 4.0, 1.0)
        >>> summary.share("callback/Sleep")
        0.5
        >>> print(summary.table())  # doctest: +NORMALIZE_WHITESPACE
        Profile: 2 steps, 4.000 s in steps (2000.00 ms per step); waiting for the dataloader: 1.000 s (25.0%)
        range                  calls   total s  ms/step  % step  self %
        trainer/dataloader         3     1.000   500.00    25.0    25.0
        trainer/batch              2     3.000  1500.00    75.0    25.0
        callback/Sleep             2     2.000  1000.00    50.0    50.0
          BATCH_END                2     2.000  1000.00    50.0    50.0
        % step: wall time as a share of the time in training steps (dataloader wait + batch), nested ranges included; self %: without them.
    """

    steps: int
    step_seconds: float
    rows: tuple[SummaryRow, ...]

    @classmethod
    def from_totals(cls, totals: Mapping[str, RangeTotals]) -> ProfileSummary:
        """The summary of a :class:`~composer.profiler.range_timer.RangeTimer`'s totals.

        Args:
            totals (Mapping[str, RangeTotals]): Range name -> its totals.

        Returns:
            ProfileSummary: Ranges never entered are left out.
        """
        used = {name: t for name, t in totals.items() if t.calls}
        batch = used.get("trainer/batch", RangeTotals())
        loader = used.get("trainer/dataloader", RangeTotals())

        def row(name: str, depth: int = 0, label: str | None = None) -> SummaryRow:
            t = used[name]
            return SummaryRow(label or name, t.calls, t.seconds, t.self_seconds, depth)

        def by_time(names: list[str]) -> list[str]:
            return sorted(names, key=lambda name: -used[name].seconds)

        rows = [row(name) for name in _STAGES if name in used]
        rows += [row(name) for name in by_time([n for n in used if n.startswith("event/")])]
        for kind in ("algorithm", "callback"):
            groups: dict[str, list[str]] = {}
            for name in used:
                parts = name.split("/")
                if parts[0] == kind and len(parts) == 3:
                    groups.setdefault(f"{kind}/{parts[1]}", []).append(name)
            group_seconds = {group: sum(used[n].seconds for n in names) for group, names in groups.items()}
            for group in sorted(groups, key=lambda g: -group_seconds[g]):
                names = groups[group]
                rows.append(
                    SummaryRow(
                        group,
                        sum(used[n].calls for n in names),
                        group_seconds[group],
                        sum(used[n].self_seconds for n in names),
                    )
                )
                rows += [row(name, 1, name.rsplit("/", 1)[1]) for name in by_time(names)]
        rows += [row(name) for name in used if not name.startswith(("event/", "algorithm/", "callback/", *_STAGES))]
        return cls(steps=batch.calls, step_seconds=batch.seconds + loader.seconds, rows=tuple(rows))

    @property
    def dataloader_seconds(self) -> float:
        """Time spent waiting for the training dataloader (its iterators' creation included)."""
        return sum(row.seconds for row in self.rows if row.name == "trainer/dataloader")

    def share(self, name: str) -> float:
        """The wall time of the row ``name`` (nested ranges included) over the time in steps; 0 for an absent row.

        Args:
            name (str): A row's name, e.g. ``"trainer/dataloader"`` or ``"callback/SpeedMonitor"``.

        Returns:
            float: Between 0 and 1 for ranges inside the steps.
        """
        seconds = sum(row.seconds for row in self.rows if row.name == name and row.depth == 0)
        return seconds / self.step_seconds if self.step_seconds > 0 else 0.0

    def table(self) -> str:
        """The summary as a text table: one line per row, the header saying what the shares are of.

        Returns:
            str: Lines without a trailing newline.
        """
        denominator = self.step_seconds if self.step_seconds > 0 else float("inf")
        per_step = 1000 / max(self.steps, 1)
        width = max([len("range"), *(len(row.name) + 2 * row.depth for row in self.rows)])
        lines = [
            f"Profile: {self.steps} steps, {self.step_seconds:.3f} s in steps ({self.step_seconds * per_step:.2f} ms "
            f"per step); waiting for the dataloader: {self.dataloader_seconds:.3f} s "
            f"({100 * self.dataloader_seconds / denominator:.1f}%)",
            f"{'range':<{width}}  {'calls':>6}  {'total s':>8}  {'ms/step':>7}  {'% step':>6}  {'self %':>6}",
        ]
        for row in self.rows:
            name = "  " * row.depth + row.name
            lines.append(
                f"{name:<{width}}  {row.calls:>6}  {row.seconds:>8.3f}  {row.seconds * per_step:>7.2f}  "
                f"{100 * row.seconds / denominator:>6.1f}  {100 * row.self_seconds / denominator:>6.1f}"
            )
        lines.append(
            "% step: wall time as a share of the time in training steps (dataloader wait + batch), nested ranges "
            "included; self %: without them."
        )
        return "\n".join(lines)

    def save_chart(self, path: str | Path, top: int = 25) -> Path:
        """A horizontal bar chart of the rows' shares of the step (the ``top`` largest, of at least 0.1%), as a PNG.

        Imports matplotlib (with its Agg backend, no display needed) only when called.

        Args:
            path (str | Path): The PNG to write.
            top (int): How many rows to show.

        Returns:
            Path: ``path``.
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        denominator = self.step_seconds if self.step_seconds > 0 else 1.0
        # Rows under 0.1% of the step would be invisible bars: left out (the table has them).
        shown = (row for row in self.rows if row.depth == 0 and row.seconds >= 0.001 * denominator)
        rows = sorted(shown, key=lambda row: -row.seconds)[:top]
        figure, axes = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.5))
        names = [row.name for row in reversed(rows)]
        axes.barh(names, [100 * row.seconds / denominator for row in reversed(rows)], label="total", color="#9fb4e3")
        axes.barh(
            names, [100 * row.self_seconds / denominator for row in reversed(rows)], label="self", color="#3f5fb0"
        )
        axes.set_xlabel("% of the time in training steps")
        axes.set_title(
            f"Where the time goes: {self.steps} steps, {1000 * self.step_seconds / max(self.steps, 1):.2f} ms per step"
        )
        axes.legend(loc="lower right")
        figure.tight_layout()
        path = Path(path)
        figure.savefig(path, dpi=100)
        plt.close(figure)
        return path
