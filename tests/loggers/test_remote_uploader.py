"""RemoteUploader: the run's log files in an S3-compatible store (moto on loopback, authentication on)."""

from __future__ import annotations

import pytest
import torch

from composer import Trainer
from composer.loggers import CSVLogger, FileLogger, RemoteUploader, TensorboardLogger, is_tensorboard_available
from tests.common import SimpleModel, make_dataloader

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")


def train(folder, loggers, max_duration="2ep", **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=max_duration,
        loggers=loggers,
        progress_bar=False,
        seed=0,
        run_name="logs",
        **kwargs,
    )
    trainer.fit()
    return trainer


@pytest.mark.skipif(not is_tensorboard_available(), reason="needs tensorboard")
def test_file_csv_and_tensorboard_logs_are_uploaded_at_each_interval_and_at_close(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    client = s3_env.client()
    options = {"endpoint_url": s3_env.endpoint_url, "retry_budget": 5}
    uploader = RemoteUploader(f"s3://{bucket}/logs/{{run_name}}", storage_options=options, upload_interval="2ba")
    loggers = [
        FileLogger(tmp_path / "log.txt", log_interval="1ba"),
        CSVLogger(tmp_path / "metrics.csv"),
        TensorboardLogger(tmp_path / "tb"),
        uploader,
    ]
    trainer = train(tmp_path, loggers)
    keys = s3_env.keys(bucket)  # fit has returned: every upload so far is complete
    assert {"logs/logs/log.txt", "logs/logs/metrics.csv"} <= set(keys)
    assert any(key.startswith("logs/logs/tb/events.out.tfevents") for key in keys)
    trainer.close()
    for name in ("log.txt", "metrics.csv"):
        remote = client.get_object(Bucket=bucket, Key=f"logs/logs/{name}")["Body"].read()
        assert remote == (tmp_path / name).read_bytes()  # the files as closed, whole


def test_a_resumed_run_on_a_fresh_machine_continues_the_uploaded_log(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    options = {"endpoint_url": s3_env.endpoint_url, "retry_budget": 5}
    first = tmp_path / "first"
    trainer = train(
        first,
        [FileLogger(first / "log.txt", log_interval="1ba"), RemoteUploader(f"s3://{bucket}/logs", options)],
        max_duration="1ep",
        save_folder=f"s3://{bucket}/ckpt",
        storage_options={**options, "local_folder": str(first / "ckpt")},
    )
    trainer.close()
    before = (first / "log.txt").read_text().splitlines()
    second = tmp_path / "second"  # nothing local: the log comes from the store
    trainer = train(
        second,
        [FileLogger(second / "log.txt", log_interval="1ba"), RemoteUploader(f"s3://{bucket}/logs", options)],
        max_duration="2ep",
        save_folder=f"s3://{bucket}/ckpt",
        autoresume=True,
        storage_options={**options, "local_folder": str(second / "ckpt")},
    )
    trainer.close()
    after = (second / "log.txt").read_text().splitlines()
    assert after[: len(before)] == before and len(after) > len(before)
    assert s3_env.client().get_object(Bucket=bucket, Key="logs/log.txt")["Body"].read().decode().splitlines() == after


def test_the_trainer_constructor_reports_a_bad_remote_folder(s3_env, tmp_path):
    options = {"endpoint_url": s3_env.endpoint_url}
    with pytest.raises(ValueError, match=r"remote_folder='s3://no-such-bucket-y/logs': the bucket 'no-such-bucket-y'"):
        Trainer(
            model=SimpleModel(),
            train_dataloader=make_dataloader(),
            max_duration="1ep",
            loggers=[FileLogger(tmp_path / "log.txt"), RemoteUploader("s3://no-such-bucket-y/logs", options)],
            progress_bar=False,
        )
    with pytest.raises(ValueError, match=r"remote_folder='ftp://host/logs' uses the scheme 'ftp://'"):
        RemoteUploader("ftp://host/logs")
    assert not (tmp_path / "log.txt").exists()


def test_a_recipe_builds_it_and_the_trainer_checks_the_store(s3_env, tmp_path):
    from composer.config import TrainerHparams

    bucket = s3_env.create_bucket()
    uploader = {"storage_options": {"endpoint_url": s3_env.endpoint_url, "retry_budget": 5}, "upload_interval": "2ba"}
    recipe = {
        "model": {"mlp": {"in_features": 16, "hidden": [8]}},
        "train_dataset": {"synthetic_classification": {"shape": [16], "num_samples": 16}},
        "train_batch_size": 4,
        "max_duration": "2ba",
        "optimizer": {"sgd": {"lr": 0.1}},
        "run_name": "recipe",
        "loggers": {
            "file": {"filename": str(tmp_path / "log.txt")},
            "remote_uploader": {"remote_folder": f"s3://{bucket}/logs/{{run_name}}", **uploader},
        },
        "progress_bar": False,
    }
    trainer = TrainerHparams.from_dict(recipe).initialize_object()
    built = [d for d in trainer.logger.destinations if isinstance(d, RemoteUploader)]
    assert len(built) == 1 and built[0].upload_interval.value == 2
    trainer.fit()
    trainer.close()
    assert "logs/recipe/log.txt" in s3_env.keys(bucket)
    # A bucket that does not exist: refused by the Trainer's constructor, before any training.
    missing = {**recipe, "loggers": {"remote_uploader": {"remote_folder": "s3://no-such-bucket-x/logs", **uploader}}}
    with pytest.raises(ValueError, match=r"remote_folder='s3://no-such-bucket-x/logs': the bucket .* does not exist"):
        TrainerHparams.from_dict(missing).initialize_object()
