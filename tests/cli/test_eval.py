"""``composer eval`` scores exactly the checkpoint named, says which, and writes nothing, with the training recipe."""

from __future__ import annotations

import csv

from composer.cli.__main__ import main
from tests.cli.recipes import write_recipe

# The tiny recipe (4 batches an epoch), saving and evaluating after every batch, resumable, logging to a CSV file.
_RUN = """
run_name: tiny
autoresume: true
save_folder: {save_folder}
save_interval: 1ba
eval_interval: 1ba
loggers: {{csv: {{filename: {log}}}}}
"""


def _train(tmp_path, capsys, save_folder: str, extra: str = "") -> dict[int, str]:
    """Trains 4 batches; returns the CrossEntropy each evaluation logged, by batch, as ``composer eval`` prints it."""
    log = tmp_path / "log.csv"
    recipe = write_recipe(tmp_path, extra=_RUN.format(log=log, save_folder=save_folder) + extra)
    assert main(["train", "-f", str(recipe), "max_duration=4ba"]) == 0
    capsys.readouterr()
    with log.open(newline="") as file:
        rows = [row for row in csv.DictReader(file) if row["name"] == "metrics/eval/CrossEntropy"]
    return {int(row["batch"]): f"{float(row['value']):.4f}" for row in rows}


def _evaluate(tmp_path, capsys, *overrides: str) -> tuple[list[str], str]:
    assert main(["eval", "-f", str(tmp_path / "tiny.yaml"), *overrides]) == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def _files(folder) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_eval_scores_the_checkpoint_named_not_the_newest_and_writes_nothing(tmp_path, capsys):
    logged = _train(tmp_path, capsys, str(tmp_path / "ckpt"))
    assert sorted(logged) == [1, 2, 3, 4] and logged[2] != logged[4]
    before, log = _files(tmp_path / "ckpt"), (tmp_path / "log.csv").read_text()
    old = tmp_path / "ckpt" / "ep0-ba2-rank0.pt"
    for weights_only in ("false", "true"):
        out, err = _evaluate(tmp_path, capsys, f"load_path={old}", f"load_weights_only={weights_only}")
        assert f"metrics/eval/CrossEntropy: {logged[2]}" in out  # what training's evaluation at batch 2 reported
        assert out[0] == f"checkpoint: {old} (epoch 0, batch 2)"
        assert "left out autoresume, save_folder, loggers (csv)" in err
        assert _files(tmp_path / "ckpt") == before and (tmp_path / "log.csv").read_text() == log
    # A folder: its newest checkpoint, named with its epoch and batch.
    out, _ = _evaluate(tmp_path, capsys, f"load_path={tmp_path / 'ckpt'}", "autoresume=false")
    newest = next((tmp_path / "ckpt").glob("ep*-ba4-rank0.pt"))  # its epoch: 0 or 1, whether 4 batches end one
    assert out[0] == f"checkpoint: {newest} (epoch {newest.name[2]}, batch 4)"
    assert f"metrics/eval/CrossEntropy: {logged[4]}" in out
    # composer train with autoresume says which checkpoint it resumed from, and from where.
    assert main(["train", "-f", str(tmp_path / "tiny.yaml"), "max_duration=5ba"]) == 0
    expected = f"composer train: autoresume: resumed from {newest} (epoch {newest.name[2]}, batch 4), from the local"
    assert expected in capsys.readouterr().err


def test_eval_scores_the_store_checkpoint_named(tmp_path, capsys, s3_env):
    bucket = s3_env.create_bucket()
    logged = _train(
        tmp_path, capsys, f"s3://{bucket}/run", f"storage_options: {{endpoint_url: '{s3_env.endpoint_url}'}}\n"
    )
    keys = s3_env.keys(bucket)
    out, _ = _evaluate(tmp_path, capsys, f"load_path=s3://{bucket}/run/ep0-ba2-rank0.pt")
    assert f"metrics/eval/CrossEntropy: {logged[2]}" in out
    assert out[0] == f"checkpoint: s3://{bucket}/run/ep0-ba2-rank0.pt (epoch 0, batch 2)"
    assert s3_env.keys(bucket) == keys
    assert main(["train", "-f", str(tmp_path / "tiny.yaml"), "max_duration=5ba"]) == 0
    newest = next(key for key in keys if "-ba4-" in key)
    expected = f"resumed from s3://{bucket}/{newest} (epoch {newest.split('/')[-1][2]}, batch 4), from the store"
    assert expected in capsys.readouterr().err
