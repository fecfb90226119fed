"""The library's version, kept in one place (read by pyproject.toml too)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
"""The version of the installed ``opencomposer`` distribution (also ``composer.__version__``)."""
