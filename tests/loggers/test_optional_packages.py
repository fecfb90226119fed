"""A destination whose package is missing says which extra to install, when it is built."""

import pytest

from composer.loggers import (
    MLflowLogger,
    ProgressBarLogger,
    TensorboardLogger,
    WandBLogger,
    optional_packages,
    progress_bar,
)


@pytest.fixture
def nothing_installed(monkeypatch):
    monkeypatch.setattr(optional_packages, "is_package_available", lambda name: False)
    monkeypatch.setattr(progress_bar, "is_package_available", lambda name: False)


@pytest.mark.parametrize(
    ("build", "package"),
    [
        (lambda: TensorboardLogger("tb"), "tensorboard"),
        (lambda: MLflowLogger("sqlite:///x.db"), "mlflow"),
        (lambda: WandBLogger(), "wandb"),
        (lambda: ProgressBarLogger(backend="rich"), "rich"),
    ],
)
def test_missing_backend_names_the_extra(nothing_installed, build, package):
    with pytest.raises(ImportError, match=rf"needs the optional package '{package}'.*opencomposer\[loggers\]"):
        build()


def test_auto_backend_falls_back_to_tqdm_without_rich(nothing_installed):
    import io

    from composer.loggers.bar_display import TqdmDisplay

    bar = ProgressBarLogger(enabled=True, stream=io.StringIO())
    assert isinstance(bar._get_display(), TqdmDisplay)
