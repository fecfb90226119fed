import pytest

from composer.loggers import MLflowLogger, MLflowLoggerHparams, is_mlflow_available
from tests.loggers.conftest import assert_same_series, mlflow_uri, numeric_series

pytestmark = pytest.mark.skipif(not is_mlflow_available(), reason="mlflow is not installed")


@pytest.mark.slow  # the first MLflow database of a session takes seconds to create
def test_runs_read_back_with_the_mlflow_client_equal_the_in_memory_logger(run_training, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = mlflow_uri(tmp_path)
    destination = MLflowLogger(uri, experiment_name="tests", run_name="tiny", tags={"owner": "ci"})
    memory = run_training(destination)

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(destination.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "tiny"
    assert run.data.tags["owner"] == "ci" and run.data.tags["trainer/algorithms"] == "[]"
    expected = numeric_series(memory)
    assert set(run.data.metrics) == set(expected)
    for key, series in expected.items():
        history = sorted(client.get_metric_history(destination.run_id, key), key=lambda m: (m.step, m.timestamp))
        assert_same_series([(m.step, m.value) for m in history], series, key, rel=1e-12)
    assert (tmp_path / "mlartifacts").parent == tmp_path  # artifacts default next to the database


def test_bad_location_fails_when_built(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"tracking_uri='.*file/mlflow.db' cannot be written"):
        MLflowLogger(f"sqlite:///{tmp_path / 'file' / 'mlflow.db'}")
    with pytest.raises(ValueError, match="cannot be written"):
        MLflowLogger(str(tmp_path / "file" / "store"))


def test_hparams_build_the_logger(tmp_path):
    logger = MLflowLoggerHparams(tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", run_name="r").initialize_object()
    assert logger.run_name == "r" and logger.artifact_location == str(tmp_path.resolve() / "mlartifacts")
