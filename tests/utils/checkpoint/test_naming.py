"""composer.utils.checkpoint.naming: name patterns, finding a run's checkpoints newest first, pruning."""

import os
from pathlib import Path

import pytest

from composer.utils.checkpoint import (
    find_checkpoints,
    format_checkpoint_name,
    link_latest,
    prune_checkpoints,
)
from tests.utils.checkpoint.states import trained_state

# ---- names and discovery -----------------------------------------------------------------------------------------


def test_checkpoints_are_found_newest_first_ignoring_temporary_files_and_links(tmp_path):
    for name in ["ep0-ba3-rank0.pt", "ep2-ba12-rank0.pt", "ep1-ba6-rank0.pt", "ep2-ba12-rank1.pt", "notes.txt"]:
        (tmp_path / name).write_text("x")
    (tmp_path / ".ep3-ba15-rank0.pt.tmp-123").write_text("x")
    link_latest(tmp_path / "ep9-ba99-rank0.pt", tmp_path / "ep0-ba3-rank0.pt")  # a link that fits the pattern
    found = find_checkpoints(tmp_path, "ep{epoch}-ba{batch}-rank{rank}.pt")
    assert [p.name for p in found] == ["ep2-ba12-rank0.pt", "ep1-ba6-rank0.pt", "ep0-ba3-rank0.pt"]
    assert find_checkpoints(tmp_path / "missing", "ep{epoch}.pt") == []


def test_finding_checkpoints_passes_over_folders_being_written_and_entries_that_vanish(tmp_path, monkeypatch):
    """A saver's upload thread prunes while the training thread writes: a checkpoint folder renamed into place, or a
    file removed, between the listing and the stat must not fail the scan (a 2-node job once died of it)."""
    for name in ["ep0-ba4", "ep1-ba8"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "composer.pt").write_text("x")
    (tmp_path / ".ep2-ba12.tmp-7").mkdir()  # a sharded checkpoint being written: never entered
    (tmp_path / ".ep2-ba12.tmp-7" / "ep9-ba99").mkdir()
    scandir, stat = os.scandir, Path.stat

    def renamed_scandir(path):  # the folder being written is renamed into place as it is listed
        if Path(path).name.startswith(".ep2-ba12"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", renamed_scandir)
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}") == [tmp_path / "ep1-ba8", tmp_path / "ep0-ba4"]

    def vanishing_stat(self, *args, **kwargs):  # pruned between the listing and the stat
        if self.name == "ep1-ba8":
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return stat(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", vanishing_stat)
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}") == [tmp_path / "ep0-ba4"]


def test_pruning_keeps_the_one_just_written_and_the_newest_behind_it(tmp_path):
    names = ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "ep1-ba5-rank0.pt", "ep2-ba9-rank0.pt", "ep2-ba9-rank1.pt"]
    for name in [*names, "ep0-ba0-rank0.pt.bak", "notes.txt", ".ep0-ba0-rank0.pt.tmp-1"]:
        (tmp_path / name).write_text("x")
    link_latest(tmp_path / "latest-rank0.pt", tmp_path / "ep0-ba1-rank0.pt")
    pattern = "ep{epoch}-ba{batch}-rank{rank}.pt"
    deleted = prune_checkpoints(
        tmp_path, pattern, 2, tmp_path / "ep1-ba5-rank0.pt", protect=[tmp_path / "latest-rank0.pt"]
    )
    # ba9 claims more training than the one just written (a run this one went back from): it goes first; ba1 is
    # the target of 'latest', which could not be moved, so it stays.
    assert [p.name for p in deleted] == ["ep2-ba9-rank0.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            ".ep0-ba0-rank0.pt.tmp-1",
            "ep0-ba0-rank0.pt.bak",
            "ep0-ba1-rank0.pt",
            "ep0-ba2-rank0.pt",
            "ep1-ba5-rank0.pt",
            "ep2-ba9-rank1.pt",
            "latest-rank0.pt",
            "notes.txt",
        ]
    )
    deleted = prune_checkpoints(tmp_path, pattern, 1, tmp_path / "ep1-ba5-rank0.pt")
    assert sorted(p.name for p in deleted) == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").is_symlink()  # a link is never a candidate
    with pytest.raises(ValueError, match="keep=0 must be at least 1"):
        prune_checkpoints(tmp_path, pattern, 0, tmp_path / "ep1-ba5-rank0.pt")


def test_checkpoints_in_subfolders_and_with_the_run_name(tmp_path):
    for name in ["r1/ba10/model.pt", "r1/ba9/model.pt", "r2/ba11/model.pt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    found = find_checkpoints(tmp_path, "{run_name}/ba{batch}/model.pt", run_name="r1")
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["r1/ba10/model.pt", "r1/ba9/model.pt"]


def test_name_patterns_are_checked():
    state = trained_state()
    assert format_checkpoint_name("ep{epoch}-ba{batch}-sp{sample}-rank{rank}.pt", state) == "ep0-ba3-sp15-rank0.pt"
    with pytest.raises(ValueError, match=r"unknown_field.*ep\{epoch\}"):
        format_checkpoint_name("ep{unknown_field}.pt", state)
