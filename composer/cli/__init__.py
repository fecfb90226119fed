"""The ``composer`` command: ``train``, ``eval``, ``list``, ``compare`` and ``launch`` (run ``composer --help``).

Also runnable as ``python -m composer.cli``.
"""

__all__: list[str] = []
