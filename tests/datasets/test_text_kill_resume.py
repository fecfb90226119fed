"""text_files with a real tokenizer, on 2 ranks under torchrun: ``composer train`` SIGKILLed mid-epoch and run again
ends bitwise equal to an uninterrupted 2-rank run (CPU, gloo).

The CI's kill-and-resume test with 2 ranks (tests/datasets/kill_resume.py runs it; the other sources' are
test_hf_kill_resume.py and test_streaming.py, and benchmarks/data_resume_matrix.py runs every source on 1 and 2
ranks, with and without workers)."""

from __future__ import annotations

import os

import pytest

from tests.datasets.kill_resume import kill_and_resume, write_data


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs SIGKILL and process groups")
def test_two_ranks_killed_mid_epoch_and_run_again_end_bitwise_equal(tmp_path):
    data = write_data(tmp_path, sources=("text_files",))
    outcome = kill_and_resume(tmp_path / "case", data, "text_files", workers=0, nproc=2)
    logs = "\n".join(f"== {name}\n{text[-3000:]}" for name, text in outcome.logs.items())
    assert outcome.codes == [0, outcome.killed_code, 0], logs
    assert outcome.steps_per_epoch is not None and outcome.kill_at is not None
    # killed in the second epoch, resumed from the checkpoint of the batch before: mid-epoch
    assert outcome.steps_per_epoch < outcome.kill_at - 1 < 2 * outcome.steps_per_epoch, logs
    assert outcome.resumed_at == outcome.kill_at - 1, logs
    assert outcome.max_diff == 0.0 and outcome.passed
