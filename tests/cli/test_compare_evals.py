"""composer compare's extra evaluations on the text recipes: bits per byte, tokens per second, and 2x the length.

A learned-position GPT refuses sequences longer than its positions, with an error naming both lengths; ALiBi's GPT
evaluates them. Tiny models (2 batches of 2, width 16) keep this to a few seconds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from composer.cli.__main__ import main
from composer.cli.compare import measure_metrics
from composer.cli.compare_evals import format_evaluations, mean_tokens_per_s, parse_eval_also
from composer.cli.compare_report import format_table
from composer.cli.frontier import Point
from composer.config import ConfigError

RECIPES = Path(__file__).parents[2] / "recipes"
_TINY = [
    "model.gpt.n_embd=16",
    "model.gpt.n_head=2",
    "train_batch_size=2",
    "eval_batch_size=1024",  # compare evaluates the whole validation split (about 180 KB): 3 batches
]
_TWICE = parse_eval_also([["2x", "eval_dataset.python_docs.seq_len=128", "eval_batch_size=512"]])


def test_learned_positions_refuse_twice_the_length_and_alibi_evaluates_it():
    _, plain = measure_metrics(RECIPES / "text_baseline.yaml", "2ba", 0, _TINY, _TWICE, "Perplexity")
    refusal = plain["Perplexity@2x"]
    assert refusal.startswith("refused: ") and "length 128" in refusal and "max_sequence_length=64" in refusal
    # Bits per byte is the cross-entropy in bits; a byte-level model has 256 symbols, so perplexity = 2 ** bits.
    assert plain["BitsPerByte"] == pytest.approx(plain["CrossEntropy"] / math.log(2), rel=1e-5)
    assert plain["Perplexity"] == pytest.approx(2 ** plain["BitsPerByte"], rel=1e-4)
    assert plain["tokens_per_s"] > 0
    _, alibi = measure_metrics(RECIPES / "text_alibi_seqwarmup.yaml", "2ba", 0, _TINY, _TWICE, "Perplexity")
    assert 1.0 < alibi["Perplexity@2x"] < 2 * 256  # a number: near-uniform after 2 batches
    table = format_evaluations(
        [{"recipe": "base", "duration": "2ba", "seed": 0, "seconds": 1.0, **plain}], "Perplexity"
    )
    assert "| refused: GPT got a sequence of length 128, longer than max_sequence_length=64 |" in table


def test_eval_also_needs_a_label_then_overrides():
    with pytest.raises(ConfigError, match="--eval-also"):
        parse_eval_also([["eval_batch_size=1"]])
    with pytest.raises(ConfigError, match="--eval-also"):
        parse_eval_also([["2x", "a=1"], ["2x", "b=2"]])


def test_evaluations_average_the_kept_runs_in_the_runs_order():
    def run(duration, status, value):
        return {"recipe": "a", "duration": duration, "seed": 0, "seconds": 1.0, "Accuracy": value,
                "CrossEntropy": 2 * value, "tokens_per_s": 12345.0, "status": status}  # fmt: skip

    runs = [run("1ep", "ok", 1), run("2ep", "outlier", 2), run("3ep", "ok", 3), run("2ep", "rerun", 4)]
    runs.append(run("4ep", "outlier", 5))  # every run an outlier: no row
    rows = format_evaluations(runs, "Accuracy").splitlines()
    assert rows[0] == "| recipe | duration | Accuracy | CrossEntropy | tokens/s |"
    assert rows[2:] == ["| a | 1ep | 1 | 2 | 12,345 |", "| a | 2ep | 4 | 8 | 12,345 |", "| a | 3ep | 3 | 6 | 12,345 |"]


def test_the_compare_table_shows_the_mean_tokens_per_second_of_the_kept_runs(tmp_path, capsys):
    rates = {("text_baseline", "2ba"): [900.0, 1100.0], ("text_baseline", "4ba"): [800.0, 1000.0]}
    rates[("text_glu", "2ba")] = [2000.0, 3000.0]
    rows = ["recipe,duration,seed,repeat,seconds,Perplexity,status,tokens_per_s"]
    for (recipe, duration), pair in rates.items():
        for seed, rate in enumerate(pair):
            seconds, perplexity = (2.0, 9.0) if duration == "2ba" and recipe == "text_baseline" else (4.0, 6.0)
            rows.append(f"{recipe},{duration},{seed},0,{seconds + seed / 10},{perplexity},ok,{rate}")
    rows.append("text_glu,2ba,0,0,40.0,6.0,outlier,5.0")  # an outlier's rate is left out of the mean
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    args = ["compare", "-b", str(RECIPES / "text_baseline.yaml"), "--metric", "Perplexity", "--tolerance", "0.05"]
    assert main([*args, "--report", str(tmp_path / "runs.csv")]) == 0
    table = [line for line in capsys.readouterr().out.split("Evaluations")[0].splitlines() if line.startswith("|")]
    assert table[0] == "| recipe | duration | time (s) | tokens/s | Perplexity | speed-up |"
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert {(recipe, duration): rate for recipe, duration, _, rate, *_ in cells} == {
        ("text_baseline", "2ba"): "1,000",
        ("text_baseline", "4ba"): "900",
        ("text_glu", "2ba"): "2,500",
    }
    assert mean_tokens_per_s([{"recipe": "a", "duration": "1ep", "tokens_per_s": ""}]) == {}  # none counted
    points = [Point("a", "1ep", [1.0], [0.9]), Point("a", "2ep", [2.0], [0.95])]
    assert format_table(points, "a").splitlines()[0] == "| recipe | duration | time (s) | Accuracy (%) | speed-up |"
