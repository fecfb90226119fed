"""The main job: train a small classifier on scikit-learn's bundled handwritten digits, then report its accuracy.

Nothing is downloaded: the 1,797 8x8 digit images ship inside scikit-learn. A progress bar shows on a terminal
(elsewhere, plain lines: every 30 s, and after each epoch and evaluation). The held-out digits are evaluated at the
end of every epoch; the accuracy reported last is that of the final evaluation, not of a second one.

Run:  bash scripts/train            (sets everything up first)
      .venv/bin/python examples/train_digits.py --epochs 15 --seed 0
"""

from __future__ import annotations

import argparse
import functools

import torch

from composer import Trainer
from composer.datasets import digits_dataloaders
from composer.loggers import InMemoryLogger
from composer.models import MLP, ComposerClassifier
from composer.optim import DecoupledSGDW, cosine_annealing_with_warmup_scheduler

__all__: list[str] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "amp"])
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_dl, eval_dl = digits_dataloaders(batch_size=args.batch_size, seed=args.seed)
    model = ComposerClassifier(MLP(in_features=64, hidden=(128, 128), num_classes=10), num_classes=10)
    optimizer = DecoupledSGDW(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    metrics = InMemoryLogger(log_level="epoch")  # keeps the evaluations' results, to report the last
    with Trainer(
        model=model,
        train_dataloader=train_dl,
        eval_dataloader=eval_dl,
        max_duration=f"{args.epochs}ep",
        optimizers=optimizer,
        schedulers=functools.partial(cosine_annealing_with_warmup_scheduler, warmup_time="1ep"),
        precision=args.precision,
        seed=args.seed,
        loggers=[metrics],
    ) as trainer:
        trainer.fit()
    accuracy = metrics.most_recent_values["metrics/eval/Accuracy"]
    print(f"final accuracy on {len(eval_dl.dataset)} held-out digits: {accuracy:.4f}")


if __name__ == "__main__":
    main()
