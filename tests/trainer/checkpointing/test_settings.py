"""The Trainer's checkpoint settings (composer/trainer/checkpointing.py): the saver they make, and the arguments they
refuse before anything runs."""

from __future__ import annotations

import pytest

from composer import Trainer
from composer.callbacks.checkpoint_saver import CheckpointSaver
from tests.common import SimpleModel, make_dataloader
from tests.trainer.checkpointing.runs import make_trainer


def test_no_saver_without_a_save_folder():
    trainer = make_trainer()
    assert not any(isinstance(c, CheckpointSaver) for c in trainer.state.callbacks)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"autoresume": True}, "autoresume=True needs save_folder"),
        ({"autoresume": True, "save_folder": "x", "save_weights_only": True}, "weights-only"),
        ({"autoresume": True, "save_folder": "ckpt/{run_name}"}, "needs a run_name"),
        ({"load_ignore_keys": "module.2.*"}, "list of glob patterns"),
    ],
)
def test_checkpoint_arguments_are_checked(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make_trainer(**kwargs)


def test_file_urls_are_local_paths(tmp_path):
    trainer = make_trainer(save_folder=f"file://{tmp_path}/runs", max_duration="1ep")
    trainer.fit()
    trainer.close()
    assert (tmp_path / "runs" / "ep1-ba4-rank0.pt").is_file()


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("gs://bucket-a/ckpt", r"save_folder='gs://bucket-a/ckpt' uses the scheme 'gs://', which is not supported"),
        ("ftp://host/ckpt", r"save_folder='ftp://host/ckpt' uses the scheme 'ftp://'.*s3://BUCKET/PREFIX"),
        ("s3:/bucket-a/ckpt", r"save_folder='s3:/bucket-a/ckpt' is malformed.*two slashes"),
        ("s3:///ckpt", r"save_folder='s3:///ckpt' has no bucket"),
        ("s3://Bucket_A/ckpt", r"invalid bucket name 'Bucket_A'"),
        ("s3://127.0.0.1:9000/ckpt", r"invalid bucket name.*endpoint_url"),
    ],
)
def test_the_constructor_refuses_unknown_schemes_and_malformed_urls(folder, message):
    with pytest.raises(ValueError, match=message):
        make_trainer(save_folder=folder)


def test_on_upload_failure_is_checked():
    with pytest.raises(
        ValueError, match=r"on_upload_failure='keep'; expected one of \['raise', 'keep_local'\]: 'raise' "
    ):
        Trainer(model=SimpleModel(), train_dataloader=make_dataloader(), max_duration="1ba", on_upload_failure="keep")
