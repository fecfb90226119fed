"""The ``composer`` command: ``train``, ``eval``, ``list`` and ``compare`` (run ``composer --help``).

Also runnable as ``python -m composer.cli``.
"""

__all__: list[str] = []
