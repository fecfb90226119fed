"""The speed-up methods as plain functions, for use in any PyTorch training loop."""

__all__: list[str] = []
