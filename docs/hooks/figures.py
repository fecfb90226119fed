"""Figures the build draws from the code: the event loop (from ``Event``'s docstring) and the schedulers' LR curves.

They are committed under docs/images (`bash scripts/docs figures` draws them again) so that the pages show them on
the repository host; the site build draws them afresh.

The event loop is drawn from the pseudocode in :class:`composer.core.event.Event`'s docstring, which a golden test
keeps equal to the order the Trainer fires events in; the build fails when an event is missing from it.
"""

from __future__ import annotations

import html
import io
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["event_loop_svg", "lr_curves_png", "write_figures"]

_ROW = 26  # pixels per line of pseudocode
_INDENT = 28  # pixels per indentation level
_COLOURS = {"before": "#dbeafe", "after": "#ffedd5", "other": "#e5e7eb"}


def _pseudocode() -> list[tuple[int, str, str]]:
    """(indent level, statement, comment) for each line of the loop in ``Event``'s docstring."""
    from composer.core.event import Event

    doc = Event.__doc__ or ""
    lines = []
    for raw in doc.split("::", 1)[1].splitlines():
        if not raw.strip():
            continue
        stripped = raw.lstrip()
        if len(raw) - len(stripped) <= 4:
            break  # the literal block ends where the docstring's text resumes
        indent = (len(raw) - len(stripped) - 8) // 4  # the block sits 8 spaces deep in the docstring
        statement, _, comment = stripped.partition("#")
        lines.append((indent, statement.strip(), comment.strip()))
    return lines


def event_loop_svg() -> str:
    """The training and evaluation loops as an SVG picture, one row per line of ``Event``'s pseudocode.

    Returns:
        str: The SVG document. Events are boxes (blue: opens a pair, orange: closes one, grey: neither); loops are
        brackets around the lines they repeat; the docstring's comments are printed beside their line.

    Raises:
        ValueError: When an ``Event`` member is missing from the docstring's pseudocode.
    """
    from composer.core.event import Event

    lines = _pseudocode()
    named = {statement for _, statement, _ in lines}
    missing = [event.name for event in Event if event.name not in named]
    if missing:
        raise ValueError(
            f"Event's docstring does not show {missing} in its loop; add them where the Trainer fires them."
        )

    parts: list[str] = []
    width = 860
    height = _ROW * len(lines) + 20
    # Brackets for loops: from a "while"/"for" line to the last line indented deeper than it.
    for index, (indent, statement, _) in enumerate(lines):
        if not statement.startswith(("while", "for")):
            continue
        end = index
        while end + 1 < len(lines) and lines[end + 1][0] > indent:
            end += 1
        x = 12 + indent * _INDENT
        top, bottom = 10 + index * _ROW + _ROW / 2, 10 + end * _ROW + _ROW - 4
        parts.append(
            f'<path d="M{x + 10},{top} H{x} V{bottom} H{x + 10}" fill="none" stroke="#6b7280" stroke-width="1.5"/>'
        )
    for index, (indent, statement, comment) in enumerate(lines):
        x = 24 + indent * _INDENT
        y = 10 + index * _ROW
        text = html.escape(statement)
        if statement in Event.__members__:
            event = Event[statement]
            kind = "before" if event.is_before_event else "after" if event.is_after_event else "other"
            box = 9 * len(statement) + 16
            parts.append(
                f'<rect x="{x}" y="{y + 2}" width="{box}" height="{_ROW - 6}" rx="5" fill="{_COLOURS[kind]}" '
                f'stroke="#374151" stroke-width="0.8"/>'
                f'<text x="{x + 8}" y="{y + _ROW / 2 + 5}" font-family="monospace" font-size="14" '
                f'fill="#111827">{text}</text>'
            )
            end_x = x + box
        else:
            parts.append(
                f'<text x="{x}" y="{y + _ROW / 2 + 5}" font-family="sans-serif" font-size="14" font-style="italic" '
                f'fill="#374151">{text}</text>'
            )
            end_x = x + 8 * len(statement)
        if comment:
            parts.append(
                f'<text x="{max(end_x + 16, 420)}" y="{y + _ROW / 2 + 5}" font-family="sans-serif" font-size="12" '
                f'fill="#6b7280">{html.escape(comment)}</text>'
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="The order in which the Trainer fires its events">'
        f'<rect width="100%" height="100%" fill="white"/>{"".join(parts)}</svg>\n'
    )


