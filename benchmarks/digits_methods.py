"""Which methods move the digits frontier: the baseline recipe plus one method at a time, against its frontier.

Each variant is ``recipes/digits_baseline.yaml`` with one method added (its method-card defaults, or the values the
digits recipes use), trained at ``--durations`` with ``--seeds`` and placed against the baseline's frontier, exactly as
``composer compare`` does (interleaved runs, only ``fit()`` timed). The variants' YAML files are written to
``--out``, next to the table and the plot.

Run:  .venv/bin/python benchmarks/digits_methods.py --threads 1 --seeds 0 1 --durations 3ep 4ep
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from composer.cli.compare import format_table, plot_pareto, run_compare
from composer.config import load_recipe, to_yaml

__all__: list[str] = []

# Method -> its fields (the values the digits recipes use, else the method card's defaults).
METHODS = {
    "channels_last": {},
    "label_smoothing": {"alpha": 0.1},
    "progressive_resizing": {"initial_scale": 0.5, "finetune_fraction": 0.5},
    "selective_backprop": {"start": 0.3, "end": 0.9, "keep": 0.5, "scale_factor": 1.0, "interrupt": 2},
    "colout": {},
    "layer_freezing": {},
    "mixup": {"alpha": 0.2},
    "cutout": {"n_holes": 1, "length": 8},
    "blurpool": {},
    "ema": {"half_life": "50ba"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--baseline-durations", nargs="+", default=["2ep", "3ep", "4ep", "6ep", "8ep"])
    parser.add_argument("--durations", nargs="+", default=["4ep"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/digits_methods"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    baseline = Path(__file__).parents[1] / "recipes" / "digits_baseline.yaml"
    variants = []
    for method in args.methods:
        fields = ", ".join(f"{k}: {v}" for k, v in METHODS[method].items())
        config = load_recipe(baseline, [f"algorithms.{method}={{{fields}}}"])
        path = args.out / f"+{method}.yaml"
        path.write_text(to_yaml(config))
        variants.append(path)
    points, _ = run_compare(baseline, variants, args.baseline_durations, args.durations, args.seeds)
    table = format_table(points, baseline.stem)
    (args.out / "methods.md").write_text(table + "\n")
    plot_pareto(points, baseline.stem, args.out / "methods.png")
    print(table)


if __name__ == "__main__":
    main()
