"""composer compare on two tiny recipes: the table and the Pareto plot are written; the frontier arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.cli.__main__ import main
from composer.cli.frontier import Point, pareto_frontier, speedup, time_to_reach
from tests.cli.recipes import write_recipe


def test_compare_writes_the_table_and_a_png(tmp_path, capsys):
    baseline = write_recipe(tmp_path, "base")
    faster = write_recipe(tmp_path, "fast", "algorithms: {label_smoothing: {alpha: 0.1}}\n")
    out = tmp_path / "out"
    argv = ["compare", "-b", str(baseline), str(faster), "--baseline-durations", "1ba", "2ba", "--seeds", "0", "1"]
    # Runs of a few milliseconds vary by more than 2x: a huge outlier factor keeps every run in this test.
    assert main([*argv, "--out", str(out), "--threads", "1", "--outlier-factor", "1000", "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    table = (out / "compare.md").read_text()
    assert table.strip() in printed
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[:2] for row in rows] == [["| base", "1ba"], ["| base", "2ba"], ["| fast", "2ba"]]
    assert "Baseline best:" in table and "- fast:" in table
    assert "Intervals: 95% percentile bootstrap over 2 seeds, 200 resamples" in table
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv_lines = (out / "compare.csv").read_text().splitlines()
    assert csv_lines[0].startswith("recipe,duration,seed,repeat,seconds,Accuracy,status,slowdown,CrossEntropy")
    assert len(csv_lines) == 1 + 3 * 2


def test_recipe_durations_give_one_recipe_its_own_durations(tmp_path, capsys):
    baseline = write_recipe(tmp_path, "base")
    smoothed = write_recipe(tmp_path, "smoothed", "algorithms: {label_smoothing: {alpha: 0.1}}\n")
    plain = write_recipe(tmp_path, "plain")  # its own max_duration: 2ba
    argv = ["compare", "-b", str(baseline), str(smoothed), str(plain), "--baseline-durations", "1ba", "--seeds", "0"]
    out = tmp_path / "out"
    assert main([*argv, "--recipe-durations", "smoothed=1ba,3ba", "--out", str(out), "--threads", "1"]) == 0
    rows = [line.split(" | ")[:2] for line in (out / "compare.md").read_text().splitlines()[2:] if line[:2] == "| "]
    assert rows == [["| base", "1ba"], ["| smoothed", "1ba"], ["| smoothed", "3ba"], ["| plain", "2ba"]]
    mistakes = [(["nothing=1ba"], "names no recipe"), (["plain="], "gives no time")]
    mistakes.append((["plain=1ba", "plain=2ba"], "names a recipe twice"))
    for entries, problem in mistakes:
        assert main([*argv, "--recipe-durations", *entries, "--out", str(out)]) == 2
        assert f"--recipe-durations: {entries[-1]!r} {problem}; give NAME=TIME,TIME once" in capsys.readouterr().err


def test_compare_reports_mistakes_with_exit_2(tmp_path, capsys):
    baseline = write_recipe(tmp_path, "base")
    no_eval = tmp_path / "no_eval.yaml"
    no_eval.write_text(baseline.read_text().replace("eval_dataset:", "unused_eval:"))
    assert main(["compare", "-b", str(baseline), str(tmp_path / "gone.yaml"), "--baseline-durations", "1ba"]) == 2
    assert "gone.yaml: the recipe file does not exist" in capsys.readouterr().err
    assert main(["compare", "-b", str(baseline), str(baseline), "--baseline-durations", "1ba"]) == 2
    assert "recipe file names must differ" in capsys.readouterr().err


def test_frontier_and_speedup_against_hand_computed_values():
    points = [(1.0, 0.5), (2.0, 0.7), (3.0, 0.6), (4.0, 0.9)]
    frontier = pareto_frontier(points)
    assert frontier == [(1.0, 0.5), (2.0, 0.7), (4.0, 0.9)]  # (3.0, 0.6) is beaten by a faster point
    assert time_to_reach(frontier, 0.8) == pytest.approx(3.0)  # halfway from (2, 0.7) to (4, 0.9)
    assert time_to_reach(frontier, 0.95) is None
    assert speedup(frontier, 1.5, 0.8).factor == pytest.approx(2.0) and speedup(frontier, 1.5, 0.8).bound == ""
    beyond = speedup(frontier, 2.0, 0.95)
    assert (beyond.factor, beyond.bound) == (pytest.approx(2.0), ">")  # at least 4.0 / 2.0
    point = Point("r", "1ep", [1.0, 3.0], [0.5, 0.7])
    assert (point.time, point.value) == (2.0, pytest.approx(0.6)) and point.time_std == pytest.approx(2**0.5)


def _write_runs(path, seeds, slow=1.0):
    lines = ["recipe,duration,seed,repeat,seconds,Accuracy,status,slowdown"]
    for seed in seeds:
        for recipe, duration, seconds, accuracy in [
            ("base", "2ep", 2.0, 0.90),
            ("base", "4ep", 4.0, 0.98),
            ("fast", "2ep", 2.0, 0.978),
        ]:
            lines.append(f"{recipe},{duration},{seed},0,{seconds * slow * (1 + 0.05 * seed)},{accuracy},ok,")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_report_pools_earlier_runs_into_one_interval(tmp_path, capsys):
    first = _write_runs(tmp_path / "a.csv", [0, 1, 2])
    second = _write_runs(tmp_path / "b.csv", [0, 1, 2], slow=1.3)
    assert main(["compare", "-b", "base.yaml", "--report", str(first), str(second), "--resamples", "300"]) == 0
    printed = capsys.readouterr().out
    assert "| fast | 2ep | " in printed and "Intervals: 95% percentile bootstrap over 6 passes" in printed
    assert main(["compare", "-b", "base.yaml", "--report", str(_write_runs(tmp_path / "c.csv", [0]))]) == 0
    assert "No interval: each point has 1 run" in capsys.readouterr().out
    assert main(["compare", "-b", "base.yaml", "--report", str(tmp_path / "gone.csv")]) == 2
    assert "gone.csv: --report: the CSV file does not exist" in capsys.readouterr().err
    assert main(["compare", "-b", "base.yaml", "fast.yaml"]) == 2
    assert "--baseline-durations" in capsys.readouterr().err


def test_pareto_labels_overlap_neither_each_other_nor_a_marker(tmp_path, monkeypatch):
    # The committed main job's points, whose labels used to sit on top of one another.
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from composer.cli.compare import points_from_runs, read_runs
    from composer.cli.compare_report import plot_pareto

    results = Path(__file__).resolve().parents[2] / "recipes" / "results" / "digits_compare.csv"
    points = points_from_runs(read_runs([results]), "Accuracy")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to measure it
    plot_pareto(points, "digits_baseline", tmp_path / "pareto.png", "Accuracy")
    (figure,) = figures
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    labels = [text.get_window_extent(renderer) for text in axes.texts]
    assert len(labels) == len(points)
    markers = [axes.transData.transform((point.time, 100 * point.value)) for point in points]
    for index, label in enumerate(labels):
        others = labels[index + 1 :]
        assert not any(label.overlaps(other) for other in others), axes.texts[index].get_text()
        assert not any(label.contains(x, y) for x, y in markers), axes.texts[index].get_text()
    plt.close(figure)


@pytest.mark.parametrize(
    ("results", "metric", "better"), [("digits_compare", "Accuracy", "up"), ("text_compare", "Perplexity", "down")]
)
def test_pareto_title_points_the_way_the_metric_improves(tmp_path, monkeypatch, results, metric, better):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from composer.cli.compare import points_from_runs, read_runs
    from composer.cli.compare_report import plot_pareto

    csv = Path(__file__).resolve().parents[2] / "recipes" / "results" / f"{results}.csv"
    points = points_from_runs(read_runs([csv]), metric)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_pareto(points, f"{results.split('_')[0]}_baseline", tmp_path / "pareto.png", metric)
    (figure,) = figures
    assert figure.axes[0].get_title() == f"Time against quality: {better} and to the left is better"
    plt.close(figure)
