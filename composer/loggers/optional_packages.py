"""The optional packages that some destinations need, and the error that names the extra installing them."""

from __future__ import annotations

import importlib.util

__all__ = ["is_package_available", "require_package"]

# Import name -> the pip extra of this distribution that installs it.
_EXTRAS = {"tensorboard": "loggers", "mlflow": "loggers", "wandb": "loggers", "rich": "loggers"}


def is_package_available(name: str) -> bool:
    """Whether the package importable as ``name`` is installed (it is not imported).

    Example:
        >>> is_package_available("tqdm"), is_package_available("not_a_package_anyone_installed")
        (True, False)
    """
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_package(name: str, needed_by: str) -> None:
    """Raises ImportError naming the extra to install when the package ``name`` is missing.

    Args:
        name (str): The import name (``'tensorboard'``, ``'mlflow'``, ``'wandb'``, ``'rich'``).
        needed_by (str): Who needs it, for the message (a class name).

    Example:
        >>> require_package("not_a_package_anyone_installed", "MyLogger")
        Traceback (most recent call last):
        ...
        ImportError: MyLogger needs the optional package 'not_a_package_anyone_installed', which is not installed. ...
    """
    if is_package_available(name):
        return
    extra = _EXTRAS.get(name)
    how = f"pip install 'opencomposer[{extra}]' (or pip install {name})" if extra is not None else f"pip install {name}"
    raise ImportError(f"{needed_by} needs the optional package {name!r}, which is not installed. To fix: {how}.")