def _curve(scheduler: Any, kwargs: dict[str, Any], epochs: int, steps_per_epoch: int, ssr: float) -> list[float]:
    """The multiplier after every batch of a run of ``epochs * ssr`` epochs."""
    import torch

    from composer.core.state import State

    state = State(torch.nn.Linear(1, 1), max_duration=f"{round(epochs * ssr)}ep", steps_per_epoch=steps_per_epoch)
    values = []
    for batch in range(round(epochs * ssr) * steps_per_epoch):
        values.append(scheduler(state, ssr=ssr, **kwargs))
        state.timer.on_batch_complete()
        if (batch + 1) % steps_per_epoch == 0:
            state.timer.on_epoch_complete()
    return values


# The arguments each curve is drawn with (the function's defaults where it has them).
_CURVES: dict[str, dict[str, Any]] = {
    "constant_scheduler": {"factor": 0.5, "total_time": "4ep"},
    "linear_scheduler": {"start_factor": 1.0, "end_factor": 0.1},
    "exponential_scheduler": {"gamma": 0.8},
    "step_scheduler": {"step_size": "3ep", "gamma": 0.5},
    "multi_step_scheduler": {"milestones": ["3ep", "6ep", "8ep"], "gamma": 0.5},
    "cosine_annealing_scheduler": {},
    "cosine_annealing_warm_restarts_scheduler": {"t_0": "2ep", "t_mult": 2.0},
    "polynomial_scheduler": {"power": 2.0},
    "multi_step_with_warmup_scheduler": {"warmup_time": "1ep", "milestones": ["4ep", "7ep"], "gamma": 0.5},
    "linear_with_warmup_scheduler": {"warmup_time": "1ep"},
    "cosine_annealing_with_warmup_scheduler": {"warmup_time": "1ep"},
}


def lr_curves_png() -> bytes:
    """The learning-rate multiplier of every scheduler function over a 10-epoch run, and over the same run scaled by 0.5.

    Returns:
        bytes: A PNG image, one panel per function of ``composer.optim.scheduler``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from composer.optim import scheduler as module

    names = [name for name in module.__all__ if name.endswith("_scheduler")]
    unknown = sorted(set(names) - set(_CURVES))
    if unknown:
        raise ValueError(f"docs/hooks/figures.py has no arguments to draw {unknown} with; add them to _CURVES.")
    columns = 3
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(12, 2.6 * rows), sharex=True, sharey=True)
    steps = 10
    for ax, name in zip(axes.flat, names, strict=False):
        function = getattr(module, name)
        for ssr, style in ((1.0, "-"), (0.5, "--")):
            values = _curve(function, _CURVES[name], 10, steps, ssr)
            ax.plot([i / steps for i in range(len(values))], values, style, label=f"ssr={ssr}")
        arguments = ", ".join(f"{key}={value!r}" for key, value in _CURVES[name].items())
        # Long argument lists wrap, so that a title stays within its panel.
        ax.set_title("\n".join([name, *textwrap.wrap(f"({arguments})", 44)]) if arguments else name, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=9)
    for ax in list(axes.flat)[len(names) - columns : len(names)]:  # the lowest panel of each column
        ax.set_xlabel("epoch")
        ax.tick_params(labelbottom=True)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def write_figures(folder: Path) -> list[Path]:
    """Draws the figures into ``folder`` (``docs/images``, where the pages find them on the repository host).

    Args:
        folder (Path): Where to write ``event_loop.svg`` and ``lr_curves.png``.

    Returns:
        list[Path]: The files written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    svg, png = folder / "event_loop.svg", folder / "lr_curves.png"
    svg.write_text(event_loop_svg())
    png.write_bytes(lr_curves_png())
    return [svg, png]


if __name__ == "__main__":  # bash scripts/docs figures
    import method_figures  # a sibling: this file runs as a script from docs/hooks

    images = Path(__file__).resolve().parents[1] / "images"
    for written in [*write_figures(images), *method_figures.write_method_figures(images / "methods")]:
        print(f"wrote {written}")
